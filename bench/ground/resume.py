"""Resumable training loops.

A loop that runs for hours (an RL run of the full profile, a prefix decoder of 3,000 steps) saves its whole state
now and then to one file; a run killed part-way (a kill, an out-of-memory, a lost machine) starts again from the
last save and ends with the same weights and numbers as a run that was never stopped.  The state is everything the
rest of the loop depends on: the parameters being trained, the optimizer and its schedule, every random generator
the loop draws from, its place in the data, what it has recorded so far, and whatever its caller keeps beside it
(:attr:`Resume.carry`, e.g. the evaluations at earlier checkpoints).

When: every ``every_steps`` steps where a caller asks for it, and by wall time every ``$BENCH_SAVE_EVERY`` seconds
(default 600; 0 turns the timed saves off), never sooner after a save than 20 times that save's own duration (so
saving costs at most about 5% of the time).  A save is written to a temporary file and renamed into place, so a
kill during a save leaves the previous one; a file that cannot be read is reported and set aside (the loop starts
over, nothing is trusted that cannot be read).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from bench.ground.errors import UsageError
from bench.ground.store import atomic_write

SAVE_EVERY_ENV = "BENCH_SAVE_EVERY"
DEFAULT_EVERY_S = 600.0
COST_SHARE = 20  # a save waits at least this many times the last save's duration before the next


def save_every_s() -> float:
    """The timed saves' interval in seconds, from ``$BENCH_SAVE_EVERY`` (default 600; 0: no timed saves)."""
    raw = os.environ.get(SAVE_EVERY_ENV, "").strip()
    if not raw:
        return DEFAULT_EVERY_S
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{SAVE_EVERY_ENV} must be a number of seconds, got {raw!r}") from None
    if value < 0 or value != value:
        raise UsageError(f"{SAVE_EVERY_ENV} must be 0 or more seconds, got {raw!r}")
    return value


@dataclass(eq=False)
class Resume:
    """One training loop's saved state at `path`.  A loop calls :func:`restore` before its first step and
    :func:`maybe_save` after each (they read :meth:`load` and :meth:`due`, and :meth:`save`); the owner of the
    result calls :meth:`clear` once the finished result is stored elsewhere."""

    path: Path
    every_steps: int = 0
    every_s: float | None = None  # None: $BENCH_SAVE_EVERY
    warn: Callable[[str], None] = lambda message: None
    carry: dict[str, Any] = field(default_factory=dict)
    at_end: bool = True  # save after the last step too (False: the caller stores the result at once itself)
    label: str = ""  # what the run is, for `bench cache` (e.g. "rl seed 0"); saved with the state
    _last: float = field(default=0.0, init=False, repr=False)  # when the last save ended (or the loop began)
    _cost: float = field(default=0.0, init=False, repr=False)
    _loaded: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _read: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self._last = time.monotonic()
        if self.every_s is None:
            self.every_s = save_every_s()

    def load(self) -> dict[str, Any] | None:
        """The saved state (read once; later calls return the same), or None when nothing usable was saved."""
        if self._read:
            return self._loaded
        self._read = True
        if not self.path.is_file():
            return None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=False)
            if not isinstance(state, dict) or not isinstance(state.get("step"), int) \
                    or not isinstance(state.get("carry", {}), dict):
                raise ValueError("not a saved training state")
        except Exception as exc:  # noqa: BLE001 - a damaged state is never trusted: start over
            self.warn(f"saved training state {self.path.name} cannot be read ({type(exc).__name__}: "
                      f"{str(exc)[:80]}); training from the start")
            self.clear()
            return None
        self._loaded = state
        return state

    def due(self, step: int) -> bool:
        """Whether to save after `step` (1-based count of finished steps)."""
        if self.every_steps and step % self.every_steps == 0:
            return True
        wait = max(float(self.every_s or 0.0), COST_SHARE * self._cost)
        return bool(self.every_s) and time.monotonic() - self._last >= wait

    def save(self, state: dict[str, Any], total: int | None = None) -> None:
        """Write `state` (which must hold ``step``) and :attr:`carry`, atomically; with the loop's `total` steps,
        the :attr:`label` and the time, which only :func:`describe` reads."""
        began = time.monotonic()
        about = {"total": total, "label": self.label, "saved_at": time.time()}
        atomic_write(self.path, lambda f: torch.save({**state, "carry": dict(self.carry), "about": about}, f))
        self._last = time.monotonic()
        self._cost = self._last - began

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self._loaded = None


# ── what a loop saves ──────────────────────────────────────────────────────────────────────────────────────

def snapshot(params: Sequence[tuple[str, torch.Tensor]], opt: torch.optim.Optimizer, *, sched=None,
             generators: Sequence[torch.Generator] = (), **extra: Any) -> dict[str, Any]:
    """A loop's state: its trainable `params` (name, tensor), `opt`'s and `sched`'s state, the states of
    `generators` and of the global CPU generator (dropout), and `extra` (the step, the values recorded, …)."""
    return {"params": {n: p.detach().cpu().clone() for n, p in params}, "opt": opt.state_dict(),
            "sched": sched.state_dict() if sched is not None else None,
            "generators": [g.get_state() for g in generators], "rng": torch.get_rng_state(), **extra}


def restore(resume: Resume | None, params: Sequence[tuple[str, torch.Tensor]], opt: torch.optim.Optimizer, *,
            sched=None, generators: Sequence[torch.Generator] = ()) -> dict[str, Any] | None:
    """Put back what :func:`snapshot` saved under `resume` and return the saved state (for its step and extras),
    or None when there is none; the saved :attr:`Resume.carry` replaces its entries (in place).  A state that does not fit (other tensors, shapes or generators) is reported and
    set aside before anything is changed, and the loop starts over."""
    if resume is None:
        return None
    resume._last = time.monotonic()  # the loop begins: the first timed save comes an interval from now
    state = resume.load()
    if state is None:
        return None
    named = dict(params)
    saved = state.get("params", {})
    fits = (set(saved) == set(named) and all(saved[n].shape == named[n].shape for n in named)
            and len(state.get("generators", ())) == len(generators) and (state.get("sched") is None) == (sched is None)
            and len(state["opt"]["param_groups"]) == len(opt.param_groups))
    if not fits:
        resume.warn(f"saved training state {resume.path.name} does not fit this run ({len(saved)} saved tensors, "
                    f"{len(named)} trained); training from the start")
        resume.clear()
        return None
    opt.load_state_dict(state["opt"])
    with torch.no_grad():
        for n, t in saved.items():
            named[n].copy_(t)
    if sched is not None:
        sched.load_state_dict(state["sched"])
    for g, s in zip(generators, state["generators"]):
        g.set_state(s)
    torch.set_rng_state(state["rng"])
    resume.carry.clear()
    resume.carry.update(state.get("carry", {}))
    return state


def maybe_save(resume: Resume | None, step: int, total: int, state: Callable[[], dict[str, Any]]) -> None:
    """After `step` of `total`: save ``state()`` when `resume` says it is due, and after the last step where it
    asks (``at_end``: a finished loop whose result is not yet stored elsewhere is not run again)."""
    if resume is not None and (resume.at_end if step >= total else resume.due(step)):
        resume.save(state(), total=total)


def describe(path: Path) -> dict[str, Any]:
    """What a saved state says of its run, for `bench cache`: ``step``, ``total``, ``label`` and ``saved_at`` (None
    where a state saved before they were kept lacks them), or ``error`` when the file cannot be read.  The
    tensors are mapped, not read."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        about = state.get("about") or {}
        return {"step": int(state["step"]), "total": about.get("total"), "label": about.get("label") or None,
                "saved_at": about.get("saved_at")}
    except Exception as exc:  # noqa: BLE001 - shown, not trusted: the next run sets it aside
        return {"error": f"{type(exc).__name__}: {str(exc)[:80]}"}
