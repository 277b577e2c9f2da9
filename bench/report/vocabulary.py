"""What a spec may name, generated from the registry: ``bench describe`` (docs/PARAMETERS.md with ``--markdown``).

Every registered probe and rule with its family, its first docstring paragraph, the metrics a probe's frame may
hold, and each parameter: its type, its allowed range, and its default (or that it is required).  A default
here is the value a spec gets when it leaves the key out, read from the code, so the page cannot drift from it.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

from bench.ground import registry
from bench.ground.errors import did_you_mean
from bench.ground.params import MISSING, Param, _describe
from bench.ground.ranges import MAX_COUNT, Range, range_of

HEADER = """# Probes and rules

What a spec's `[measure] probe = …` and `[verdict] rule = …` may name, and the parameters each takes (`[data]`
and `[measure]` keys for a probe, `[verdict]` keys for a rule), generated from the code by `make claims-doc`
(`bench describe --markdown -o docs/PARAMETERS.md`; do not edit by hand).  A parameter left out of a spec takes
the default shown; a profile (`[profiles.smoke]`) overrides keys of the spec.  Every value is checked against
its type and range by `bench validate` before anything runs.
"""


def family_of(fn) -> str:
    """The claim family that registers `fn`, or "generic" for bench's generic rules."""
    module = getattr(fn, "__module__", "") or ""
    if module.startswith(registry.GENERIC_RULES + ".") or module == registry.GENERIC_RULES:
        return "generic"
    for name, package in registry.family_packages().items():
        if module == package or module.startswith(package + "."):
            return name
    return module


def _toml(value: Any) -> str:
    """A default as a spec would write it."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    return str(value)


def _span(rng: Range | None) -> str | None:
    """A range in words: "≥ 1", "> 0", "(0, 1)", "[0, 1]"."""
    if rng is None:
        return None
    if rng.high is None or rng.high >= MAX_COUNT:
        return f"{'>' if rng.open_low else '≥'} {rng.low:g}" if rng.low is not None else None
    return str(rng)


def parameter(p: Param) -> dict[str, Any]:
    rng = _span(range_of(p.name, p.annotation))
    required = p.required or p.default is MISSING
    return {"name": p.name, "type": _describe(p.annotation), "range": rng,
            "required": required, "default": None if required else _toml(p.default)}


def entry(kind: str, info) -> dict[str, Any]:
    out = {"kind": kind, "name": info.name, "family": family_of(info.fn), "doc": info.doc,
           "parameters": [parameter(p) for p in info.params.values()]}
    if kind == "probe":
        out["metrics"] = list(info.metrics)
    return out


def entries(names: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Probes then rules, each sorted by family and name; `names` narrows to those (unknown names are an error)."""
    probes, rules = registry.probes(), registry.RULES.all()
    want = list(names)
    unknown = [n for n in want if n not in probes and n not in rules]
    if unknown:
        known = sorted({*probes, *rules})
        raise KeyError(f"no probe or rule named {', '.join(map(repr, unknown))}"
                       + did_you_mean(unknown[0], known))
    out = [entry("probe", i) for n, i in probes.items() if not want or n in want]
    out += [entry("rule", i) for n, i in rules.items() if not want or n in want]
    return sorted(out, key=lambda e: (e["kind"] != "probe", e["family"], e["name"]))


def to_json(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, indent=1, ensure_ascii=False) + "\n"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(items: list[dict[str, Any]]) -> str:
    out = [HEADER]
    for kind, title in (("probe", "Probes"), ("rule", "Rules")):
        group = [e for e in items if e["kind"] == kind]
        if not group:
            continue
        out += ["", f"## {title}"]
        for e in group:
            out += ["", f"### `{e['name']}` ({e['family']})", "", _cell(e["doc"]) or "(no description)"]
            if e.get("metrics"):
                out += ["", "Metrics: " + ", ".join(f"`{m}`" for m in e["metrics"])]
            if not e["parameters"]:
                out += ["", "No parameters."]
                continue
            out += ["", "| parameter | type | range | default |", "|---|---|---|---|"]
            out += [f"| `{p['name']}` | {_cell(p['type'])} | {p['range'] or ''} | "
                    f"{'required' if p['required'] else '`' + _cell(p['default']) + '`'} |" for p in e["parameters"]]
    return "\n".join(out) + "\n"


def text(items: list[dict[str, Any]]) -> str:
    """The plain listing: one line per probe or rule, then its parameters indented."""
    lines = []
    for e in items:
        lines.append(f"{e['kind']} {e['name']} ({e['family']}): {e['doc']}")
        for p in e["parameters"]:
            shown = "required" if p["required"] else f"default {p['default']}"
            lines.append(f"    {p['name']}: {p['type']}{', ' + p['range'] if p['range'] else ''}; {shown}")
    return "\n".join(lines) + "\n"
