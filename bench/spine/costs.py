"""A run's plan before it runs: per cell, predicted seconds, peak host and device memory, whether it fits, and
the units the profile measures beside the units the claim's test needs for 80% power.

Each cell's cost comes from its probe's cost model (:mod:`bench.ground.costs`) on the model's config and
tokenizer (:mod:`bench.models.shapes`: no weights are read).  Cells are counted in the order a cold run
executes them (grouped by model, in plan order of each model's first cell): work that probes share through the
memo cache is counted in the first cell that needs it, a cell whose probe, parameters and seed an earlier cell
of the same model already measured costs nothing (the run reads it from the cache), and a model's first cell
that measures with it also pays for loading it (:func:`bench.ground.costs.load_seconds`: a fixed part, its
tokenizer's load as timed when the plan read it, its weights); in a run of worker processes, the first such cell
of every work unit (each loads the model afresh).

Power: for each sub-rule with a bound (``min`` / ``max``), the reference effect is the one a REFUTED is judged
against (:mod:`bench.stats.sensitivity`): ``smallest_effect`` against the bound, else the bound against 0.
The spread per unit comes from the latest record of the same claim × model under the runs folder (its
interval and n); the units needed are those of the normal approximation that ``sensitivity`` uses.  Without a
measured spread, or without a reference effect, the units needed are unknown (None) and the reason says why.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from bench.ground import costs as gc
from bench.ground import registry
from bench.spine.plan import Cell

GIB = 1 << 30
NOT_DECIDED = "the latest run of this cell at this profile could not decide it"


@dataclass
class Row:
    claim: str
    model: str
    seed: int
    probe: str
    predicted_s: float | None  # None: no rates for the device (a GPU planned for from a machine without one)
    peak_host_bytes: int
    peak_device_bytes: int
    fits: bool
    units: int | None
    unit: str
    units_for_power: int | None
    power_note: str = ""
    notes: list[str] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)  # the peak's bytes by what holds them (gc.peak_parts)
    work: Any = field(default=None, repr=False)  # (shape, counted work, the load first (or None), width, least work)
    predicted_range_s: list[float] | None = None  # [least, most] where training decides the work (gc.Cost.floors)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("work")
        return out

    def retimed(self, rates: gc.Rates) -> "Row":
        if self.work is None or self.predicted_s is None:
            return self
        self.predicted_s, self.predicted_range_s = _timed(*self.work, rates)
        return self


host_memory = gc.host_memory


def device_memory(device: str) -> int:
    """Bytes of memory of the accelerator `device` (0 for the CPU)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)


def _dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def plan(cells: list[Cell], refs: dict[str, Any], device: str, dtype: str, rates: gc.Rates, *,
         host_limit: int, device_limit: int, runs_dir: Path | None = None, strict: bool = True,
         timed: bool = True, unit_of: Callable[[Cell], Any] | None = None, grouped: bool = True) -> list[Row]:
    """One :class:`Row` per cell (module docstring).  `refs`: model name → ModelRef.  Not `strict`: a cell
    whose probe has no cost model, or whose cost cannot be counted, gets a row with nothing predicted.  Not
    `timed`: `rates` are not the device's (it is not on this machine): memory is planned, seconds are None.
    `unit_of`: for a run of worker processes, the work unit of a cell (:func:`.executors.pool.unit_of`): each
    unit loads its model afresh, so the first cell of every unit that measures with the model pays a load.
    `grouped`: the cells are counted grouped by model, as one process runs them; else in the order given (the
    order a finished run's cells began in, across its workers)."""
    from bench.models import shapes
    from bench.spine.call_scale import call_scale

    read: dict[str, tuple[Any, Any, str, float]] = {}
    scale: dict[str, float] = {}  # base model → its architecture's call overhead per layer ÷ a Llama's
    loaded: set[Any] = set()
    done: dict[str, set[str]] = {}
    measured: dict[str, set[str]] = {}
    recorded = recorded_cells(runs_dir)  # earlier records, read once for the power and the undecided cells
    prior, blocked = _prior_verdicts(recorded), undecided(recorded)
    on_gpu = device != "cpu" and not device.startswith("mps")
    width = _dtype_bytes(dtype)
    rows = []
    first = {m: i for i, m in reversed(list(enumerate(c.model for c in cells)))}
    for cell in sorted(cells, key=lambda c: first[c.model]) if grouped else cells:  # as one process runs them
        ref = refs[cell.model]
        base = ref.base.name if hasattr(ref, "base") else cell.model
        if base not in read:
            read[base] = shapes.read(ref)
            scale[base] = call_scale(read[base][0], device) if timed else 1.0
        config, tok, stand_in, tok_s = read[base]
        shape = replace(shapes.shape(config), call_scale=scale[base])
        info = cell.probe
        planned = gc.Planned(shape=shape, tokenizer=tok, seed=cell.seed, dtype_bytes=width, name=cell.model)
        try:
            if info.name not in gc.costs():
                raise LookupError(f"probe '{info.name}' has no cost model (@cost_def)")
            cost = gc.cost_of(info, planned, cell.spec.probe_params())
        except Exception as exc:  # noqa: BLE001 - only when not strict: a plan never stops a run by itself
            if strict and not isinstance(exc, LookupError):
                raise
            rows.append(Row(cell.spec.id, cell.model, cell.seed, info.name, 0.0, 0, 0, True, None, "", None,
                            "", [f"no cost counted: {type(exc).__name__}: {str(exc)[:120]}"]))
            continue
        seen = done.setdefault(cell.model, set())
        ident = json.dumps([info.name, info.version, cell.spec.probe_params(), cell.seed], sort_keys=True, default=str)
        cached = ident in measured.setdefault(cell.model, set())
        keys = {_key(k, cell.model) for k, _ in cost.parts if k is not None}
        named = cost.keyed(lambda k: _key(k, cell.model))
        counted = seen | done.setdefault("", set())
        work, least = ((gc.Work(), gc.Work()) if cached else
                       (named.total(counted), named.total(counted, least=True)))
        unit = unit_of(cell) if unit_of else cell.model  # where the run loads the model: once per model, or per unit
        load = None
        if unit not in loaded and not cached and info.uses_model:
            load = (tok_s, bool(getattr(ref, "control", None)))
            loaded.add(unit)
        seconds, span = _timed(shape, work, load, width, least, rates) if timed else (None, None)
        for k in keys:
            (done[""] if k.startswith("global|") else seen).add(k)
        measured[cell.model].add(ident)
        parts = gc.peak_parts(shape, cost.total(), width)
        peak = sum(parts.values())
        weights = shape.n_params * width
        host = rates.base_bytes + (weights if on_gpu else peak)
        dev = peak if on_gpu else 0
        fits = host <= host_limit and (not on_gpu or dev <= device_limit)
        before = prior.get((cell.spec.id, cell.model))
        need, why = units_for_power(cell, before)
        # the units of the metric the rule tests, or the rule's own n when an earlier run of this profile has one
        units, unit = cost.units_for(cell.spec.rule_params().get("metric"))
        if before is not None and before.get("profile") == cell.spec.profile:
            units = int(before["n"])
        why_not = blocked.get((cell.spec.id, cell.model, str(cell.spec.profile)))
        notes = (list(cost.notes) + (["read from the cache: an earlier cell measures the same"] if cached else [])
                 + ([stand_in] if stand_in else [])
                 + ([f"{NOT_DECIDED}: {why_not}"] if why_not else []))
        rows.append(Row(cell.spec.id, cell.model, cell.seed, info.name, seconds, int(host),
                        int(dev), fits, units, unit, need, why, notes, {k: int(v) for k, v in parts.items() if v},
                        (shape, work, load, width, least), span))
    return rows


def _timed(shape: gc.Shape, work: gc.Work, load, width: int, least: gc.Work,
           rates: gc.Rates) -> tuple[float, list[float] | None]:
    """(predicted seconds, [least, most] or None) of a cell's work: where training decides how much of it runs
    (`least` is less than `work`), the geometric middle of the two (:func:`bench.ground.costs.middle`)."""
    most = gc.seconds(shape, work, rates, width) + _load_s(shape, load, rates)
    if least == work:
        return round(most, 2), None
    low = gc.seconds(shape, least, rates, width) + _load_s(shape, load, rates)
    return round(gc.middle(low, most), 2), [round(low, 2), round(most, 2)]


def _load_s(shape: gc.Shape, load: tuple[float, bool] | None, rates: gc.Rates) -> float:
    """Seconds of a model's load in the cell that loads it: `load` is (its tokenizer's timed load, whether an
    initialiser draws its weights), None in every other cell."""
    return 0.0 if load is None else gc.load_seconds(shape, rates, tokenizer_s=load[0], initialised=load[1])


def _key(key: str | None, model: str) -> str | None:
    return key if key is None or key.startswith("global|") else f"{model}|{key}"


Recorded = list[tuple[dict[str, Any], dict[str, Any]]]  # (record, cell) pairs, oldest run first


def recorded_cells(runs_dir: Path | None) -> Recorded:
    """(record, cell) of every record under `runs_dir`, oldest run first (run ids sort by time); read once and
    given to both :func:`_prior_verdicts` and :func:`undecided`."""
    out: Recorded = []
    if runs_dir is None or not Path(runs_dir).is_dir():
        return out
    for path in sorted(Path(runs_dir).glob("*/record.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out += [(record, c) for c in record.get("cells", [])]
    return out


def _prior_verdicts(recorded: Recorded) -> dict[tuple[str, str], dict[str, Any]]:
    """(claim, model) → the verdict of the latest of the `recorded` cells (:func:`recorded_cells`) that has one."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for record, c in recorded:  # later runs overwrite
        v = c.get("verdict") or {}
        if v.get("n") and (v.get("ci_low") is not None or v.get("parts")):  # a combined rule's are in its parts
            out[(c["spec"]["id"], c["model"])] = {**v, "profile": record.get("profile")}
    return out


UNDECIDABLE = ("precondition not met", "could not have shown the effect")  # the verdicts' words for a blocked test


def undecided(recorded: Recorded) -> dict[tuple[str, str, str], str]:
    """(claim, model, profile) → why the latest of the `recorded` cells (:func:`recorded_cells`) of that claim,
    model and profile could not decide it: the first clause of its
    INCONCLUSIVE reason that names a failed precondition or a test that could not have shown the effect (a cell
    whose latest record decided, or was undecided by its statistics alone, is left out)."""
    out: dict[tuple[str, str, str], str] = {}
    for record, c in recorded:
        key = (c["spec"]["id"], c["model"], str(record.get("profile")))
        v = c.get("verdict") or {}
        reason = str(v.get("reason") or "")
        at = min((i for i in (reason.find(w) for w in UNDECIDABLE) if i >= 0), default=-1)
        if v.get("outcome") == "INCONCLUSIVE" and at >= 0:
            out[key] = reason[at:].split(");")[0].rstrip(")")[:240]
        else:
            out.pop(key, None)
    return out


def _bounded(rule: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (rule, parameters) of every rule of a tree that has a bound, in order; of a `gated` rule only its
    claim's (the last part: the gates before it are preconditions, and its verdict carries the claim's parts)."""
    info = registry.rule(rule)
    if info.nested:
        subs = list(params.get(info.nested) or [])
        return [x for sub in (subs[-1:] if rule == "gated" else subs) for x in
                _bounded(sub["rule"], {k: v for k, v in sub.items() if k != "rule"})]
    return [(rule, params)] if params.get("min") is not None or params.get("max") is not None else []


def units_for_power(cell: Cell, verdict: dict[str, Any] | None) -> tuple[int | None, str]:
    """(units the claim's test needs for 80% power at its reference effect, or None; why), from
    :func:`bench.stats.sensitivity.power_of` on the earlier verdict (its normal approximation: an earlier
    record does not say whether the values were 0/1), the largest over the rule's bounded sub-rules."""
    from bench.ground.verdicts import Verdict
    from bench.stats import sensitivity

    spec = cell.spec
    bounded = _bounded(spec.rule, dict(spec.rule_params()))
    if not bounded:
        return None, "the rule has no bound to power a test against"
    if verdict is None:
        return None, "no measured spread per unit yet (no earlier record of this claim × model)"
    top = (verdict.get("parts") or [verdict])[0] if verdict.get("runs") else verdict  # one training run's
    parts = top.get("parts") or [top]
    needs = []
    for i, (_, p) in enumerate(bounded):
        d = parts[i] if len(parts) == len(bounded) else top
        v = Verdict.from_json({k: x for k, x in d.items() if k != "profile"})
        bound, side = (float(p["min"]), 1) if p.get("min") is not None else (float(p["max"]), -1)
        effect = p.get("smallest_effect", spec.verdict.get("smallest_effect"))
        with sensitivity.reference({"smallest_effect": effect}):
            _, need, words = sensitivity.power_of(v, bound, side, binary=False)
        if need is None:
            return None, f"no units needed can be said at {words} (no reference effect, or no interval measured)"
        needs.append(need)
    return max(needs), f"spread from the earlier record (n = {verdict.get('n')})"


def totals(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per model and for the whole run: predicted seconds, the largest peaks, and whether every cell fits."""
    out: dict[str, dict[str, Any]] = {}
    for key in [r.model for r in rows] + ["all"]:
        sel = [r for r in rows if key in ("all", r.model)]
        out[key] = {"predicted_s": None if any(r.predicted_s is None for r in sel)
                    else round(sum(r.predicted_s for r in sel), 1),
                    "peak_host_bytes": max((r.peak_host_bytes for r in sel), default=0),
                    "peak_device_bytes": max((r.peak_device_bytes for r in sel), default=0),
                    "fits": all(r.fits for r in sel), "cells": len(sel)}
    return out


# A slow machine: if even these rates predict a run under ANNOUNCE_S, it is not worth measuring this one's.
# Every rate is named, each slower than its default in gc.Rates (tests/plan/test_announce.py)
SLOW = dict(forward=2e9, backward=2e9, generate=1e9, call_layer_s=2e-3, kernel=2e8, load_bps=5e7, head=2e9,
            bandwidth=2e9, rng=1e7, tokenize=5e5, word_s=3e-6, load_fixed_s=2.0, init_ps=2e7,
            attention=2e7, attention_train=5e6, hash_bps=1e8, array=5e7, fresh=2e8, stream=5e8)
ANNOUNCE_S = 180.0


def for_run(specs, opts, *, rates: gc.Rates | None = None, host_limit: int | None = None,
            device_limit: int | None = None, runs_dir: Path | None = None, strict: bool = True,
            executing: bool = False, began: dict[tuple[str, str], float] | None = None,
            workers: bool = False) -> list[Row]:
    """The rows of the cells that `bench verify` would run with `opts` (a ``run.Options``), weights unread.
    Without `rates`, this machine's (measured once, :mod:`bench.spine.calibrate`).  `executing`: only the cells
    whose frame is not in the cache (the ones the run will measure; the others are read back).  `began`:
    (claim, model) → when that cell started in a finished run; the cells are planned in that order, so work
    that several cells share is booked to the one that ran it (cells it does not name keep their place, last).
    `workers`: the run hands work units to worker processes, each loading its model afresh."""
    from bench import models
    from bench.spine import calibrate, run
    from bench.spine import plan as planning
    from bench.spine.executors import pool

    device, timed = planned_device(opts.device, device_limit)
    kind = device.partition(":")[0]
    profile = opts.profile or planning.default_profile(kind)
    dtype = models.dtype_name(opts.dtype, kind)
    cells = planning.build(specs, opts.models, profile, (opts.seed,), opts.control)
    if began:
        cells = sorted(cells, key=lambda c: began.get((c.spec.id, c.model), float("inf")))
    refs = {name: opts.refs.get(name) or models.resolve(name, opts.revision) for name in {c.model for c in cells}}
    if executing:
        prints: dict[str, str | None] = {}  # a model's fingerprint, once (an embedded GGUF's takes a second)
        cells = [c for c in cells if not _in_cache(c, refs[c.model], device, dtype, prints)]
    return plan(cells, refs, device, dtype, rates or calibrate.rates(device if timed else "cpu"),
                host_limit=host_limit if host_limit is not None else host_memory(),
                device_limit=device_limit if device_limit is not None else device_memory(device),
                runs_dir=runs_dir, strict=strict, timed=timed, unit_of=pool.unit_of if workers else None,
                grouped=not began)


def _in_cache(cell: Cell, ref: Any, device: str, dtype: str, prints: dict[str, str | None]) -> bool:
    """Whether the run will read `cell`'s frame from the cache (under the key the run computes for it).
    `prints`: model name → fingerprint, filled as models are met."""
    from bench import models
    from bench.ground.store import Cache, key_of
    from bench.spine import plan as planning

    try:
        for name, r in [(n, None) for n in planning.companions(cell)] + [(cell.model, ref)]:
            if name not in prints:
                prints[name] = (r or models.resolve(name)).fingerprint()
        companions = {n: prints[n] for n in planning.companions(cell)}
        parts = planning.cache_parts(cell, prints[cell.model] if cell.probe.uses_model else None,
                                     device.partition(":")[0], dtype, companions)
    except Exception:  # noqa: BLE001 - a model that cannot be fingerprinted now: plan the cell, the run says why
        return False
    return Cache().has(key_of(parts))


def planned_device(name: str, device_limit: int | None) -> tuple[str, bool]:
    """(the device planned for, whether this machine can time it).  A CUDA device this machine lacks is planned
    for by its memory alone when that memory is given (``--gpu-memory``): a run on another machine."""
    from bench.ground.errors import UsageError
    from bench.spine import run

    try:
        return run.resolve_device(name), True
    except UsageError:
        kind, _, index = name.partition(":")
        if kind != "cuda" or device_limit is None or (index and not index.isdigit()):
            raise
        return name, False


def before_run(specs, opts) -> tuple[list[Row], float | None]:
    """What `bench verify` checks before any work: the rows of the cells it will measure (those the cache
    holds are read back, and neither counted nor refused; memory counted with this process's own size) and
    the predicted total seconds when it may exceed :data:`ANNOUNCE_S` (None when even a slow machine would
    finish sooner: then nothing is measured, and the rows keep the slow machine's seconds; else the rows are
    timed with this machine's rates).  Cells it cannot count are left out, never refused."""
    from bench.spine import calibrate

    slow = gc.Rates(**SLOW, base_bytes=calibrate._resident_bytes())
    rows = for_run(specs, opts, rates=slow, strict=False, executing=True)
    if sum(r.predicted_s for r in rows) <= ANNOUNCE_S:
        return rows, None
    from bench.spine import run

    measured = calibrate.rates(run.resolve_device(opts.device))
    rows = [r.retimed(measured) for r in rows]
    return rows, sum(r.predicted_s or 0.0 for r in rows)
