"""Terminal output: progress bars while a run works, tables when it ends (rich)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.ground.numbers import fmt
from bench.spine.run import UI


def _console(stderr: bool = False) -> Console:
    c = Console(stderr=stderr, highlight=False)
    return c if c.is_terminal else Console(stderr=stderr, highlight=False, width=140)


OUT = _console()
ERR = _console(stderr=True)
STYLE = {"SUPPORTED": "bold green", "REFUTED": "bold red", "INCONCLUSIVE": "bold yellow", "ERROR": "bold magenta",
         "SKIPPED": "dim"}


LOG_EVERY_S = 60.0  # where stderr is a file, not a terminal: a running cell's progress line at most this often


class RichUI(UI):
    """Progress bars and one line per finished cell on stderr; `quiet` draws nothing (errors still show).

    Where stderr is not a terminal (a run in the background, its output sent to a file) the bars are not drawn
    until the end, so a cell that runs for hours would say nothing; instead a running cell's progress is printed
    as a line with the time of day, at most every `log_every_s` seconds (none for a cell done sooner)."""

    def __init__(self, quiet: bool = False, log_every_s: float = LOG_EVERY_S) -> None:
        self.quiet = quiet
        self.log_every_s = log_every_s
        self.logging = not quiet and not ERR.is_terminal
        self.names: dict[Any, str] = {}
        self.logged: dict[Any, float] = {}
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=ERR, transient=False,
                            disable=quiet)
        self.overall = None
        self.current = None
        self.tasks: dict[str, object] = {}

    def start(self, n_cells: int) -> None:
        self.bar.start()
        self.overall = self.bar.add_task("cells", total=n_cells, note="")

    def cell_start(self, cell) -> None:
        name = f"{cell.spec.id} × {short_model(cell.model)}"
        self.current = self.bar.add_task(f"  {name}", total=100, note="")
        self.tasks[cell.key] = self.current  # on a cluster several cells run at once, each with its bar
        if self.logging:
            self.names[cell.key] = name
            self.logged[cell.key] = time.monotonic()  # a cell done within the interval prints only its result

    def progress(self, fraction: float, message: str = "", key: str | None = None) -> None:
        task = self.tasks.get(key, self.current)  # several cells run at once on a cluster or in worker processes
        if task is not None:
            self.bar.update(task, completed=max(0.0, min(1.0, fraction)) * 100, note=message[:40])
        if self.logging:
            self._log(key if key in self.names else next(reversed(self.names), None), fraction, message)

    def _log(self, key: Any, fraction: float, message: str) -> None:
        now = time.monotonic()
        name = self.names.get(key)
        if name is None or now - self.logged.get(key, -float("inf")) < self.log_every_s:
            return
        self.logged[key] = now
        ERR.print(f"  {time.strftime('%H:%M:%S')} {name}  {max(0.0, min(1.0, fraction)):.0%}  {message}",
                  markup=False)

    def cell_done(self, cell, verdict, seconds: float, cached: bool) -> None:
        word = live_word(verdict)
        key = getattr(cell, "key", None)
        task = self.tasks.pop(key, None)
        self.names.pop(key, None)
        self.logged.pop(key, None)
        if task is not None:
            self.bar.update(task, completed=100, note=word + (" (cached)" if cached else f" {seconds:.1f}s"))
            self.bar.stop_task(task)
            self.bar.remove_task(task)
            if task == self.current:
                self.current = next(reversed(self.tasks.values()), None)
        self.bar.advance(self.overall)
        if self.quiet:
            return
        ERR.print(f"  [{STYLE.get(word, 'dim')}]{word:<12}[/] {cell.spec.id} × {short_model(cell.model)}"
                  f"  {live_numbers(verdict)}  [dim]{'cached' if cached else f'{seconds:.1f}s'}[/]")

    def status(self, done: int, running: int, queued: int) -> None:
        if self.overall is not None:
            self.bar.update(self.overall, note=f"{done} done · {running} running · {queued} queued")

    def note(self, message: str) -> None:
        if not self.quiet:
            ERR.print(f"[dim]{message}[/]")

    def stop(self) -> None:
        self.bar.stop()


FINAL_WHEN_MEASURED = ("ERROR", "SKIPPED")  # outcomes the family's correction cannot change


def live_word(verdict) -> str:
    """What a line printed while the run goes on says of a cell: ERROR and SKIPPED are final; any other outcome
    waits for the Benjamini–Hochberg correction over the cell's family, so the line says only "measured" (the
    final table is the one place where SUPPORTED, REFUTED and INCONCLUSIVE are stated)."""
    return verdict.outcome.value if verdict.outcome.value in FINAL_WHEN_MEASURED else "measured"


def live_numbers(verdict) -> str:
    """The estimate and the raw (uncorrected) p of a measured cell, labelled as raw."""
    if verdict.outcome.value in FINAL_WHEN_MEASURED:
        return ""
    v = verdict.to_json()
    text = estimate_text(v) if v.get("estimate") is not None else ""
    if v.get("p_value") is not None:
        text += f"  p {fmt(v['p_value'])} raw"
    return text.strip()


def short_model(name: str) -> str:
    """A model name as tables show it: a local path by its file stem or folder name, anything else as given."""
    p = Path(name)
    if len(p.parts) > 1 and p.exists():
        return p.stem if p.suffix == ".gguf" else p.name
    return name


def estimate_text(v: dict[str, Any]) -> str:
    est = fmt(v.get("estimate"))
    if v.get("ci_low") is not None and v.get("ci_high") is not None:
        est += f" [{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]"
    return est


def print_summary(record: dict[str, Any], run_dir: Path, quiet: bool = False) -> None:
    if quiet:
        counts = _counts(record)
        OUT.print(f"{len(record['cells'])} cells: " + ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items()))
                  + f"   record: {Path(run_dir) / 'record.json'}")
        return
    t = Table(title=f"run {record['run_id']} · profile {record.get('profile')} · device {record['device']['type']}"
              f" · seed {record.get('seed')}", show_lines=False)
    for col, kw in (("claim", {}), ("model", {}), ("outcome", {}), ("estimate [95% CI]", {"justify": "right"}),
                    ("p (BH)", {"justify": "right"}), ("n", {"justify": "right"}), ("s", {"justify": "right"})):
        t.add_column(col, **kw)
    from bench.models.controls import control_outcomes, flag

    control = control_outcomes(record["cells"])
    counts: dict[str, int] = {}
    flagged = 0
    for cell in record["cells"]:
        v = cell.get("verdict") or {}
        outcome = v.get("outcome", "?")
        counts[outcome] = counts.get(outcome, 0) + 1
        p = v.get("p_adjusted", v.get("p_value"))
        secs = (cell.get("timings") or {}).get("total_s")
        warn = flag(cell["spec"], cell["model"], control)
        flagged += warn is not None
        shown = f"[{STYLE.get(outcome, '')}]{outcome}[/]" + (f" [bold yellow]⚠ {warn}[/]" if warn else "")
        t.add_row(cell["spec"]["id"], cell["model"], shown, estimate_text(v),
                  fmt(p), str(v.get("n") or "—"),
                  ("cached" if cell.get("cache_hit") else f"{secs:.1f}") if secs is not None else "—")
    OUT.print(t)
    for cell in record["cells"]:
        v = cell.get("verdict") or {}
        if v.get("outcome") in ("INCONCLUSIVE", "ERROR", "SKIPPED", "REFUTED"):
            OUT.print(f"  [dim]{cell['spec']['id']} × {cell['model']}: {v.get('reason', '')}[/]")
    summary = ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items()))
    OUT.print(f"{len(record['cells'])} cells: {summary}   status: {record.get('status')}")
    if flagged:
        OUT.print(f"[bold yellow]⚠ {flagged} cells hold on their random-init control too: not evidence about "
                  f"learned internals[/]")
    OUT.print(f"run record: {Path(run_dir) / 'record.json'}")


def _counts(record: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for cell in record["cells"]:
        outcome = (cell.get("verdict") or {}).get("outcome", "?")
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def print_specs(specs) -> None:
    t = Table()
    t.add_column("id", no_wrap=True, min_width=max((len(s.id) for s in specs), default=2))  # ids are never cut
    for col in ("title", "probe", "rule", "default models"):
        t.add_column(col)
    for s in specs:
        t.add_row(s.id, s.title, s.probe, s.rule, ", ".join(s.models_default))
    OUT.print(t)
    OUT.print(f"{len(specs)} claims")


def print_models() -> None:
    from bench import models

    t = Table(title="embedded models")
    for col in ("alias", "state", "what"):
        t.add_column(col)
    for alias, e in models.ALIASES.items():
        t.add_row(alias, models.cache_state(alias), e.describe)
    OUT.print(t)
    OUT.print("Other models: pass a local checkpoint folder, a .gguf file, or a Hugging Face hub id.")


def print_diff(rows: list[dict[str, Any]], a: str, b: str) -> None:
    if not rows:
        OUT.print(f"no differences between {a} and {b}")
        return
    t = Table(title=f"{a} → {b}")
    for col in ("claim", "model", "change", "outcome A", "outcome B", "estimate A", "estimate B"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["spec"], r["model"], r["change"], r["outcome_a"], r["outcome_b"], fmt(r["estimate_a"]),
                  fmt(r["estimate_b"]))
    OUT.print(t)
    OUT.print(f"{len(rows)} changed cells")


def print_compare(rows, model_a: str, model_b: str) -> None:
    t = Table(title=f"{model_a} (A) − {model_b} (B)")
    for col in ("claim", "metric", "A", "B", "A − B [95% CI]", "p (BH)", "n", "unit"):
        t.add_column(col, no_wrap=col == "claim")
    for r in rows:
        ci = f" [{fmt(r.ci_low)}, {fmt(r.ci_high)}]" if r.ci_low is not None else ""
        t.add_row(r.claim, r.metric or "—", fmt(r.mean_a), fmt(r.mean_b), fmt(r.difference) + ci,
                  fmt(r.p_adjusted), str(r.n_units), r.unit if not r.note else f"{r.unit} ({r.note})")
    OUT.print(t)
    differ = sum(1 for r in rows if r.p_adjusted is not None and r.p_adjusted < 0.05)
    OUT.print(f"{len(rows)} claims compared; {differ} differ at BH-adjusted p < 0.05")
