"""A training loop's saved state (bench.ground.resume): what is saved comes back, a save is atomic, a file that
cannot be read or does not fit is reported and set aside before anything changes, and the timed saves keep to
their interval and to their share of the time."""

from __future__ import annotations

import pytest
import torch

from bench.ground import resume as rs
from bench.ground.errors import UsageError


def _loop(seed: int = 0):
    torch.manual_seed(seed)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(lin.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return lin, opt, sched


def _step(lin, opt, sched, gen):
    x = torch.randn(4, 3, generator=gen)
    loss = torch.nn.functional.dropout(lin(x), 0.5).pow(2).mean()  # the global generator: dropout
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return float(loss.detach())


def test_a_restored_loop_continues_exactly_as_the_unbroken_one(tmp_path):
    """Known answer: six steps in one go against three, a save, a fresh process's objects restored, three more —
    the same losses and weights, bit for bit.  Leaving out any part (the optimizer's moments, the schedule, the
    loop's generator, the global one) changes them."""
    lin, opt, sched = _loop()
    gen = torch.Generator().manual_seed(5)
    unbroken = [_step(lin, opt, sched, gen) for _ in range(6)]
    want = [p.detach().clone() for p in lin.parameters()]

    saved = rs.Resume(tmp_path / "s.pt", every_s=0)
    lin, opt, sched = _loop()
    gen = torch.Generator().manual_seed(5)
    first = [_step(lin, opt, sched, gen) for _ in range(3)]
    saved.carry["rows"] = ["a"]
    saved.save(rs.snapshot(list(lin.named_parameters()), opt, sched=sched, generators=[gen], step=3, values=first))
    torch.manual_seed(123)  # whatever the process drew in between

    for leave_out in (None, "opt", "sched", "gen", "rng"):
        again = rs.Resume(tmp_path / "s.pt", every_s=0)
        lin2, opt2, sched2 = _loop(seed=9)  # other initial weights: all of them must come from the save
        gen2 = torch.Generator().manual_seed(77)
        state = rs.restore(again, list(lin2.named_parameters()), opt2, sched=sched2, generators=[gen2])
        assert state["step"] == 3 and state["values"] == first and again.carry == {"rows": ["a"]}
        if leave_out == "opt":
            opt2.state.clear()
        elif leave_out == "sched":
            sched2.last_epoch = 0
        elif leave_out == "gen":
            gen2.manual_seed(5)
        elif leave_out == "rng":
            torch.manual_seed(0)
        rest = [_step(lin2, opt2, sched2, gen2) for _ in range(3)]
        same = first + rest == unbroken and all(torch.equal(p, q) for p, q in zip(lin2.parameters(), want))
        assert same == (leave_out is None), leave_out


def test_nothing_saved_is_none_and_a_damaged_file_is_set_aside_with_a_warning(tmp_path):
    said = []
    r = rs.Resume(tmp_path / "s.pt", warn=said.append)
    assert r.load() is None and said == []
    lin, opt, _ = _loop()
    assert rs.restore(None, list(lin.named_parameters()), opt) is None  # no place to save: nothing to restore
    for junk in (b"not a torch file", None):
        path = tmp_path / "s.pt"
        if junk is None:
            torch.save({"no": "step"}, path)  # readable, but not a training state
        else:
            path.write_bytes(junk)
        r = rs.Resume(path, warn=said.append)
        assert r.load() is None and not path.exists()
        assert said[-1].startswith("saved training state s.pt cannot be read (") and "training from the start" in said[-1]
    assert len(said) == 2


def test_a_state_of_another_shape_changes_nothing_and_is_set_aside(tmp_path):
    lin, opt, sched = _loop()
    r = rs.Resume(tmp_path / "s.pt", every_s=0)
    r.save(rs.snapshot(list(lin.named_parameters()), opt, sched=sched, step=2))
    said = []
    other = torch.nn.Linear(3, 5)
    before = [p.detach().clone() for p in other.parameters()]
    o_opt = torch.optim.AdamW(other.parameters())
    r2 = rs.Resume(tmp_path / "s.pt", warn=said.append)
    assert rs.restore(r2, list(other.named_parameters()), o_opt, sched=torch.optim.lr_scheduler.LambdaLR(
        o_opt, lambda s: 1.0)) is None
    assert all(torch.equal(p, q) for p, q in zip(other.parameters(), before)) and not o_opt.state
    assert "does not fit this run" in said[0] and not (tmp_path / "s.pt").exists()
    r.save(rs.snapshot(list(lin.named_parameters()), opt, sched=sched, step=2))
    gen = torch.Generator()
    assert rs.restore(rs.Resume(tmp_path / "s.pt", warn=said.append), list(lin.named_parameters()), opt,
                      sched=sched, generators=[gen]) is None  # one generator more than was saved
    assert len(said) == 2


def test_a_save_replaces_the_last_one_whole_and_clear_removes_it(tmp_path, monkeypatch):
    r = rs.Resume(tmp_path / "d" / "s.pt", every_s=0)
    r.save({"step": 1})
    loaded = rs.Resume(tmp_path / "d" / "s.pt").load()
    assert loaded.pop("about")["total"] is None and loaded == {"step": 1, "carry": {}}

    def dies(obj, f):
        f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(rs.torch, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        r.save({"step": 2})
    monkeypatch.undo()
    assert rs.Resume(tmp_path / "d" / "s.pt").load()["step"] == 1  # the last good save
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["s.pt"]  # no temporary file left
    r.clear()
    assert not (tmp_path / "d" / "s.pt").exists()


def test_saves_come_every_n_steps_and_by_wall_time_never_above_their_share(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(rs.time, "monotonic", lambda: now[0])
    r = rs.Resume(tmp_path / "s.pt", every_steps=3, every_s=60)
    assert [s for s in range(1, 10) if r.due(s)] == [3, 6, 9]  # no time has passed
    now[0] += 60
    assert r.due(1)
    real = rs.torch.save

    def slow_save(obj, f):  # a save that takes 5 s: the next waits 20 × 5 = 100 s, not 60
        now[0] += 5
        real(obj, f)

    monkeypatch.setattr(rs.torch, "save", slow_save)
    r.save({"step": 1})
    now[0] += 99
    assert not r.due(1)
    now[0] += 1
    assert r.due(1)
    never = rs.Resume(tmp_path / "t.pt", every_s=0)
    now[0] += 10_000
    assert not any(never.due(s) for s in range(1, 20))
    saves = []
    monkeypatch.setattr(never, "save", lambda st, total: saves.append(st["step"]))
    for s in range(1, 6):
        rs.maybe_save(never, s, 5, lambda s=s: {"step": s})
    rs.maybe_save(None, 5, 5, lambda: 1 / 0)  # no place to save: nothing is built
    assert saves == [5]  # the last step is always saved


@pytest.mark.parametrize("value, expected", [("", 600.0), ("0", 0.0), (" 30 ", 30.0), ("1.5", 1.5)])
def test_the_interval_comes_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv(rs.SAVE_EVERY_ENV, value)
    assert rs.save_every_s() == expected
    assert rs.Resume("x.pt").every_s == expected


@pytest.mark.parametrize("value", ["ten", "-1", "nan"])
def test_a_bad_interval_is_a_usage_error_that_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(rs.SAVE_EVERY_ENV, value)
    with pytest.raises(UsageError, match="^BENCH_SAVE_EVERY must be"):
        rs.save_every_s()
