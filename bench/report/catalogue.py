"""The claim catalogue, generated from the specs: ``bench list --markdown`` (docs/CLAIMS.md) and ``--json``."""

from __future__ import annotations

import json
from typing import Any, Iterable

from bench.ground.resources import relative_spec_path
from bench.ground.prose import describe

HEADER = """# Claims

The claims `bench` checks, one section per spec, generated from the spec files by
`make claims-doc` (`bench list specs/ --markdown -o docs/CLAIMS.md`; do not edit by hand: edit the spec and regenerate).  Each entry
gives the claim as its source states it, what is measured, the decision rule in words and the published
figures the report shows beside the measured ones.  Thresholds and their provenance are commented in the
spec file named under each claim.
"""


def entry(spec) -> dict[str, Any]:
    """One claim as plain data (the --json form of `bench list`)."""
    return {
        "id": spec.id, "family": spec.family, "title": spec.title, "source": spec.source, "claim": spec.claim,
        "probe": spec.probe, "rule": spec.rule, "rule_words": describe(spec.rule, spec.rule_params()),
        "models_default": list(spec.models_default), "models_paper": list(spec.models_paper),
        "references": [r.__dict__ for r in spec.references], "path": relative_spec_path(spec.path),
    }


def to_json(specs: Iterable) -> str:
    return json.dumps([entry(s) for s in specs], indent=1, ensure_ascii=False) + "\n"


def _md(text: str) -> str:
    """Spec text in a Markdown paragraph: one line, pipes escaped (they would open a table)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(specs: Iterable) -> str:
    specs = sorted(specs, key=lambda s: s.id)
    families: dict[str, list] = {}
    for s in specs:
        families.setdefault(s.family, []).append(s)
    out = [HEADER, "## Contents", ""]
    for fam, items in families.items():
        out.append(f"- **{fam}**: " + ", ".join(f"[{s.id.split('.', 1)[1]}](#{_anchor(s.id)})" for s in items))
    for fam, items in families.items():
        out += ["", f"## {fam}"]
        for s in items:
            e = entry(s)
            out += ["", f"### {s.id}", "", f"**{_md(s.title)}**", "", _md(s.claim), "",
                    f"- Source: {_md(s.source)}",
                    f"- Spec: `specs/{e['path']}`",
                    f"- Measured by: probe `{s.probe}`",
                    f"- Decision rule (`{s.rule}`): {_md(e['rule_words'])}",
                    *([f"- Decided against its random-init control as well{_part(s)}: trained − control on the "
                       "claimed side of 0, paired over the rule's units; both conditions must hold"]
                      if s.control_decide else []),
                    f"- Models: default {', '.join(s.models_default) or '—'}; paper "
                    f"{', '.join(s.models_paper) or '—'}"]
            if s.references:
                out += ["", "| published on | metric | value | where |", "|---|---|---|---|"]
                out += [f"| {_md(r.model)} | {_md(r.metric)} | {r.value:g} | {_md(r.where)} |" for r in s.references]
    return "\n".join(out) + "\n"


def _anchor(spec_id: str) -> str:
    """GitHub's heading anchor for a spec id (lower case; dots dropped)."""
    return spec_id.lower().replace(".", "")


def _part(s) -> str:
    """Which part of a combined rule the difference is taken on, in words ("" for a plain rule)."""
    if s.control_part is None:
        return ""
    rule, params = s.control_rule()
    return f" on its part `verdict.of[{s.control_part}]` (`{rule}` on {params.get('metric', '…')})"
