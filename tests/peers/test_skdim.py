"""Cross-check of the microscope family's TwoNN estimator against scikit-dimension's ``skdim.id.TwoNN``.

Both implement the linear fit of Facco et al. 2017: per point μ = r₂ / r₁ (second over first nearest-neighbour
distance); sort the N ratios, keep the k smallest, and fit ``-log(1 - i/N) = d · log μ₍ᵢ₎`` (i = 1 … k) by least
squares through the origin.  With ``method="linear"`` and ``discard_fraction`` equal to bench's ``discard`` the
two are the same estimator, with two differences of definition, each compared on what is comparable:

* **How many ratios are kept.**  Both keep ``k = floor(N · (1 - discard))``, but bench never keeps the largest
  ratio, whose empirical CDF is 1 and whose ordinate ``-log 0`` is infinite: its ``k`` is at most ``N - 1``.
  skdim keeps it at ``discard_fraction = 0`` and its fit fails on the infinite value.  bench's ``discard = 0`` is
  therefore compared with skdim at ``discard_fraction = 0.5 / N``, which keeps exactly ``N - 1``.
* **Duplicate points.**  bench removes exact duplicates first (``torch.unique``) and estimates on the distinct
  points, which then all have r₁ > 0.  skdim keeps every row: a duplicated point gets r₁ = 0 and is dropped with
  a warning, but still serves as its twin's neighbours' first *and* second neighbour (μ = 1).  bench on a cloud
  with duplicates is compared with skdim on that cloud's distinct rows (``np.unique(axis=0)``).

Agreement is asserted to a relative 1e-9: the arithmetic is the same, in float64; only the rounding of the
pairwise distances differs (both expand ``|a|² + |b|² - 2a·b``, in different orders), which moves an estimate by
~1e-14.  Any difference of definition (an empirical CDF shifted by one, one ratio more or less in the fit) moves
it by 1e-4 or more at these sizes.  The peer runs in this interpreter or in ``$PYTHON_PEERS`` (``_peer.py``);
without it the tests skip.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.families.microscope.intrinsic import twonn

_spec = importlib.util.spec_from_file_location("bench_tests_peer", Path(__file__).with_name("_peer.py"))
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)

REL = 1e-9
N_POINTS, AMBIENT = 2000, 64


@pytest.fixture(scope="module", autouse=True)
def _skdim_reachable():
    """Skip before building anything (the real-model test loads SmolLM2) when the peer is nowhere."""
    peer.require("skdim")


def _subspace_cloud(d: int, n: int = N_POINTS, seed: int = 0) -> np.ndarray:
    """n standard Gaussian points on a random d-dimensional linear subspace of R^64, shifted off the origin."""
    rng = np.random.default_rng(seed + d)
    basis, _ = np.linalg.qr(rng.standard_normal((AMBIENT, d)))  # (64, d) orthonormal columns
    return rng.standard_normal((n, d)) @ basis.T + rng.standard_normal(AMBIENT)


@pytest.mark.parametrize("d", [3, 5, 10])
def test_twonn_matches_skdim_on_linear_subspaces(d, one_thread):
    x = _subspace_cloud(d)
    n = len(x)
    discards = (0.1, 0.2, 0.0)
    theirs = peer.run("skdim_twonn", discards=np.array([0.1, 0.2, 0.5 / n]), cloud=x)["cloud"]
    for discard, their in zip(discards, theirs):
        ours, used = twonn(torch.from_numpy(x), discard=discard)
        assert used == n
        assert ours == pytest.approx(float(their), rel=REL), f"discard {discard}"
    assert theirs[0] == pytest.approx(d, rel=0.1)  # the clouds are what they claim (TwoNN ≈ 2.996, 4.92, 9.80)


def test_twonn_removes_duplicates_before_skdim_would(one_thread):
    x = _subspace_cloud(5, n=1500)
    rng = np.random.default_rng(1)
    x = np.concatenate([x, x[rng.choice(len(x), 300, replace=False)]])  # 300 exact copies
    distinct = np.unique(x, axis=0)
    assert len(distinct) == 1500
    ours, used = twonn(torch.from_numpy(x), discard=0.1)
    assert used == len(distinct)
    theirs = peer.run("skdim_twonn", discards=np.array([0.1]), cloud=distinct)["cloud"][0]
    assert ours == pytest.approx(float(theirs), rel=REL)


@pytest.mark.embedded
def test_twonn_matches_skdim_on_real_hidden_states(smollm, one_thread):
    """Token states collected as the intrinsic_dimension probe collects them (SmolLM2, Brown texts), at the embedding layer (where
    repeated tokens give exact duplicates), a middle layer and the last."""
    from bench.families.microscope.layerpass import collect_states, prepare_items

    items = prepare_items(smollm.tokenizer, "brown:all", 24, 32)
    states, _ = collect_states(smollm, items, 600, 8)  # (layers + 1, n, d)
    layers = (0, states.shape[0] // 2, states.shape[0] - 1)
    clouds = {f"layer{layer}": states[layer].to(torch.float64) for layer in layers}
    distinct = {name: np.unique(x.numpy(), axis=0) for name, x in clouds.items()}
    assert len(distinct["layer0"]) < states.shape[1]  # the duplicates the docstring is about are there
    theirs = peer.run("skdim_twonn", discards=np.array([0.1]), **distinct)
    for name, x in clouds.items():
        ours, used = twonn(x, discard=0.1)
        assert used == len(distinct[name])
        assert ours == pytest.approx(float(theirs[name][0]), rel=REL), name
