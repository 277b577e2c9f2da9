"""Terminal output: progress bars while a run works, tables when it ends (rich)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.core.run import UI


def _console(stderr: bool = False) -> Console:
    c = Console(stderr=stderr, highlight=False)
    return c if c.is_terminal else Console(stderr=stderr, highlight=False, width=140)


OUT = _console()
ERR = _console(stderr=True)
STYLE = {"SUPPORTED": "bold green", "REFUTED": "bold red", "INCONCLUSIVE": "bold yellow", "ERROR": "bold magenta",
         "SKIPPED": "dim"}


class RichUI(UI):
    def __init__(self) -> None:
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=ERR, transient=False)
        self.overall = None
        self.current = None
        self.tasks: dict[str, object] = {}

    def start(self, n_cells: int) -> None:
        self.bar.start()
        self.overall = self.bar.add_task("cells", total=n_cells, note="")

    def cell_start(self, cell) -> None:
        self.current = self.bar.add_task(f"  {cell.spec.id} × {cell.model}", total=100, note="")
        self.tasks[cell.key] = self.current  # on a cluster several cells run at once, each with its bar

    def progress(self, fraction: float, message: str = "") -> None:
        if self.current is not None:
            self.bar.update(self.current, completed=max(0.0, min(1.0, fraction)) * 100, note=message[:40])

    def cell_done(self, cell, verdict, seconds: float, cached: bool) -> None:
        task = self.tasks.pop(getattr(cell, "key", None), None)
        if task is not None:
            self.bar.update(task, completed=100, note=f"{verdict.outcome.value}"
                            + (" (cached)" if cached else f" {seconds:.1f}s"))
            self.bar.stop_task(task)
            self.bar.remove_task(task)
            if task == self.current:
                self.current = next(reversed(self.tasks.values()), None)
        self.bar.advance(self.overall)
        ERR.print(f"  [{STYLE[verdict.outcome.value]}]{verdict.outcome.value:<12}[/] {cell.spec.id} × {cell.model}"
                  f"  [dim]{'cached' if cached else f'{seconds:.1f}s'}[/]")

    def status(self, done: int, running: int, queued: int) -> None:
        if self.overall is not None:
            self.bar.update(self.overall, note=f"{done} done · {running} running · {queued} queued")

    def note(self, message: str) -> None:
        ERR.print(f"[dim]{message}[/]")

    def stop(self) -> None:
        self.bar.stop()


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x != 0 and (abs(x) < 10 ** -(digits) or abs(x) >= 10 ** 5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:.{digits + 1}g}"


def estimate_text(v: dict[str, Any]) -> str:
    est = fmt(v.get("estimate"))
    if v.get("ci_low") is not None and v.get("ci_high") is not None:
        est += f" [{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]"
    return est


def print_summary(record: dict[str, Any], run_dir: Path) -> None:
    t = Table(title=f"run {record['run_id']} · profile {record.get('profile')} · device {record['device']['type']}"
              f" · seed {record.get('seed')}", show_lines=False)
    for col, kw in (("claim", {}), ("model", {}), ("outcome", {}), ("estimate [95% CI]", {"justify": "right"}),
                    ("p (BH)", {"justify": "right"}), ("n", {"justify": "right"}), ("s", {"justify": "right"})):
        t.add_column(col, **kw)
    counts: dict[str, int] = {}
    for cell in record["cells"]:
        v = cell.get("verdict") or {}
        outcome = v.get("outcome", "?")
        counts[outcome] = counts.get(outcome, 0) + 1
        p = v.get("p_adjusted", v.get("p_value"))
        secs = (cell.get("timings") or {}).get("total_s")
        t.add_row(cell["spec"]["id"], cell["model"], f"[{STYLE.get(outcome, '')}]{outcome}[/]", estimate_text(v),
                  fmt(p), str(v.get("n") or "—"),
                  ("cached" if cell.get("cache_hit") else f"{secs:.1f}") if secs is not None else "—")
    OUT.print(t)
    for cell in record["cells"]:
        v = cell.get("verdict") or {}
        if v.get("outcome") in ("INCONCLUSIVE", "ERROR", "SKIPPED", "REFUTED"):
            OUT.print(f"  [dim]{cell['spec']['id']} × {cell['model']}: {v.get('reason', '')}[/]")
    summary = ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items()))
    OUT.print(f"{len(record['cells'])} cells: {summary}   status: {record.get('status')}")
    OUT.print(f"run record: {Path(run_dir) / 'record.json'}")


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
