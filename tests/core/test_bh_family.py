"""The BH family is fixed (spec set × model): a run of one folder and a run of every spec decide shared cells alike."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.spine import plan
from bench.spine.run import adjust_by_family
from bench.ground.spec import load_specs
from bench.stats import Outcome, Verdict

SPECS = Path(__file__).resolve().parents[2] / "specs"


def _cells(paths):
    return [SimpleNamespace(spec=s, model=m, seed=0) for s in load_specs(paths)
            for m in plan.models_for(s, ("default",))]


def _verdict(cell) -> Verdict:
    """A deterministic p-value per (claim, model), spread so that BH decides some cells either way."""
    h = int(hashlib.sha256(f"{cell.spec.id}|{cell.model}".encode()).hexdigest()[:8], 16)
    p = (h % 1000) / 1000 * 0.08
    return Verdict(Outcome.SUPPORTED, "planted", "threshold", "m", 1.0, p_value=p, alpha=0.05)


def _decided(cells):
    final, families = adjust_by_family(cells, [_verdict(c) for c in cells], ("default",))
    return {(c.spec.id, c.model): v for c, v in zip(cells, final)}, families


@pytest.mark.parametrize("folder", ["microscope", "langneurons", "circuits", "notes", "plnd"])
def test_one_folder_and_all_specs_agree_cell_by_cell(folder):
    full, _ = _decided(_cells([SPECS]))
    part, families = _decided(_cells([SPECS / folder]))
    assert part and all(f["not_run"] == [] for f in families)
    for key, v in part.items():
        assert (v.outcome, v.p_adjusted) == (full[key].outcome, full[key].p_adjusted), key


def test_family_is_one_spec_set_per_model_and_recorded():
    cells = _cells([SPECS])
    _, families = _decided(cells)
    keys = {(f["family"], f["model"]) for f in families}
    assert len(keys) == len(families)  # one family per spec set × model
    micro = [f for f in families if f["family"] == "microscope"]
    assert {f["model"] for f in micro} == {"smollm2-135m", "gemma3-270m"}
    assert all(len(f["ran"]) == len(f["members"]) for f in families)


def test_a_partial_family_is_never_less_strict_than_the_whole():
    full, _ = _decided(_cells([SPECS]))
    one = sorted((SPECS / "microscope").glob("*.toml"))[0]
    part, families = _decided(_cells([one]))
    assert families[0]["not_run"] and families[0]["unseen_p_values"] >= len(families[0]["not_run"])
    for key, v in part.items():
        assert v.p_adjusted >= full[key].p_adjusted - 1e-12
        if v.outcome is Outcome.SUPPORTED:
            assert full[key].outcome is Outcome.SUPPORTED


def test_the_adjustment_would_differ_if_the_family_followed_the_run():
    """Guard against BH over "whatever ran": adjusting the microscope cells together with every other family
    changes some adjusted p-values, so the agreement above is not an accident of the planted p-values."""
    from bench.stats import adjust

    cells = _cells([SPECS])
    raw = [_verdict(c) for c in cells]
    pooled = adjust(raw)
    fixed, _ = adjust_by_family(cells, raw, ("default",))
    assert any(abs(a.p_adjusted - b.p_adjusted) > 1e-9 for a, b in zip(pooled, fixed))
