"""Carry out a plan: cache lookups, model loading (once per model), probes, verdicts, the run record."""

from __future__ import annotations

import contextlib
import platform
import subprocess
import sys
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import models, stats
from bench.spine import against, plan, results, upkeep
from bench.ground.errors import BenchError, ModelError, UsageError
from bench.ground.spec import Spec
from bench.ground.store import Cache, RunWriter
from bench.stats import Outcome, Verdict

PACKAGES = ("bench", "torch", "transformers", "pandas", "pandera", "scipy", "numpy", "accelerate", "gguf")


@dataclass
class Options:
    models: tuple[str, ...] = ("default",)
    profile: str | None = None
    device: str = "auto"
    seed: int = 0
    runs_dir: Path = Path("runs")
    allow_pickle: bool = False
    command: str = ""
    audit: str | None = None  # the model an audit is about
    control: str | None = None  # "random-init": every model also runs as its seeded random-weight control
    dtype: str = "auto"  # "auto" = float32 on the CPU, bfloat16 on an accelerator
    revision: str | None = None  # hub revision for hub ids given without "@revision"
    refs: dict[str, Any] = field(default_factory=dict)  # names already resolved by the caller (ModelRef each)
    executor: str = "local"  # "local" (this process) or "ray" (a Ray cluster)
    ray_address: str | None = None  # an existing Ray cluster; None starts a local one
    executor_options: tuple[tuple[str, Any], ...] = ()  # extra keyword options for the executor
    offload_folder: Path | None = None  # weights that memory cannot hold go here (placement only, never results)
    jobs: int | str = 1  # local executor: worker processes (1: this process; "auto": see executors.pool.choose)
    plan: tuple = ()  # the plan's rows of the cells to measure (bench.spine.costs.Row), to size and order the work


# Options that cannot change a run's cells or verdicts (where records go, how the command was typed, names the
# caller already resolved, which executor runs the cells).  Every other field of Options is one of the run's
# settings: it enters the replay key and the record, so an option added later cannot change results unseen.
RESULT_NEUTRAL = frozenset({"command", "runs_dir", "refs", "executor", "ray_address", "executor_options",
                            "offload_folder", "jobs", "plan"})


def settings(opts: Options, device: str) -> dict[str, Any]:
    """The run's settings: every option that can change its results, resolved for `device` (the device string
    the run uses).  The replay key and the run record's header both come from here, and nowhere else."""
    out = {f.name: _plain(getattr(opts, f.name)) for f in fields(Options) if f.name not in RESULT_NEUTRAL}
    kind = _device_type(device)
    out.update(device=device, dtype=models.dtype_name(opts.dtype, kind),
               profile=opts.profile or plan.default_profile(kind))
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else str(value) if isinstance(value, Path) else value


class UI:
    """Callbacks through which a run reports progress; the CLI draws them, tests may ignore them."""

    def start(self, n_cells: int) -> None: ...
    def cell_start(self, cell: plan.Cell) -> None: ...
    def progress(self, fraction: float, message: str = "", key: str | None = None) -> None: ...
    def cell_done(self, cell: plan.Cell, verdict: Verdict, seconds: float, cached: bool) -> None: ...
    def status(self, done: int, running: int, queued: int) -> None: ...
    def note(self, message: str) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Result:
    run_dir: Path
    record: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)


def resolve_device(device: str) -> str:
    """"auto", "cpu", "cuda", "cuda:N" or "mps" → a device string torch accepts, checked against the machine."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps and mps.is_available())
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if device == "cpu":
        return device
    if device == "mps":
        if not has_mps:
            raise UsageError("--device mps was asked for, but torch sees no MPS device")
        return device
    kind, _, index = device.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise UsageError(f"unknown device '{device}' (use auto, cpu, cuda, cuda:N or mps)")
    if not torch.cuda.is_available():
        raise UsageError(f"--device {device} was asked for, but torch sees no CUDA device")
    if index and int(index) >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                         f"numbered from 0")
    return device


def _device_type(device: str) -> str:
    return device.partition(":")[0]


def display_names(refs: dict[str, Any]) -> dict[str, str]:
    """Short names (alias, repo id, file stem) per given name; the given name where two short names collide."""
    short = {name: (ref.display if isinstance(ref, models.ModelRef) else name) for name, ref in refs.items()}
    counts: dict[str, int] = {}
    for d in short.values():
        counts[d] = counts.get(d, 0) + 1
    return {name: d if counts[d] == 1 else name for name, d in short.items()}


def execute(specs: list[Spec], opts: Options, ui: UI | None = None) -> Result:
    from bench.spine import executors, replay

    ui = ui or UI()
    replay_key = None
    if replay.enabled() and (fast := replay.cheap_device(opts.device)) is not None:
        replay_key = replay.key(specs, settings(opts, fast))
        entry = replay.load(replay_key) if replay_key else None
        if entry is not None:
            return _replayed(entry, opts, ui)
    device = resolve_device(opts.device)
    run_settings = settings(opts, device)
    profile, dtype = run_settings["profile"], run_settings["dtype"]
    refs: dict[str, ModelRef | ModelError] = {}
    if opts.models not in (("default",), ("paper",)):
        for name in opts.models:  # names typed on the command line must exist: exit 2 before any work
            refs[name] = opts.refs.get(name) or models.resolve(name, opts.revision)
    cells = plan.build(specs, opts.models, profile, (opts.seed,), opts.control)
    if not cells:
        raise UsageError("nothing to run: no spec lists a model for this choice of --models")
    refs = {**_resolve_quietly({c.model for c in cells} - set(refs), opts.revision), **refs}
    shown = display_names(refs)
    executor = executors.make(opts.executor, address=opts.ray_address, jobs=opts.jobs, plan=opts.plan, device=device,
                              cells=cells, **dict(opts.executor_options))
    writer = RunWriter.create(opts.runs_dir, {**_header(opts, run_settings),  # the audited model by short name
                                              "audit": shown.get(opts.audit, opts.audit) if opts.audit else None,
                                              "executor": _executor_info(executor, opts)})
    cache = Cache(warn=ui.note)
    alive = _tidy_up(writer, cache, opts.runs_dir, ui)
    by_key = {c.key: c for c in cells}
    done: dict[str, executors.CellResult] = {}
    added: list[str] = []  # keys of writer.record["cells"], in the order they were added

    def on_event(ev: executors.Event) -> None:  # results are matched to cells by key, never by position
        if ev.kind == "start" and ev.key in by_key:
            ui.cell_start(by_key[ev.key])
        elif ev.kind == "progress":
            ui.progress(ev.fraction, ev.message, key=ev.key)
        elif ev.kind == "note":
            ui.note(ev.message)
        elif ev.kind == "status":
            getattr(ui, "status", lambda *a: None)(*ev.counts)
        elif ev.kind == "done" and ev.key in by_key and ev.key not in done:
            res = ev.result
            done[ev.key] = res
            added.append(ev.key)
            writer.add(res.record, res.frame)
            ui.cell_done(by_key[ev.key], res.verdict, res.seconds, res.cached)

    job = executors.Job(refs, device, dtype, opts.allow_pickle, revision=opts.revision, shown=shown,
                        offload_folder=str(opts.offload_folder) if opts.offload_folder else None)
    ui.start(len(cells))
    try:
        executor.run(cells, job, on_event)
    except BaseException:  # Ctrl-C, or an error that ends the run: the record says it did not complete
        order = _in_plan_order(writer, cells, added)
        writer.finish("interrupted", [done[k].verdict.to_json() for k in order])
        results.write(writer.dir, writer.record)
        ui.stop()
        alive.close()
        raise
    for c in [c for c in cells if c.key not in done]:  # a cell an executor lost: the record stays complete
        verdict = stats.errored("the executor returned no result for this cell")
        on_event(executors.Event("done", key=c.key, result=executors.CellResult(
            c.key, _lost_record(c, shown), None, verdict, 0.0, False)))
    against.decide(cells, done)  # claims decided against their control need both frames: all cells are done
    order = _in_plan_order(writer, cells, added)
    final, families = adjust_by_family([by_key[k] for k in order], [done[k].verdict for k in order], opts.models)
    writer.record["bh_families"] = [_portable_family(f, shown) for f in families]
    writer.finish("complete", [v.to_json() for v in final])
    results.write(writer.dir, writer.record)
    alive.close()
    if replay_key:
        replay.store(replay_key, writer.record)
    ui.stop()
    return Result(writer.dir, writer.record, final)


def _in_plan_order(writer: RunWriter, cells: list[plan.Cell], added: list[str]) -> list[str]:
    """Put the record's cells in plan order (executors may finish them in any order); return their keys."""
    rank = {c.key: i for i, c in enumerate(cells)}
    pairs = sorted(zip(added, writer.record["cells"]), key=lambda kv: rank.get(kv[0], len(rank)))
    writer.record["cells"][:] = [rec for _, rec in pairs]
    added[:] = [k for k, _ in pairs]
    return list(added)


def _lost_record(cell: plan.Cell, shown: dict[str, str]) -> dict[str, Any]:
    from bench.spine.cells import portable_spec

    return {"spec": portable_spec(cell.spec.describe()), "model": shown.get(cell.model, cell.model),
            "seed": cell.seed, "probe": {"name": cell.probe.name, "version": cell.probe.version}, "model_ref": None,
            "fingerprint": None, "timings": {}, "cache_hit": False}


def _executor_info(executor, opts: Options) -> dict[str, Any]:
    info = {"name": executor.name}
    describe = getattr(executor, "describe", None)
    if describe is not None:
        info.update(describe())
    return info


def _replayed(entry: dict[str, Any], opts: Options, ui: UI) -> Result:
    """A run with nothing changed: the stored cells and verdicts, frames copied from the cache (see replay)."""
    from bench.ground.store import atomic_write_bytes

    header = {**entry["header"], **_invocation(opts), "executor": {"name": "replay", "of_run": entry["run_id"]}}
    writer = RunWriter.create(opts.runs_dir, header)
    ui.start(len(entry["cells"]))
    verdicts = []
    for cell in entry["cells"]:
        cell = {**cell, "cache_hit": True, "timings": {"total_s": 0.0}}
        if cell.get("frame"):
            atomic_write_bytes(writer.dir / cell["frame"], entry["frame_bytes"][cell["frame"]])
        writer.record["cells"].append(cell)
        verdicts.append(Verdict.from_json(cell["verdict"]))
        ui.cell_done(_Shown(cell), verdicts[-1], 0.0, True)
    writer.finish("complete")
    ui.stop()
    return Result(writer.dir, writer.record, verdicts)


@dataclass(frozen=True)
class _ShownSpec:
    id: str


class _Shown:
    """What a UI reads of a cell (its spec id and model), for a cell that comes from a stored record."""

    def __init__(self, cell: dict[str, Any]):
        self.spec, self.model, self.seed = _ShownSpec(cell["spec"]["id"]), cell["model"], cell["seed"]
        self.key = f"{cell['spec']['id']}|{cell['model']}|{cell['seed']}"


def _tidy_up(writer: RunWriter, cache: Cache, runs_dir: Path, ui: UI) -> contextlib.ExitStack:
    """Mark this run alive (locks released on exit, or by the system if it is killed), then repair what dead
    runs left: their records become "interrupted", their temporary files and half conversions go."""
    alive = contextlib.ExitStack()
    alive.enter_context(upkeep.alive(writer.dir, writer.record["run_id"], cache.root))
    upkeep.mark_interrupted(runs_dir, ui.note)
    upkeep.sweep(runs_dir, cache.root, ui.note)
    return alive


def _resolve_quietly(names: set[str], revision: str | None) -> dict[str, "ModelRef | ModelError"]:
    """Spec-listed models: resolved once here; one that does not resolve is SKIPPED later, with its reason."""
    out: dict[str, ModelRef | ModelError] = {}
    for name in sorted(names):
        try:
            out[name] = models.resolve(name, revision)
        except ModelError as exc:
            out[name] = exc
    return out


def adjust_by_family(cells: list[plan.Cell], raw: list[Verdict],
                     models_choice: tuple[str, ...]) -> tuple[list[Verdict], list[dict[str, Any]]]:
    """BH within each fixed family: the claims of one spec set (the specs of one family id in the spec's folder,
    whether or not this run names them) × one model.  Members that did not run count as p = 1 (see
    :func:`bench.stats.adjust`).  Returns the adjusted verdicts in cell order and the families for the record."""
    from bench.ground.spec import load_specs

    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault((str(Path(c.spec.path).parent), c.spec.family, c.model), []).append(i)
    final: list[Verdict | None] = [None] * len(cells)
    families = []
    declared_cache: dict[str, list[Spec]] = {}
    for (folder, family, model), idx in groups.items():
        if folder not in declared_cache:
            try:
                declared_cache[folder] = load_specs([folder])
            except BenchError:
                declared_cache[folder] = []
        ran = {cells[i].spec.id for i in idx}
        members = [s for s in declared_cache[folder] if s.family == family]
        missing = [s for s in members if s.id not in ran and model in plan.models_for(s, models_choice)]
        unseen = sum(against.p_values(s) for s in missing)
        for i, v in zip(idx, stats.adjust([raw[i] for i in idx], unseen=unseen)):
            final[i] = v
        families.append({"family": family, "folder": folder, "model": model,
                         "members": sorted({s.id for s in members} | ran), "ran": sorted(ran),
                         "not_run": sorted(s.id for s in missing), "unseen_p_values": unseen})
    return [v for v in final if v is not None], families  # every index belongs to one group


ModelRef = models.ModelRef


def _portable_family(family: dict[str, Any], shown: dict[str, str]) -> dict[str, Any]:
    """A correction family for the record: its folder relative to the specs root, its model by short name."""
    from bench.ground.resources import relative_spec_folder

    return {**family, "folder": relative_spec_folder(family["folder"]),
            "model": shown.get(family["model"], family["model"])}


def _portable_command(command: str) -> str:
    """The command line with the working folder and the home folder left out of its paths."""
    cwd, home = str(Path.cwd()), str(Path.home())
    words = []
    for w in command.split(" "):
        if w.startswith(cwd + "/"):
            w = w[len(cwd) + 1:]
        elif home not in ("/", "") and w.startswith(home + "/"):
            w = "~" + w[len(home):]
        words.append(w)
    return " ".join(words)


def _invocation(opts: Options) -> dict[str, Any]:
    """The header fields that describe this invocation (see ``replay.INVOCATION_FIELDS``), but its executor."""
    return {"command": _portable_command(opts.command or " ".join(sys.argv)), "git_revision": _git_revision()}


def _header(opts: Options, s: dict[str, Any]) -> dict[str, Any]:
    """The record's header, from the run's settings `s` (see :func:`settings`) and this machine."""
    import torch

    device = s["device"]
    if _device_type(device) == "cuda":
        dev_name = torch.cuda.get_device_name(torch.device(device).index or 0)
    else:
        dev_name = platform.processor() or platform.machine()
    return {
        **_invocation(opts),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": {"type": _device_type(device), "index": torch.device(device).index, "name": dev_name,
                   "threads": torch.get_num_threads()},
        "dtype": s["dtype"],
        "seed": s["seed"],
        "profile": s["profile"],
        "models_choice": s["models"],
        "audit": s["audit"],
        "control": s["control"],
        "revision": s["revision"],
        "settings": s,
    }


def package_versions() -> dict[str, str | None]:
    """The installed version of each package that computes (None where it is missing), as records keep them."""
    return {p: _version(p) for p in PACKAGES}


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _git_revision() -> str | None:
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip() if out.returncode == 0 else None
    return f"{rev}+dirty" if rev and dirty.stdout.strip() else rev


def exit_code(verdict_list: list[Verdict], fail_on: tuple[str, ...]) -> int:
    """0 completed; 1 a --fail-on outcome occurred; 3 every cell errored."""
    if verdict_list and all(v.outcome is Outcome.ERROR for v in verdict_list):
        return 3
    wanted = {f.upper() for f in fail_on}
    if any(v.outcome.value in wanted for v in verdict_list):
        return 1
    return 0
