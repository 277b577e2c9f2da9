"""K-composition scores: the low-rank formula equals the explicit one; aligned heads beat random ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.circuits.composition import k_composition_score, lowrank_fro, random_baseline


def explicit(W_V, W_O, W_Q, W_K) -> float:
    L = W_V @ W_O  # (d, d)
    R = (W_Q @ W_K.T).T  # (d, d)
    return float(torch.linalg.norm(L @ R) / (torch.linalg.norm(L) * torch.linalg.norm(R)))


def test_lowrank_frobenius_equals_explicit():
    g = torch.Generator().manual_seed(0)
    A, C = torch.randn(40, 6, generator=g, dtype=torch.float64), torch.randn(40, 5, generator=g, dtype=torch.float64)
    M = torch.randn(6, 5, generator=g, dtype=torch.float64)
    assert lowrank_fro(A, M, C).item() == pytest.approx(torch.linalg.norm(A @ M @ C.T).item(), rel=1e-10)


def test_score_equals_explicit_definition():
    g = torch.Generator().manual_seed(1)
    W_V, W_Q, W_K = (torch.randn(32, 8, generator=g, dtype=torch.float64) for _ in range(3))
    W_O = torch.randn(8, 32, generator=g, dtype=torch.float64)
    assert k_composition_score(W_V, W_O, W_Q, W_K) == pytest.approx(explicit(W_V, W_O, W_Q, W_K), rel=1e-9)


def test_aligned_heads_compose_far_above_random():
    """A later head whose keys read exactly the subspace the earlier head writes composes strongly."""
    g = torch.Generator().manual_seed(2)
    d, dh = 64, 8
    basis = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    U = basis[:, :dh]  # the subspace written by the earlier head
    W_V = torch.randn(d, dh, generator=g, dtype=torch.float64)
    W_O = torch.randn(dh, dh, generator=g, dtype=torch.float64) @ U.T  # writes only into U
    W_K = U @ torch.randn(dh, dh, generator=g, dtype=torch.float64)  # keys read only from U
    W_Q = torch.randn(d, dh, generator=g, dtype=torch.float64)
    aligned = k_composition_score(W_V, W_O, W_Q, W_K)
    W_K_orth = basis[:, dh : 2 * dh] @ torch.randn(dh, dh, generator=g, dtype=torch.float64)  # reads elsewhere
    assert k_composition_score(W_V, W_O, W_Q, W_K_orth) == pytest.approx(0.0, abs=1e-12)
    base = random_baseline(d, dh, 200, torch.Generator().manual_seed(3))
    assert aligned > np.quantile(base, 0.99) and aligned > 2 * base.mean()


def test_baseline_is_seeded():
    a = random_baseline(16, 4, 5, torch.Generator().manual_seed(9))
    b = random_baseline(16, 4, 5, torch.Generator().manual_seed(9))
    assert np.array_equal(a, b) and np.all((a > 0) & (a < 1))


def _hand_folded(model, layer, gemma):
    """Per-head W_Q, W_K, W_V (d, dh), W_O (dh, d) of a tiny HF model, with the norm scales folded by hand."""
    cfg = model.config
    attn = model.model.layers[layer].self_attn
    blk = model.model.layers[layer]
    H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
    dh = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    scale = (lambda w: 1 + w.detach()) if gemma else (lambda w: w.detach())
    g_in = scale(blk.input_layernorm.weight)
    heads = lambda w, n: [w.detach()[i * dh:(i + 1) * dh].T * g_in[:, None] for i in range(n)]  # noqa: E731
    Q, K, V = heads(attn.q_proj.weight, H), heads(attn.k_proj.weight, Hkv), heads(attn.v_proj.weight, Hkv)
    O = [attn.o_proj.weight.detach()[:, i * dh:(i + 1) * dh].T for i in range(H)]
    if gemma:
        Q = [q * scale(attn.q_norm.weight)[None, :] for q in Q]
        K = [k * scale(attn.k_norm.weight)[None, :] for k in K]
        O = [o * scale(blk.post_attention_layernorm.weight)[None, :] for o in O]
    return Q, K, V, O, [h // (H // Hkv) for h in range(H)]


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_folded_head_weights_match_a_hand_folded_reference(family):
    from bench.families.circuits.composition import folded_head_weights
    from bench.models import arch as arch_mod
    from tests.conftest import build_tiny

    model = build_tiny(family, seed=4)
    arch = arch_mod.inspect(model)
    W_Q, W_K, W_V, W_O, kv = folded_head_weights(model, arch, 1)
    Q, K, V, O, kv_ref = _hand_folded(model, 1, family == "gemma3")
    assert list(kv) == kv_ref
    for h in range(len(Q)):
        assert torch.allclose(W_Q[h].double(), Q[h].double(), atol=1e-5)
        assert torch.allclose(W_O[h].double(), O[h].double(), atol=1e-5)
    for h in range(len(K)):
        assert torch.allclose(W_K[h].double(), K[h].double(), atol=1e-5)
        assert torch.allclose(W_V[h].double(), V[h].double(), atol=1e-5)


def test_permuted_baseline_keeps_norms_and_breaks_alignment():
    from bench.families.circuits.composition import k_composition_score, permuted_baseline

    g = torch.Generator().manual_seed(0)
    d, dh = 48, 4
    W_V = torch.randn(d, dh, generator=g, dtype=torch.float64)
    W_O = torch.randn(dh, d, generator=g, dtype=torch.float64)
    W_K = W_O.T.clone()  # the later head reads exactly what the earlier one writes: strong composition
    W_Q = torch.randn(d, dh, generator=g, dtype=torch.float64)
    observed = k_composition_score(W_V, W_O, W_Q, W_K)
    base = permuted_baseline(W_V, W_O, W_Q, W_K, 200, torch.Generator().manual_seed(1))
    assert observed > np.quantile(base, 0.99)
    ident = permuted_baseline(W_V, W_O, W_Q, W_K, 1, torch.Generator().manual_seed(1))
    perm = torch.randperm(d, generator=torch.Generator().manual_seed(1))
    assert ident[0] == pytest.approx(k_composition_score(W_V, W_O[:, perm], W_Q, W_K))


def test_exceeds_baselines_is_refuted_by_one_baseline_and_marks_approximate():
    import pandas as pd

    from bench.stats import Outcome, evaluate

    rng = np.random.default_rng(0)
    rows = [("observed", "k", 0.5), ("observed", "flag", 1.0)]
    rows += [("baseline", "gauss", v) for v in rng.normal(0.2, 0.01, 300)]  # observed far above
    rows += [("baseline", "perm", v) for v in rng.normal(0.8, 0.01, 300)]  # observed far below
    f = pd.DataFrame(rows, columns=["kind", "metric", "value"])
    params = dict(observed={"kind": "observed", "metric": "k"}, flag={"metric": "flag"},
                  baselines=[{"kind": "baseline", "metric": "gauss"}, {"kind": "baseline", "metric": "perm"}])
    v = evaluate(f, "exceeds_baselines", params)
    assert v.outcome is Outcome.INCONCLUSIVE and "approximate" in v.reason
    both_low = {**params, "baselines": [{"kind": "baseline", "metric": "perm"}] * 2}
    approx = evaluate(f, "exceeds_baselines", both_low)  # an approximate measurement never refutes
    assert approx.outcome is Outcome.INCONCLUSIVE and "could not have shown the effect" in approx.reason
    exact = evaluate(f[f["metric"] != "flag"], "exceeds_baselines", both_low)
    assert exact.outcome is Outcome.REFUTED and exact.sensitivity
    both_high = {**params, "baselines": [{"kind": "baseline", "metric": "gauss"}] * 2}
    assert evaluate(f, "exceeds_baselines", both_high).outcome is Outcome.SUPPORTED
    mixed = evaluate(f[f["metric"] != "flag"], "exceeds_baselines", params)  # beats gauss, far below perm
    assert mixed.outcome is Outcome.REFUTED and mixed.sensitivity  # one conjunct false: the claim is false
    assert [p for p in mixed.reason.split("; ") if p.startswith("vs gauss")][0].startswith("vs gauss: SUPPORTED")


def test_a_block_without_a_norm_before_attention_folds_nothing_into_q_k_and_v():
    """OLMo 2 places its norms after attention: with no input norm, Q, K and V are the block's own head weights
    (and W_O still folds an output norm when there is one)."""
    import dataclasses

    from bench.families.circuits.composition import folded_head_weights
    from bench.models import arch as arch_mod
    from bench.models.heads import head_weights
    from tests.conftest import build_tiny

    model = build_tiny("llama", seed=4)
    arch = arch_mod.inspect(model)
    blocks = list(arch.blocks)
    blocks[1] = dataclasses.replace(blocks[1], attn_in_norm=None)
    bare = dataclasses.replace(arch, blocks=type(arch.blocks)(blocks))
    W_Q, W_K, W_V, W_O, kv = folded_head_weights(model, bare, 1)
    hw = head_weights(model, arch, 1)
    for got, raw in ((W_Q, hw.W_Q), (W_K, hw.W_K), (W_V, hw.W_V), (W_O, hw.W_O)):
        torch.testing.assert_close(got, raw)
    g = model.model.layers[1].input_layernorm.weight.detach()
    assert not torch.allclose(g, torch.ones_like(g))  # the norm left out would have changed them
