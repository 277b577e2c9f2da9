"""`benchmarks/full_profile.py --cut`: copies of the specs with `[measure]` values replaced, to run the full
profile's shapes with fewer repetitions on a machine where the whole run would take days."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("full_profile", ROOT / "benchmarks" / "full_profile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SPEC = '''id = "toy.cut-me"
[measure]
probe = "x"
steps = 200            # the paper's steps
seeds = 3
[verdict]
rule = "threshold"
steps = 9
[profiles.smoke]
measure.steps = 12
'''


def test_cut_replaces_measure_values_only_and_keeps_comments(tmp_path):
    (tmp_path / "a.toml").write_text(SPEC)
    out = _script().cut_specs([tmp_path], {"steps": "4", "seeds": "1"}, tmp_path / "cut")
    assert [p.name for p in out] == ["a.toml"]
    text = out[0].read_text()
    data = tomllib.loads(text)
    assert data["measure"] == {"probe": "x", "steps": 4, "seeds": 1}
    assert data["verdict"]["steps"] == 9  # another table's key of the same name is left alone
    assert data["profiles"]["smoke"]["measure"]["steps"] == 12  # and so is the smoke profile's
    assert "steps = 4            # the paper's steps" in text
    assert (tmp_path / "a.toml").read_text() == SPEC  # the spec itself is untouched


def test_cut_of_a_key_no_spec_measures_is_an_error(tmp_path):
    (tmp_path / "a.toml").write_text(SPEC)
    with pytest.raises(ValueError, match="holds stepz"):
        _script().cut_specs([tmp_path / "a.toml"], {"stepz": "4"}, tmp_path / "cut")


def test_cut_of_the_shipped_gpu_sized_specs_changes_only_what_it_names(tmp_path):
    """The two families sized for a GPU, cut as docs/scale.md ran them: each copy differs from its spec in the
    named `[measure]` values only."""
    mod = _script()
    for family, cuts in (("generalization", {"steps": "4", "seeds": "1", "curve_points": "0", "init_steps": "4"}),
                         ("microscope", {"steps": "30", "decoder_runs": "1"})):
        for path in mod.cut_specs(mod.spec_paths(family, []), cuts, tmp_path / family):
            before = tomllib.loads((ROOT / "specs" / family / path.name).read_text())
            after = tomllib.loads(path.read_text())
            changed = {k for k in before["measure"] if before["measure"][k] != after["measure"][k]}
            assert changed <= set(cuts)
            assert all(after["measure"][k] == int(v) for k, v in cuts.items() if k in before["measure"])
            assert {k: v for k, v in after.items() if k != "measure"} == \
                {k: v for k, v in before.items() if k != "measure"}
