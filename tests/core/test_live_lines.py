"""Lines printed while a run goes on never state an outcome that the family's correction may still change: the
final table is the one place where SUPPORTED, REFUTED and INCONCLUSIVE are stated."""

from __future__ import annotations

import json
import shutil

import pytest

from bench import stats
from bench.cli.ui import live_numbers, live_word
from bench.stats import Outcome, Verdict

SPECS = ("induction-heads-exist.toml", "k-composition.toml", "norm-folding-is-exact.toml")


def test_live_word_states_only_final_outcomes():
    for outcome in Outcome:
        v = Verdict(outcome, "r", "threshold", "m", 0.5, 0.4, 0.6, p_value=0.03)
        word = live_word(v)
        assert word == (outcome.value if outcome in (Outcome.ERROR, Outcome.SKIPPED) else "measured")
    shown = live_numbers(Verdict(Outcome.SUPPORTED, "r", "threshold", "m", 0.5, 0.4, 0.6, p_value=0.03))
    assert "0.5 [0.4, 0.6]" in shown and "p 0.03 raw" in shown


@pytest.fixture
def circuit_specs(specs_dir, tmp_path):
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True)
    for name in SPECS:
        shutil.copy(specs_dir / "circuits" / name, d / name)
    return d


def test_a_cell_that_bh_overturns_is_never_printed_supported(cli, circuit_specs, tiny_model_dir, chdir_tmp,
                                                              monkeypatch):
    """Raw p = 0.03 for one claim and 0.9 for its two siblings: BH over the family of three gives 0.09, so the
    cell ends INCONCLUSIVE; before, its live line said SUPPORTED."""
    def planted(frame, rule, params):
        p = 0.03 if "loss_first" in json.dumps(params) else 0.9
        return Verdict(Outcome.SUPPORTED if p < 0.05 else Outcome.INCONCLUSIVE, "planted", rule, "m", 1.0,
                       0.5, 1.5, p_value=p, alpha=0.05)

    monkeypatch.setattr(stats, "evaluate", planted)
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report", "--fail-on", "supported")
    assert r.exit_code == 0, r.output  # nothing ended SUPPORTED
    live, _, table = r.output.partition("┏")
    assert "measured" in live and "circuits.induction-heads-exist" in live
    assert "SUPPORTED" not in live and "INCONCLUSIVE" not in live, live
    (run,) = (chdir_tmp / "runs").iterdir()
    cells = json.loads((run / "record.json").read_text())["cells"]
    induction = next(c for c in cells if c["spec"]["id"] == "circuits.induction-heads-exist")
    assert induction["verdict"]["outcome"] == "INCONCLUSIVE" and induction["verdict"]["p_adjusted"] > 0.05
    assert "INCONCLUSIVE" in table and "SUPPORTED" not in table


def test_a_long_cell_run_into_a_file_prints_its_progress_now_and_then(monkeypatch):
    """Where stderr is a file the bars are not drawn until the end: a cell's progress is printed as a line at most
    once per interval (the first an interval after it started), per cell, and a cell done sooner prints none."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from bench.cli import ui as ui_mod

    sink = io.StringIO()
    monkeypatch.setattr(ui_mod, "ERR", Console(file=sink, force_terminal=False, width=200))
    clock = [1000.0]
    monkeypatch.setattr(ui_mod.time, "monotonic", lambda: clock[0])
    ui = ui_mod.RichUI(log_every_s=60)
    assert ui.logging
    cell = lambda key, claim: SimpleNamespace(key=key, spec=SimpleNamespace(id=claim), model="m")  # noqa: E731
    long, short = cell("k1", "fam.long"), cell("k2", "fam.short")
    ui.start(2)
    ui.cell_start(long)
    for t, f in ((10, 0.01), (59, 0.02), (61, 0.03), (100, 0.04), (122, 0.05)):
        clock[0] = 1000.0 + t
        ui.progress(f, f"policy step {t}/200", key="k1")
    ui.cell_start(short)
    clock[0] = 1130.0
    ui.progress(0.5, "quick", key="k2")
    ui.cell_done(short, Verdict(Outcome.ERROR, "boom", "threshold", "m", None, None, None), 1.0, False)
    ui.stop()
    lines = [ln for ln in sink.getvalue().splitlines() if "%" in ln and "fam." in ln]
    assert [ln.rsplit("  ", 1)[-1] for ln in lines] == ["policy step 61/200", "policy step 122/200"], lines
    assert "fam.long × m  3%" in lines[0]
    assert not any("quick" in ln for ln in lines)


def test_a_terminal_or_quiet_run_prints_no_progress_lines(monkeypatch):
    from bench.cli import ui as ui_mod

    from rich.console import Console

    assert not ui_mod.RichUI(quiet=True).logging
    monkeypatch.setattr(ui_mod, "ERR", Console(force_terminal=True))
    assert not ui_mod.RichUI().logging  # the bars say it
