"""Layer linearity (LLM-Microscope, Razzhigaev et al. 2025) from streamed Gram matrices.

For hidden states H^l (N × d) of consecutive layers, centre each matrix, divide by its Frobenius norm, and solve
A* = argmin ‖X A − Y‖_F² (X = normalised H^l, Y = normalised H^{l+1}).  The linearity score is
1 − ‖X A* − Y‖_F² = tr(Cᵀ G⁺ C) with G = XᵀX and C = XᵀY, and the per-token error is E_i = ‖x_i A* − y_i‖₂.

Everything the solution needs — XᵀX per layer, H^lᵀH^{l+1} per pair, column sums and squared norms — adds up
over tokens, so :class:`GramStats` accumulates it in float64 batch by batch and memory does not grow with N.
The per-token errors then need a second pass over the states (:func:`token_errors`).  A held-out score fits the
maps on the tokens not marked ``test`` and evaluates them on the rest from the Gram sums alone.

The in-sample score is optimistic: d² coefficients fitted to N tokens reach a score near 1 on noise when N is
not much larger than d.  The claims are therefore decided on the *cross-fitted* score (:func:`crossfit_sums`):
texts are split in two folds, each fold is scored by the maps fitted on the other, and the per-text residual and
total sums give the pooled score and a bootstrap interval over texts.  The adjusted score is reported beside.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

RCOND = 1e-10  # eigenvalues of the normalised Gram below RCOND × the largest are treated as zero


@dataclass
class GramStats:
    """Running sums over tokens for L + 1 layers (mutable accumulator; float64)."""

    n: int
    sums: torch.Tensor  # (L+1, d)  Σ h
    sq: torch.Tensor  # (L+1,)  Σ ‖h‖²
    gram: torch.Tensor  # (L+1, d, d)  Σ h^l h^lᵀ per layer
    cross: torch.Tensor  # (L, d, d)  Σ h^l h^{l+1}ᵀ

    @classmethod
    def empty(cls, n_layers: int, d: int) -> "GramStats":
        f = torch.float64
        return cls(0, torch.zeros(n_layers + 1, d, dtype=f), torch.zeros(n_layers + 1, dtype=f),
                   torch.zeros(n_layers + 1, d, d, dtype=f), torch.zeros(n_layers, d, d, dtype=f))

    def update(self, states: torch.Tensor) -> None:
        """Add tokens: `states` (L+1, n, d), any float dtype."""
        h = states.to(torch.float64)
        self.n += h.shape[1]
        self.sums += h.sum(dim=1)
        self.sq += (h * h).sum(dim=(1, 2))
        for l in range(self.gram.shape[0]):  # one layer at a time keeps the float64 temporaries small
            x = h[l]  # (n, d)
            self.gram[l] += x.T @ x
            if l < self.cross.shape[0]:
                self.cross[l] += x.T @ h[l + 1]

    def covariance(self, l: int) -> torch.Tensor:
        """(d, d) centred covariance of layer l."""
        mean = self.sums[l] / self.n
        return self.gram[l] / self.n - torch.outer(mean, mean)

    def minus(self, other: "GramStats") -> "GramStats":
        return GramStats(self.n - other.n, self.sums - other.sums, self.sq - other.sq, self.gram - other.gram,
                         self.cross - other.cross)


@dataclass(frozen=True)
class LinearMaps:
    """Solved maps in normalised coordinates, for every consecutive pair of layers."""

    A: torch.Tensor  # (L, d, d)  float64
    mean: torch.Tensor  # (L+1, d)  column means used for centring
    scale: torch.Tensor  # (L+1,)  Frobenius norm of each centred layer
    score: torch.Tensor  # (L,)  1 − ‖XA − Y‖²_F (in-sample, the paper's score)


def _centred(stats: GramStats, l: int, mean: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(Centred Gram of the input layer of pair l, squared Frobenius norm of centred layer l)."""
    g = stats.gram[l] - stats.sums[l, :, None] * mean[None, :] - mean[:, None] * stats.sums[l, None, :] \
        + stats.n * torch.outer(mean, mean)
    return g, float(torch.trace(g))


def _solve_sym(g: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """G⁺ C for a symmetric positive semi-definite G: Cholesky when G is well conditioned, else the
    eigen-decomposition pseudo-inverse (directions with eigenvalue < RCOND × the largest count as zero)."""
    chol, info = torch.linalg.cholesky_ex(g)
    if int(info) == 0:
        diag = torch.diagonal(chol)
        if float(diag.min() ** 2) > RCOND * float(diag.max() ** 2) * 1e2:
            return torch.cholesky_solve(c, chol)
    lam, vec = torch.linalg.eigh(g)
    keep = lam > RCOND * lam.max().clamp(min=0)
    inv = torch.where(keep, 1.0 / torch.where(keep, lam, torch.ones_like(lam)), torch.zeros_like(lam))
    return (vec * inv) @ (vec.T @ c)


def _sumsq_centred(stats: GramStats, l: int, mean: torch.Tensor) -> float:
    return float(stats.sq[l] - 2 * mean @ stats.sums[l] + stats.n * mean @ mean)


def solve(stats: GramStats) -> LinearMaps:
    """The least-squares map of every pair (l, l+1), the last pair included."""
    L = stats.cross.shape[0]
    mean = stats.sums / stats.n  # (L+1, d)
    scale = torch.tensor([max(_sumsq_centred(stats, l, mean[l]), 0.0) ** 0.5 for l in range(L + 1)],
                         dtype=torch.float64)
    A, score = [], []
    for l in range(L):
        g, _ = _centred(stats, l, mean[l])
        c = stats.cross[l] - stats.sums[l, :, None] * mean[l + 1][None, :] \
            - mean[l][:, None] * stats.sums[l + 1][None, :] + stats.n * torch.outer(mean[l], mean[l + 1])
        sx, sy = scale[l], scale[l + 1]
        gn, cn = g / (sx * sx), c / (sx * sy)  # Gram and cross matrix in normalised coordinates
        a = _solve_sym(gn, cn)  # (d, d)
        A.append(a)
        score.append(torch.sum(cn * a))  # tr(Cnᵀ A)
    return LinearMaps(torch.stack(A), mean, scale, torch.stack(score))


def heldout_score(train: GramStats, test: GramStats) -> torch.Tensor:
    """(L,) 1 − ‖X_te A − Y_te‖² / ‖Y_te‖² with maps, means and scales from `train` (normalised coordinates)."""
    maps = solve(train)
    out = []
    for l in range(maps.A.shape[0]):
        mx, my = maps.mean[l], maps.mean[l + 1]
        sx, sy = maps.scale[l], maps.scale[l + 1]
        gxx, _ = _centred(test, l, mx)
        gxx = gxx / (sx * sx)
        gxy = (test.cross[l] - test.sums[l, :, None] * my[None, :] - mx[:, None] * test.sums[l + 1][None, :]
               + test.n * torch.outer(mx, my)) / (sx * sy)
        yy = _sumsq_centred(test, l + 1, my) / float(sy * sy)
        a = maps.A[l]
        resid = torch.sum((gxx @ a) * a) - 2 * torch.sum(gxy * a) + yy
        out.append(1 - resid / yy)
    return torch.stack(out)


def adjusted_score(score: torch.Tensor, n: int, d: int) -> torch.Tensor:
    """Adjusted R² of the in-sample score: 1 − (1 − R²)(N − 1)/(N − d − 1) (d regressors per output); NaN when
    N ≤ d + 1.  It removes the optimism of fitting d·d coefficients to N tokens only on average."""
    if n <= d + 1:
        return torch.full_like(score, float("nan"))
    return 1 - (1 - score) * (n - 1) / (n - d - 1)


def crossfit_sums(maps: LinearMaps, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token residual and total sums of squares of `states` (L+1, n, d) under maps fitted on *other* texts,
    in the raw units of layer l + 1 (so that sums over tokens scored by different folds' maps add up):
    (resid (L, n), total (L, n)) with resid = ‖x̃A − ỹ‖²·s_y² and total = ‖ỹ‖²·s_y² (ỹ centred by the fit's mean).
    The cross-fitted score of any set of tokens is 1 − Σ resid / Σ total."""
    h = states.to(torch.float64)
    z = (h - maps.mean[:, None, :]) / maps.scale[:, None, None]  # (L+1, n, d)
    pred = torch.einsum("lnd,lde->lne", z[:-1], maps.A)  # (L, n, d)
    sy2 = (maps.scale[1:] ** 2)[:, None]  # (L, 1)
    resid = ((pred - z[1:]) ** 2).sum(dim=-1) * sy2
    total = (z[1:] ** 2).sum(dim=-1) * sy2
    return resid, total


def token_errors(maps: LinearMaps, states: torch.Tensor) -> torch.Tensor:
    """(n, L) per-token error E_i^l = ‖x̃_i A − ỹ_i‖₂ for `states` (L+1, n, d), in normalised coordinates."""
    h = states.to(torch.float64)
    z = (h - maps.mean[:, None, :]) / maps.scale[:, None, None]  # (L+1, n, d)
    pred = torch.einsum("lnd,lde->lne", z[:-1], maps.A)  # (L, n, d)
    return torch.linalg.vector_norm(pred - z[1:], dim=-1).T  # (n, L)


def stacked_reference(states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same formula on all tokens at once, by SVD least squares: (score (L,), errors (n, L)).

    The simple implementation that holds every state in memory; for tests and the benchmark.
    """
    h = states.to(torch.float64)  # (L+1, n, d)
    z = h - h.mean(dim=1, keepdim=True)
    z = z / torch.linalg.matrix_norm(z)[:, None, None]
    scores, errs = [], []
    for l in range(h.shape[0] - 1):
        sol = torch.linalg.lstsq(z[l], z[l + 1], rcond=None, driver="gelsd").solution  # SVD-based
        r = z[l] @ sol - z[l + 1]
        scores.append(1 - (r * r).sum())
        errs.append(torch.linalg.vector_norm(r, dim=-1))
    return torch.stack(scores), torch.stack(errs, dim=1)
