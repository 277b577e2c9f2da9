"""`bench describe`: every probe and rule a spec may name, with each parameter's type, range and default as the
code has them (the value a spec gets for a key it leaves out)."""

from __future__ import annotations

import json
from typing import Literal

import pandas as pd
from click.testing import CliRunner

from bench.cli import main
from bench.ground import registry
from bench.ground.ranges import Probability
from bench.ground.schemas import SampleMetrics
from bench.report import vocabulary


def _probe():
    name = "zzdescribe_probe"
    if registry.PROBES.find(name) is None:
        @registry.probe_def(name, version=1, schema=SampleMetrics, metrics=("x", "y"), uses_model=False)
        def zzdescribe_probe(ctx, *, corpus: str, n_texts: int = 12, rate: Probability = 0.25,
                             mode: Literal["fast", "exact"] = "exact", layers: list[int] = [0, 2],  # noqa: B006
                             scale: float = 1.5, on: bool = False) -> pd.DataFrame:
            """Counts texts.

            A second paragraph the listing leaves out."""
            return pd.DataFrame({"sample": [0], "metric": ["x"], "value": [0.0]})
    return name


def test_a_probe_is_listed_with_its_parameters_types_ranges_and_defaults():
    (e,) = vocabulary.entries([_probe()])
    assert (e["kind"], e["doc"], e["metrics"]) == ("probe", "Counts texts.", ["x", "y"])
    rows = {p["name"]: (p["type"], p["range"], p["required"], p["default"]) for p in e["parameters"]}
    assert rows == {
        "corpus": ("str", None, True, None),
        "n_texts": ("int", "≥ 1", False, "12"),          # an n_ count is at least 1 by its name
        "rate": ("float", "(0, 1)", False, "0.25"),
        "mode": ("one of 'fast', 'exact'", None, False, '"exact"'),
        "layers": ("a list of int", None, False, "[0, 2]"),
        "scale": ("float", None, False, "1.5"),
        "on": ("bool", None, False, "false"),
    }


def test_the_family_of_a_builtin_probe_and_a_generic_rule():
    fams = {(e["kind"], e["name"]): e["family"] for e in vocabulary.entries(["knowledge_shift", "threshold"])}
    assert fams == {("probe", "knowledge_shift"): "knowledge", ("rule", "threshold"): "generic"}


def test_the_command_prints_json_text_and_markdown_and_refuses_an_unknown_name():
    name = _probe()
    r = CliRunner().invoke(main, ["describe", name, "--json"])
    assert r.exit_code == 0, r.output
    assert [p["default"] for p in json.loads(r.output)[0]["parameters"]][1:3] == ["12", "0.25"]
    r = CliRunner().invoke(main, ["describe", name])
    assert r.output.splitlines()[:3] == [f"probe {name} ({__name__}): Counts texts.",
                                         "    corpus: str; required", "    n_texts: int, ≥ 1; default 12"]
    r = CliRunner().invoke(main, ["describe", name, "--markdown"])
    assert f"### `{name}`" in r.output and "| `rate` | float | (0, 1) | `0.25` |" in r.output
    assert "| `corpus` | str |  | required |" in r.output
    r = CliRunner().invoke(main, ["describe", "treshold"])
    assert r.exit_code == 2 and "no probe or rule named 'treshold'" in r.output and "threshold" in r.output


def test_an_annotated_range_on_a_keyword_parameter_is_enforced():
    """A probe's keyword parameter typed `Probability` kept only its float type (the range was dropped with the
    annotation's extras), so 1.5 passed `bench validate`."""
    info = registry.probe(_probe())
    assert [m for n, _, m in info.check({"corpus": "x", "rate": 1.5}) if n == "rate"] == \
        ["'rate' must be in (0, 1), got 1.5"]
    assert info.check({"corpus": "x", "rate": 0.5}) == []
