"""Cross-check of the microscope family's kernels against the LLM-Microscope authors' own package,
``llm-microscope`` 0.0.7 (PyPI; AIRI-Institute/LLM-Microscope), on the same inputs.

* **Layer linearity** (``procrustes_similarity``: centre, divide by the Frobenius norm, least squares through an
  SVD pseudo-inverse, 1 − residual) and **anisotropy** (``calculate_anisotropy_torch``: largest over summed
  eigenvalues of the centred covariance, from an SVD) are the same definitions as bench's (streamed Gram sums,
  power iteration): asserted to a relative 1e-9 on full-rank states (hidden states are).  On a rank-deficient
  layer the two part ways: the package's pseudo-inverse divides by round-off singular values, bench treats those
  below 1e-10 of the largest as zero (an exact 5-dimensional plane in R^24 scored 0.60 there, 0.86 here).
* **TwoNN** (``intrinsic_dimension``) is the authors' code's fit, which bench computes as ``twonn_both(...)[1]``
  (``intrinsic_dim_code``): asserted to a relative 1e-6 on clouds without duplicates.  (The package gathers the
  neighbour distances into a float32 tensor before dividing; that rounding, ~1e-8 per ratio, is what the
  tolerance absorbs: a different definition — the CDF without its offset, a tenth more or fewer ratios in the
  fit — moves the estimate by 1e-3 or more.)  On a cloud with duplicates bench removes them first and equals the
  package on the distinct rows; the package on the raw cloud gives a larger value, which is the convention
  difference the microscope specs state.
* **Logit lens** (``logit_lens``): per layer and position, −log of the top-1 probability of lm_head(hidden state)
  (no final norm below the last layer) equals bench's ``lens_loss_code`` to 1e-5 (float32 logits).

The package's ``__init__`` does not import (it names ``logit_lens`` as a top-level module), so ``_peer.py`` loads
its two modules from their files.  The peer runs in this interpreter or in ``$PYTHON_PEERS``; without it the
tests skip.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.families.microscope.intrinsic import anisotropy, twonn_both
from bench.families.microscope.linearity import GramStats, solve

_spec = importlib.util.spec_from_file_location("bench_tests_peer", Path(__file__).with_name("_peer.py"))
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)

REL_EXACT = 1e-9  # the same arithmetic in float64
REL_TWONN = 1e-6  # the package's float32 neighbour distances


@pytest.fixture(scope="module", autouse=True)
def _microscope_reachable():
    peer.require("llm_microscope")


def _bench(clouds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """bench's [ID (authors' code), anisotropy, linearity to the next cloud] per cloud, as microscope_functions."""
    names = list(clouds)
    out = {}
    for i, name in enumerate(names):
        x = torch.from_numpy(clouds[name])
        _, code, _ = twonn_both(x)
        g = GramStats.empty(0, x.shape[1])
        g.update(x[None])
        aniso = anisotropy(g.covariance(0))
        sim = float("nan")
        if i + 1 < len(names):
            pair = GramStats.empty(1, x.shape[1])
            pair.update(torch.stack([x, torch.from_numpy(clouds[names[i + 1]])]))
            sim = float(solve(pair).score[0])
        out[name] = np.array([code, aniso, sim])
    return out


def _clouds(n: int = 700, d: int = 24, seed: int = 0) -> dict[str, np.ndarray]:
    """Three clouds: a 5-dimensional plane in R^d thickened by 1% noise (full rank: see below), a noisy
    non-linear image of it, and a wide Gaussian."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, 5)))
    a = rng.standard_normal((n, 5)) @ basis.T + rng.standard_normal(d) + 0.01 * rng.standard_normal((n, d))
    b = np.tanh(a @ rng.standard_normal((d, d)) / 3) + 0.05 * rng.standard_normal((n, d))
    c = rng.standard_normal((n, d)) * np.linspace(0.5, 3.0, d)
    return {"plane": a, "image": b, "gauss": c}


def _assert_agree(ours: dict, theirs: dict) -> None:
    for name in ours:
        code, aniso, sim = ours[name]
        t_id, t_aniso, t_sim = theirs[name]
        assert code == pytest.approx(t_id, rel=REL_TWONN), f"{name}: TwoNN"
        assert aniso == pytest.approx(t_aniso, rel=REL_EXACT), f"{name}: anisotropy"
        if np.isfinite(t_sim):
            assert sim == pytest.approx(t_sim, rel=REL_EXACT), f"{name}: linearity"


def test_kernels_match_llm_microscope_on_synthetic_clouds(one_thread):
    clouds = _clouds()
    _assert_agree(_bench(clouds), peer.run("microscope_functions", **clouds))


def test_duplicates_removed_by_bench_kept_by_the_package(one_thread):
    x = _clouds(n=600)["plane"]
    rng = np.random.default_rng(2)
    dup = np.concatenate([x, x[rng.choice(len(x), 150, replace=False)]])
    distinct = peer.run("microscope_functions", distinct=x)["distinct"][0]  # one cloud per call: no pair scored
    raw = peer.run("microscope_functions", raw=dup)["raw"][0]
    ours = twonn_both(torch.from_numpy(dup))[1]
    assert ours == pytest.approx(float(distinct), rel=REL_TWONN)
    assert float(raw) > 1.2 * ours  # the package's CDF offset counts the duplicates


def test_logit_lens_matches_llm_microscope(tiny_model_dir, one_thread):
    from bench import models
    from bench.families.microscope.layerpass import Item
    from bench.families.microscope.lens import lens_frame

    text = "She folded the letter twice and walked to the station at dawn."
    theirs = peer.run("microscope_logit_lens", model_dir=str(tiny_model_dir), text=text)
    m = models.load(models.resolve(str(tiny_model_dir)), torch.device("cpu"))
    ids = m.tokenizer(text)["input_ids"]
    assert list(ids) == theirs["ids"].tolist()
    frame = lens_frame(m, [Item(0, tuple(ids), tuple(["noun"] * len(ids)))], micro=1)
    ours = frame[frame["metric"] == "lens_loss_code"].pivot(index="layer", columns="position", values="value")
    losses = theirs["losses"]  # (layers + 1, T − 1): the prediction made at each position but the last
    assert ours.shape[0] == losses.shape[0] == m.arch.n_layers + 1
    positions = ours.columns.to_numpy(int)
    assert len(positions) == len(ids) - 2  # bench leaves position 0 out; the package scores it too
    assert np.allclose(ours.to_numpy(), losses[:, positions], atol=1e-5)


@pytest.mark.embedded
def test_kernels_match_llm_microscope_on_real_hidden_states(smollm, one_thread):
    """SmolLM2's token states as the intrinsic_dimension probe collects them: a middle layer and the next (for
    linearity), and the last; duplicates at layer 0 are the subject of the test above.  1,200 tokens, more than
    the hidden size (576): with fewer, the centred states are rank-deficient and the two linearity fits part
    (bench fits them exactly, 1.0; the package's pseudo-inverse gave 0.99995 on 500 tokens)."""
    from bench.families.microscope.layerpass import collect_states, prepare_items

    items = prepare_items(smollm.tokenizer, "brown:all", 64, 32)
    states, _ = collect_states(smollm, items, 1200, 8)  # (layers + 1, n, d)
    assert states.shape[1] == 1200
    mid = states.shape[0] // 2
    clouds = {f"layer{l}": states[l].to(torch.float64).numpy() for l in (mid, mid + 1, states.shape[0] - 1)}
    assert all(len(np.unique(x, axis=0)) == len(x) for x in clouds.values())
    _assert_agree(_bench(clouds), peer.run("microscope_functions", **clouds))
