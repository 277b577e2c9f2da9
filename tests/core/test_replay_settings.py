"""A warm replay is correct only if a cold run of the same command would write the same record.

Every option of `verify` and `audit` is either one of the run's settings (in the replay key and the record) or
declared as shaping only the output; the replayed record equals the cold one field by field, but for what
describes the invocation (run id, times, command, git revision, executor) and the cells' timings."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from bench.cli import OUTPUT_OPTIONS, audit, verify
from bench.spine import replay, run

# Parameters of the two commands that are not run options: what to run and how much to print.
WHAT_TO_RUN = {"paths", "models_", "model", "quiet", "verbose"}
# A different value for each setting: a new Options field that is not result-neutral must be added here,
# and then it must change the settings (hence the replay key) of a run.
OTHER_VALUE = {"models": ("elsewhere",), "profile": "full", "seed": 7, "allow_pickle": True, "audit": "m",
               "control": "random-init", "dtype": "bfloat16", "revision": "v2"}


@pytest.mark.parametrize("command", [verify, audit], ids=["verify", "audit"])
def test_every_option_is_a_setting_or_declared_output_only(command):
    fields = {f.name for f in dataclasses.fields(run.Options)}
    for p in command.params:
        assert p.name in WHAT_TO_RUN | set(OUTPUT_OPTIONS) | fields, (
            f"--{p.name} is neither a run option (run.Options) nor declared as output-only (cli.OUTPUT_OPTIONS)")


def test_every_run_option_is_in_the_settings_or_declared_neutral():
    opts = run.Options()
    s = run.settings(opts, "cpu")
    for f in dataclasses.fields(run.Options):
        if f.name == "device":  # in the settings as resolved: checked below
            continue
        if f.name in run.RESULT_NEUTRAL:
            assert f.name not in s
            continue
        assert f.name in s, f.name
        assert f.name in OTHER_VALUE, f"give {f.name} another value in OTHER_VALUE"
        changed = run.settings(dataclasses.replace(opts, **{f.name: OTHER_VALUE[f.name]}), "cpu")
        assert changed != s, f"--{f.name} does not change the run's settings"
    assert run.settings(opts, "cpu") != run.settings(opts, "cuda:1")
    assert run.settings(opts, "cpu")["dtype"] == "float32" and run.settings(opts, "cuda")["dtype"] == "bfloat16"


def test_the_replay_key_holds_every_setting(circuit_specs, tiny_model_dir):
    from bench.ground.spec import load_specs

    specs = load_specs([circuit_specs])
    base = run.Options(models=(str(tiny_model_dir),))
    k = replay.key(specs, run.settings(base, "cpu"))
    assert k is not None
    for name in ("seed", "control", "dtype", "revision", "profile", "audit", "allow_pickle"):
        other = replay.key(specs, run.settings(dataclasses.replace(base, **{name: OTHER_VALUE[name]}), "cpu"))
        assert other not in (None, k), name


@pytest.fixture
def circuit_specs(specs_dir, tmp_path) -> Path:
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True)
    for name in ("induction-heads-exist.toml", "norm-folding-is-exact.toml"):
        shutil.copy(specs_dir / "circuits" / name, d / name)
    return d


def _records(tmp_path: Path) -> dict[str, dict]:
    return {p.name: json.loads((p / "record.json").read_text()) for p in (tmp_path / "runs").iterdir()}


def _new_record(tmp_path: Path, before: dict) -> dict:
    (new,) = [r for name, r in _records(tmp_path).items() if name not in before]
    return new


VOLATILE = ("run_id", "started", "ended", "record_sha256", *replay.INVOCATION_FIELDS)  # the hash covers them


def comparable(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["cells"] = [{k: v for k, v in c.items() if k not in ("timings", "cache_hit")} for c in record["cells"]]
    return out


@pytest.mark.parametrize("extra", [
    ["--control", "random-init"], ["--dtype", "bfloat16"], ["--revision", "main"], ["--seed", "3"],
    ["--profile", "full"], [],
], ids=["control", "dtype", "revision", "seed", "profile", "models"])
def test_warm_replay_writes_the_record_a_cold_run_would(cli, circuit_specs, tiny_model_dir, chdir_tmp, extra):
    base = ["verify", circuit_specs, "--models", tiny_model_dir, "--no-report"]
    assert cli(*base).exit_code == 0  # a plain run first: its entry must not serve the run with `extra`
    plain = _new_record(chdir_tmp, {})
    seen = _records(chdir_tmp)
    args = base + extra if extra else ["verify", circuit_specs, "--models", f"{tiny_model_dir}/", "--no-report"]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    cold = _new_record(chdir_tmp, seen)
    assert cold["executor"]["name"] != "replay", "a run with another option was replayed from the plain run"
    seen = _records(chdir_tmp)
    assert cli(*args).exit_code == 0
    warm = _new_record(chdir_tmp, seen)
    assert warm["executor"] == {"name": "replay", "of_run": cold["run_id"]}
    assert comparable(warm) == comparable(cold)
    if extra[:1] == ["--control"]:
        assert cold["control"] == "random-init" and len(cold["cells"]) == 2 * len(plain["cells"])
        assert any(c["model"].endswith("+random-init") for c in cold["cells"])
    if extra[:1] == ["--dtype"]:
        assert cold["dtype"] == "bfloat16" and plain["dtype"] == "float32"
