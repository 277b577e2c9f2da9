"""TOML claim specs → frozen :class:`Spec` objects, validated strictly.

A spec is checked in two steps.  :func:`load_spec` checks the file itself (TOML syntax, known keys, types, the
id against the file name).  :func:`bench.spine.checks.check_spec` then checks it against the code: the probe and
rule exist, every parameter fits their signatures and every corpus resolves, under every profile.  Both raise
:class:`SpecError` naming the file, the key and, where it can be found, the line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from bench.ground import validate
from bench.ground.errors import SpecError, did_you_mean

SPEC_VERSION = 1
ID_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+(?:-[a-z0-9]+)*$")
TOP_KEYS = ("id", "title", "source", "claim", "spec_version", "models", "data", "measure", "verdict",
            "reference", "profiles", "control")
CONTROL_KEYS = ("holds", "decide", "part")  # [control] holds = "why the claim is true of any weights, trained or
# not"; decide = "difference": the claim is decided on trained − its random-init control too (bench.stats.control);
# part = i: for a combined rule ("all"), the part `verdict.of[i]` that the difference is taken on
DECIDE = ("difference",)
REQUIRED = ("id", "title", "source", "claim", "spec_version", "models", "measure", "verdict")
MODEL_KEYS = ("default", "paper")
REFERENCE_KEYS = ("model", "metric", "value", "where", "note")
PROFILE_SECTIONS = ("data", "measure")  # a profile may change how much is measured, never the decision rule


@dataclass(frozen=True)
class Reference:
    """A published figure shown beside the measured one."""

    model: str
    metric: str
    value: float
    where: str
    note: str = ""


@dataclass(frozen=True)
class Spec:
    """One claim, as written in its TOML file.  Mappings are read-only."""

    id: str
    title: str
    source: str
    claim: str
    path: str
    models_default: tuple[str, ...]
    models_paper: tuple[str, ...]
    data: Mapping[str, Any]
    probe: str
    measure: Mapping[str, Any]  # probe parameters, without the `probe` key
    rule: str
    verdict: Mapping[str, Any]  # rule parameters, without the `rule` key
    references: tuple[Reference, ...] = ()
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    profile: str | None = None  # the profile applied by `with_profile`, if any
    control_holds: str = ""  # why a random-initialised control is expected to pass too ("" when it should not)
    control_decide: str = ""  # "difference": decided against the random-init control as well ("" when not)
    control_part: int | None = None  # the part of a combined rule that the difference is taken on

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def probe_params(self) -> dict[str, Any]:
        """The probe's keyword arguments: the [data] keys and the [measure] keys, which may not collide."""
        return {**thaw(self.data), **thaw(self.measure)}

    def rule_params(self) -> dict[str, Any]:
        return thaw(self.verdict)

    def control_rule(self) -> tuple[str, dict[str, Any]]:
        """The rule and parameters that trained − control is taken on: the spec's own, or for a combined rule the
        part `[control] part` names (with the spec's alpha unless the part sets its own)."""
        params = self.rule_params()
        if self.control_part is None:
            return self.rule, params
        sub = dict(params["of"][self.control_part])
        sub.setdefault("alpha", params.get("alpha", 0.05))
        return sub.pop("rule"), sub

    def with_profile(self, name: str | None) -> "Spec":
        """This spec with profile `name`'s overrides applied; a profile the spec does not define changes nothing."""
        over = thaw(self.profiles.get(name, {})) if name else {}
        data = {**thaw(self.data), **over.get("data", {})}
        measure = {**thaw(self.measure), **over.get("measure", {})}
        return Spec(**{**self.__dict__, "data": freeze(data), "measure": freeze(measure), "profile": name})

    def digest(self) -> str:
        """sha256 of everything that defines this spec under its profile (file path excluded)."""
        body = {k: thaw(v) for k, v in self.__dict__.items() if k not in ("path", "profiles")}
        if not self.control_holds:
            del body["control_holds"]  # specs that say nothing of their control keep their digest
        if not self.control_decide:
            del body["control_decide"]
        if self.control_part is None:
            del body["control_part"]
        body["references"] = [r.__dict__ for r in self.references]
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description for run records and reports."""
        return {
            "id": self.id, "title": self.title, "source": self.source, "claim": self.claim, "path": self.path,
            "family": self.family, "profile": self.profile, "probe": self.probe, "rule": self.rule,
            "params": self.probe_params(), "verdict": self.rule_params(), "hash": self.digest(),
            "models": {"default": list(self.models_default), "paper": list(self.models_paper)},
            "references": [r.__dict__ for r in self.references], "control_holds": self.control_holds,
            "control_decide": self.control_decide, "control_part": self.control_part,
        }


# ── loading ────────────────────────────────────────────────────────────────────────────────────────────────

def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    text = validate.read_text(path)
    return _build(validate.parse(text, path), text, path)


def _build(raw: dict, text: str, path: Path) -> Spec:
    err = _Reporter(path, text)
    err.unknown(raw, TOP_KEYS, table="")
    for key in REQUIRED:
        if key not in raw:
            raise SpecError(f"missing required key '{key}'", path=str(path), key=key)
    for key in ("id", "title", "source", "claim"):
        err.type(raw[key], str, key)
        if not raw[key].strip():
            err.fail(key, f"'{key}' is empty; say what the claim is and where it comes from")
    err.type(raw["spec_version"], int, "spec_version")
    if raw["spec_version"] != SPEC_VERSION:
        err.fail("spec_version", f"spec_version {raw['spec_version']} is not supported (this bench reads {SPEC_VERSION})")
    spec_id = raw["id"]
    if not ID_PATTERN.match(spec_id):
        err.fail("id", f"id '{spec_id}' must look like 'family.claim-name' (lower case, digits, hyphens)")
    if spec_id.split(".", 1)[1] != path.stem:
        err.fail("id", f"id '{spec_id}' does not match the file name '{path.name}' (expected '{path.stem}')")

    models = err.table(raw, "models")
    err.unknown(models, MODEL_KEYS, table="models")
    if "default" not in models:
        raise SpecError("missing required key 'default'", path=str(path), key="models.default")
    default = err.str_list(models["default"], "models.default")
    paper = err.str_list(models.get("paper", []), "models.paper")

    data = err.table(raw, "data") if "data" in raw else {}
    measure = dict(err.table(raw, "measure"))
    if "probe" not in measure:
        raise SpecError("missing required key 'probe'", path=str(path), key="measure.probe")
    probe = measure.pop("probe")
    err.type(probe, str, "measure.probe")
    clash = sorted(set(data) & set(measure))
    if clash:
        err.fail(f"measure.{clash[0]}", f"'{clash[0]}' is set in both [data] and [measure]; set it once")

    verdict = dict(err.table(raw, "verdict"))
    if "rule" not in verdict:
        raise SpecError("missing required key 'rule'", path=str(path), key="verdict.rule")
    rule = verdict.pop("rule")
    err.type(rule, str, "verdict.rule")

    refs = raw.get("reference", [])
    if not isinstance(refs, list):
        err.fail("reference", "use [[reference]] tables (an array of tables)")
    references = tuple(_reference(r, i, err) for i, r in enumerate(refs))

    profiles = err.table(raw, "profiles") if "profiles" in raw else {}
    for name, body in profiles.items():
        if not isinstance(body, dict):
            err.fail(f"profiles.{name}", "a profile must be a table")
        err.unknown(body, PROFILE_SECTIONS, table=f"profiles.{name}")
        for section, over in body.items():
            if not isinstance(over, dict):
                err.fail(f"profiles.{name}.{section}", "must be a table of overrides")
            if section == "measure" and "probe" in over:
                err.fail(f"profiles.{name}.measure.probe", "a profile cannot change the probe")
    validate.check_profiles(profiles, data, measure, err.fail)

    control = err.table(raw, "control") if "control" in raw else {}
    err.unknown(control, CONTROL_KEYS, table="control")
    if "holds" in control:
        err.type(control["holds"], str, "control.holds")
    if "decide" in control:
        err.type(control["decide"], str, "control.decide")
        if control["decide"] not in DECIDE:
            err.fail("control.decide", f"unknown value {control['decide']!r:.40} for 'decide' (known: "
                     f"{', '.join(DECIDE)})" + did_you_mean(control["decide"], DECIDE))
        if "holds" in control:
            err.fail("control.decide", "'decide' and 'holds' exclude each other: a claim true of any weights "
                     "cannot also be decided against its control")
    if "part" in control:
        part, parts = control["part"], raw["verdict"].get("of") if isinstance(raw.get("verdict"), dict) else None
        if isinstance(part, bool) or not isinstance(part, int):
            err.fail("control.part", f"must be an integer (the index of a part in verdict.of), not {part!r:.40}")
        if "decide" not in control:
            err.fail("control.part", "names the part that is decided against the control: it needs 'decide'")
        if rule != "all" or not isinstance(parts, list):
            err.fail("control.part", f"only a combined rule (rule = \"all\", with verdict.of) has parts; this "
                     f"spec's rule is '{rule}'")
        if not 0 <= part < len(parts):
            err.fail("control.part", f"{part} is not the index of a part: verdict.of has {len(parts)} "
                     f"(0 to {len(parts) - 1})")
    elif control.get("decide") and rule == "all":
        err.fail("control.decide", "a combined rule is decided against its control on one of its parts: name "
                 "it with 'part' (the index in verdict.of)")

    return Spec(
        id=spec_id, title=raw["title"].strip(), source=raw["source"].strip(), claim=raw["claim"].strip(),
        path=str(path), models_default=tuple(default), models_paper=tuple(paper), data=freeze(data),
        probe=probe, measure=freeze(measure), rule=rule, verdict=freeze(verdict), references=references,
        profiles=freeze(profiles), control_holds=control.get("holds", "").strip(),
        control_decide=control.get("decide", ""), control_part=control.get("part"),
    )


def _reference(r: Any, i: int, err: "_Reporter") -> Reference:
    where = f"reference[{i}]"
    if not isinstance(r, dict):
        err.fail(where, "must be a table")
    err.unknown(r, REFERENCE_KEYS, table="reference")
    for key in ("model", "metric", "value", "where"):
        if key not in r:
            err.fail(f"{where}.{key}", f"missing required key '{key}'")
    value = r["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        err.fail(f"{where}.value", f"must be a number, got {type(value).__name__}")
    for key in ("model", "metric", "where", "note"):
        if key in r:
            err.type(r[key], str, f"{where}.{key}")
    return Reference(model=r["model"], metric=r["metric"], value=float(value), where=r["where"],
                     note=r.get("note", ""))


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """All ``*.toml`` files under the given files or folders, sorted, each once."""
    return validate.discover(paths)


def load_specs(paths: Iterable[str | Path]) -> list[Spec]:
    """Load every spec under `paths`; ids must be unique."""
    files = discover(paths)
    if not files:
        raise SpecError("no spec files (*.toml) found", path=", ".join(str(p) for p in paths))
    specs, seen = [], {}
    for f in files:
        spec = load_spec(f)
        if spec.id in seen:
            raise SpecError(f"duplicate id '{spec.id}' (also in {seen[spec.id]})", path=str(f), key="id", line=1)
        seen[spec.id] = str(f)
        specs.append(spec)
    return specs


# ── helpers ────────────────────────────────────────────────────────────────────────────────────────────────

class _Reporter:
    """Raises SpecErrors that point at a key, its line and a near-miss suggestion."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = str(path), text

    def fail(self, key: str, message: str):
        table, _, leaf = key.rpartition(".")
        raise SpecError(message, path=self.path, key=key, line=_find_line(self.text, table, leaf))

    def unknown(self, mapping: Mapping, allowed: Iterable[str], *, table: str = "") -> None:
        allowed = tuple(allowed)
        for key in mapping:
            if key not in allowed:
                self.fail(f"{table}.{key}" if table else key, f"unknown key '{key}'" + did_you_mean(key, allowed))

    def type(self, value: Any, kind: type, key: str) -> None:
        bad = isinstance(value, bool) and kind is not bool
        if bad or not isinstance(value, kind):
            self.fail(key, f"must be {kind.__name__}, got {type(value).__name__} ({value!r:.40})")

    def table(self, raw: Mapping, key: str) -> dict:
        value = raw.get(key)
        if not isinstance(value, dict):
            self.fail(key, f"[{key}] must be a table, got {type(value).__name__}")
        return value

    def str_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, "must be a list of model names (strings)")
        for v in value:
            problem = validate.model_name_problem(v)
            if problem:
                self.fail(key, f"model name {v!r:.60}: {problem}")
        return value


def _find_line(text: str, table: str, key: str) -> int | None:
    return validate.find_line(text, table, key)


def freeze(value: Any) -> Any:
    """Read-only copy: dicts → MappingProxyType, lists → tuples, recursively."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain, JSON-ready copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(thaw(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
