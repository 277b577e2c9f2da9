"""The authors' code's conventions beside the paper's formulas: the logit lens's top-1 confidence without the
final norm, TwoNN's smallest-fifth fit, and the ``beside`` rule that shows one next to the decision."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from bench.families.microscope.intrinsic import fit_code, fit_paper, twonn, twonn_both
from bench.families.microscope.layerpass import Item
from bench.families.microscope.lens import lens_frame, top1_nll
from bench.stats import Outcome, evaluate

pytestmark = pytest.mark.usefixtures("one_thread")


# ── logit lens ──────────────────────────────────────────────────────────────────────────────────────────────

def test_top1_nll_of_known_distributions():
    """p = (¼, ¼, ½) and (½, ⅙, ⅙, ⅙): −log ½; uniform over 4: −log ¼ — whichever token comes next."""
    assert top1_nll(torch.tensor([[0.0, 0.0, math.log(2.0)]])).item() == pytest.approx(math.log(2.0), abs=1e-6)
    assert top1_nll(torch.zeros(1, 4)).item() == pytest.approx(math.log(4.0), abs=1e-6)
    assert top1_nll(torch.tensor([[math.log(3.0), 0.0, 0.0, 0.0]])).item() == pytest.approx(math.log(2.0), abs=1e-6)


def _tiny(family, tokenizer, **over):
    from conftest import build_tiny

    from bench import models

    hf = build_tiny(family, vocab=len(tokenizer), **over)
    ref = models.ModelRef(f"tiny-{family}", "path", "/nowhere")
    return models.LoadedModel(ref, hf, tokenizer, torch.device("cpu"), torch.float32, f"tiny-{family}-{over}")


@pytest.mark.parametrize("family,over", [("llama", {}), ("gemma3", {"final_logit_softcapping": 2.0})])
def test_lens_loss_code_is_the_authors_computation(family, over, tiny_tokenizer):
    """A plain statement of what ``logit_lens`` of llm-microscope 0.0.7 computes (AIRI-Institute/LLM-Microscope,
    package file llm_microscope/logit_lens.py): for every entry h of transformers' ``hidden_states``, logits =
    lm_head(h) with nothing else applied, and the score −log softmax(logits)[argmax].  transformers normalises the
    last entry; the others are raw.  Gemma's soft-capping (here 2.0, which moves logits visibly) is not applied.
    The paper's formula differs at every layer below the last, which the test checks too (it would not notice a
    lens that applied the final norm everywhere otherwise)."""
    m = _tiny(family, tiny_tokenizer, **over)
    text = "She folded the letter twice and walked to the station."
    ids = tiny_tokenizer(text)["input_ids"]
    frame = lens_frame(m, [Item(0, tuple(ids), tuple(["noun"] * len(ids)))], micro=1)
    got = frame[frame["metric"] == "lens_loss_code"].pivot(index="position", columns="layer", values="value")
    with torch.no_grad():
        hidden = m.hf(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        want = torch.stack([top1_nll(m.hf.lm_head(h[0]).float()) for h in hidden], dim=1)  # (T, L+1)
    positions = got.index.to_numpy(int)
    assert list(positions) == list(range(1, len(ids) - 1))  # the paper's formula's positions
    assert np.allclose(got.to_numpy(), want[torch.as_tensor(positions)].numpy(), atol=1e-5)
    paper = frame[frame["metric"] == "lens_loss"].pivot(index="position", columns="layer", values="value")
    assert not np.allclose(paper.to_numpy()[:, :-1], got.to_numpy()[:, :-1], atol=1e-2)


# ── TwoNN ───────────────────────────────────────────────────────────────────────────────────────────────────

def test_fit_code_on_hand_built_ratios():
    """12 points: one with r₁ below 1e-8 of the scale and one tie (μ = 1) are set aside (u = 2) but counted in the
    CDF; the remaining 10 ratios keep ⌊10 / 5⌋ = 2 for the fit, at F = 3/12 and 4/12.  With μ = 4/3 and 3/2 the
    ordinates −log(1 − F) = log 4/3 and log 3/2 equal the abscissae log μ: the dimension is exactly 1.  Without
    the CDF offset (F = 1/10, 2/10) it would be 0.37; the paper's formula on the same ratios gives another value."""
    mus = [4 / 3, 3 / 2, 2, 3, 4, 5, 6, 7, 8, 9]
    r = torch.tensor([[1e-9, 1.0], [1.0, 1.0]] + [[1.0, mu] for mu in mus], dtype=torch.float64)
    assert fit_code(r, scale=1.0) == pytest.approx(1.0, rel=1e-12)
    assert fit_code(r * 7.0, scale=7.0) == pytest.approx(1.0, rel=1e-12)  # only distances relative to the scale
    assert abs(fit_paper(r, 0.1) - 1.0) > 0.1


@pytest.mark.parametrize("k", [3, 6])
def test_both_fits_recover_a_linear_subspace(k):
    g = torch.Generator().manual_seed(k)
    basis = torch.linalg.qr(torch.randn(48, k, generator=g, dtype=torch.float64))[0]
    points = torch.randn(3000, k, generator=g, dtype=torch.float64) @ basis.T + 3.0
    paper, code, used = twonn_both(points)
    assert used == 3000
    assert paper == pytest.approx(twonn(points)[0])
    assert paper == pytest.approx(k, rel=0.1) and code == pytest.approx(k, rel=0.15)


def test_duplicates_are_removed_before_both_fits():
    g = torch.Generator().manual_seed(3)
    pts = torch.randn(900, 4, generator=g, dtype=torch.float64)
    with_dups = torch.cat([pts, pts[:200], pts[:50]])
    assert twonn_both(with_dups) == pytest.approx(twonn_both(pts))
    assert twonn_both(with_dups)[2] == 900


# ── the beside rule ─────────────────────────────────────────────────────────────────────────────────────────

def _layers(paper: list[float], code: list[float]) -> pd.DataFrame:
    rows = [(l, "id_ratio", v) for l, v in enumerate(paper)] + [(l, "id_ratio_code", v) for l, v in enumerate(code)]
    return pd.DataFrame(rows, columns=["layer", "metric", "value"])


def _summary(metric: str) -> dict:
    return {"rule": "layer_summary", "metric": metric, "reduce": "max", "max": 0.1}


@pytest.mark.parametrize(("paper", "code", "outcome", "alone"), [
    ([0.05, 0.08], [0.3, 0.2], Outcome.SUPPORTED, "REFUTED"),
    ([0.05, 0.3], [0.01, 0.02], Outcome.REFUTED, "SUPPORTED"),
])
def test_beside_decides_on_the_first_rule_and_shows_the_second(paper, code, outcome, alone):
    frame = _layers(paper, code)
    v = evaluate(frame, "beside", {"of": [_summary("id_ratio"), _summary("id_ratio_code")],
                                   "labels": ["paper's formula", "authors' code"]})
    alone_first = evaluate(frame, "layer_summary", {k: x for k, x in _summary("id_ratio").items() if k != "rule"})
    assert v.outcome is outcome is alone_first.outcome
    assert v.estimate == alone_first.estimate == max(paper) and v.metric == "id_ratio" and not v.parts
    assert v.reason.startswith("paper's formula: ")
    assert f"authors' code — id_ratio_code: {max(code):.3g}" in v.reason and f"alone it would be {alone}" in v.reason


def test_beside_refuses_a_combined_decider_and_a_lone_rule():
    frame = _layers([0.05], [0.05])
    with pytest.raises(ValueError, match="single rule"):
        evaluate(frame, "beside", {"of": [{"rule": "all", "of": [_summary("id_ratio")]}, _summary("id_ratio_code")]})
    with pytest.raises(ValueError, match="at least one"):
        evaluate(frame, "beside", {"of": [_summary("id_ratio")]})
