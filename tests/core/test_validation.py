"""Total validation: each input the fuzzer found breaking bench before, as a named case with the expected message."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.ground import registry, validate
from bench.ground.errors import SpecError, StoreError
from bench.ground.spec import load_spec, load_specs
from bench.spine.checks import check_spec

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "specs" / "circuits" / "induction-heads-exist.toml").read_text()


def spec_file(tmp_path: Path, text: str | bytes) -> Path:
    d = tmp_path / "circuits"
    d.mkdir(exist_ok=True)
    p = d / "induction-heads-exist.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def rejects(tmp_path, text, *needles) -> str:
    with pytest.raises(SpecError) as exc:
        check_spec(load_spec(spec_file(tmp_path, text)))
    msg = str(exc.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


@pytest.mark.parametrize("old,new,needles", [
    ("alpha = 0.05", "alpha = 2", ("verdict.alpha", "(0, 1)")),
    ("alpha = 0.05", "alpha = 0", ("(0, 1)",)),
    ("alpha = 0.05", "alpha = inf", ("finite",)),
    ("alpha = 0.05", "alpha = nan", ("finite",)),
    ("batch = 32 ", "batch = 0 ", ("data.batch", "[1, 1e+09]")),
    ("seq_len = 50 ", "seq_len = -3 ", ("data.seq_len",)),
    ("batch = 32 ", "batch = 99999999999999999999 ", ("data.batch",)),
    ("min = 0.4 ", "min = inf ", ("finite",)),
])
def test_out_of_range_values_are_refused(tmp_path, old, new, needles):
    assert old in BASE
    rejects(tmp_path, BASE.replace(old, new), *needles)


def test_confidence_95_is_refused_on_a_rule_that_takes_it(tmp_path):
    text = BASE.replace('reduce = "max_group_mean"', 'reduce = "max_group_mean"\nconfidence = 95')
    rejects(tmp_path, text, "verdict.of[0].confidence", "(0, 1)")


def test_sub_rule_name_must_be_a_string(tmp_path):
    rejects(tmp_path, BASE.replace('rule = "threshold"', "rule = 3"), "verdict.of[0].rule", "string")
    rejects(tmp_path, BASE.replace('rule = "threshold"', 'rule = ["threshold"]'), "verdict.of[0].rule")


def test_unknown_profile_gets_did_you_mean(tmp_path):
    rejects(tmp_path, BASE.replace("[profiles.smoke]", "[profiles.smok]"), "profiles.smok", "did you mean 'smoke'")


def test_override_in_the_wrong_section_is_refused(tmp_path):
    msg = rejects(tmp_path, BASE.replace("data.batch = 16", "measure.batch = 16"), "profiles.smoke.measure.batch",
                  "profiles.smoke.data.batch")
    assert ":47:" in msg  # the line of the override


def test_out_of_range_profile_override_names_the_profile(tmp_path):
    rejects(tmp_path, BASE.replace("data.batch = 16", "data.batch = 0"), "profile 'smoke'")


def test_missing_corpus_file_fails_at_validation(tmp_path):
    text = (ROOT / "specs" / "circuits" / "norm-folding-is-exact.toml").read_text()
    text = text.replace('corpus = "builtin:english"', 'corpus = "builtin:englsh"')
    d = tmp_path / "circuits"
    d.mkdir()
    (d / "norm-folding-is-exact.toml").write_text(text)
    with pytest.raises(SpecError, match="unknown builtin corpus 'englsh'") as exc:
        check_spec(load_spec(d / "norm-folding-is-exact.toml"))
    assert "data.corpus" in str(exc.value)


def test_text_corpus_file_must_exist(tmp_path):
    from bench.ground.spec import Spec, freeze
    from bench.spine.checks import _check_corpora

    spec = load_spec(spec_file(tmp_path, BASE))
    bad = Spec(**{**spec.__dict__, "data": freeze({**spec.data, "corpus": f"text:{tmp_path}/missing.txt"})})
    with pytest.raises(SpecError, match="does not exist"):
        _check_corpora(bad, "")


@pytest.mark.parametrize("depth", [25, 400, 5000])
def test_deep_nesting_is_a_clear_error(tmp_path, depth):
    for value in ("[" * depth + "]" * depth, "{a = " * depth + "1" + "}" * depth):
        rejects(tmp_path, BASE + f"\n[data.x]\ny = {value}\n", "nested")
    rejects(tmp_path, BASE + "\n" + ".".join(["k"] * depth) + " = 1\n", "nested")


def test_size_limit(tmp_path):
    rejects(tmp_path, BASE + "#" * (validate.MAX_BYTES + 1), "at most")


def test_binary_and_bad_utf8(tmp_path):
    rejects(tmp_path, BASE.encode() + b"\x00", "binary")
    rejects(tmp_path, BASE.encode() + b"\xff\xfe", "UTF-8")


def test_special_files_are_refused_without_blocking(tmp_path):
    d = tmp_path / "circuits"
    d.mkdir()
    fifo = d / "induction-heads-exist.toml"
    os.mkfifo(fifo)
    t = time.perf_counter()
    with pytest.raises(SpecError, match="FIFO"):
        load_specs([d])
    fifo.unlink()
    fifo.symlink_to("/dev/null")
    with pytest.raises(SpecError, match="character device"):
        load_specs([d])
    fifo.unlink()
    fifo.symlink_to(fifo.name)
    with pytest.raises(SpecError, match="symbolic links|symlink"):
        load_specs([d])
    fifo.unlink()
    (d / "back").symlink_to("..")
    with pytest.raises(SpecError, match="symlink loop"):
        load_specs([tmp_path])
    assert time.perf_counter() - t < 5


def test_same_folder_linked_twice_is_not_a_loop(tmp_path):
    d = tmp_path / "real" / "circuits"
    d.mkdir(parents=True)
    (d / "induction-heads-exist.toml").write_text(BASE)
    (tmp_path / "real" / "again").symlink_to(d)
    assert [s.id for s in load_specs([tmp_path / "real"])] == ["circuits.induction-heads-exist"]


def test_long_names(tmp_path):
    with pytest.raises(SpecError, match="limit is 255"):
        load_specs([tmp_path / ("x" * 300 + ".toml")])
    rejects(tmp_path, BASE.replace('"gpt2", ', '"' + "m" * 300 + '", '), "models.paper", "255")
    rejects(tmp_path, BASE.replace("[data]", "[data]\n" + "k" * 300 + " = 1"), "300 characters")


def test_line_lookup_is_linear():
    for n in (4_000, 64_000):
        text = "[measure]\n" + " " * n + "\n" + "x" * n + " =\n" + "probe = 1\n"
        t = time.perf_counter()
        assert validate.find_line(text, "measure", "probe") == 4
        assert time.perf_counter() - t < 0.5


def test_error_line_found_after_a_line_of_spaces(tmp_path):
    msg = rejects(tmp_path, BASE.replace("batch = 32 ", " " * 8000 + "\nbatch = 0 "), "data.batch")
    assert ":19:" in msg


def test_every_ranged_name_means_one_thing_across_the_registry():
    """A name in the range table is an int in some places and a float in others only where both make sense."""
    kinds: dict[str, set] = {}
    for info in [*registry.probes().values(), *registry.rules().values()]:
        for p in info.params.values():
            if p.name in registry.RANGES:
                kinds.setdefault(p.name, set()).add(p.annotation)
                if not p.required:
                    assert registry.range_problem(p.name, p.default, p.annotation) is None, (info.name, p.name)
    assert all(len(k) == 1 for k in kinds.values()), kinds


def test_annotated_aliases_carry_their_range():
    assert registry.type_problem(0.5, registry.Probability) is None
    assert registry.range_problem("x", 1.0, registry.Probability)
    assert registry.range_problem("x", 0, registry.Count)
    assert registry.range_problem("x", 3, registry.Count) is None


def test_damaged_record_is_a_store_error(tmp_path):
    from bench.ground.store import load_record

    run = tmp_path / "r"
    run.mkdir()
    for body in ('{"format": 1, "cells": 3, "run_id": "r", "status": "complete"}',
                 '{"format": 1, "cells": [{"spec": 1}], "run_id": "r", "status": "complete"}',
                 '{"format": 1, "cells": [], "run_id": "r", "status": "complete"}',
                 "[1, 2]", "\xff", "{" * 5000):
        (run / "record.json").write_text(body, errors="surrogateescape")
        with pytest.raises(StoreError):
            load_record(run)


def test_report_on_damaged_record_exits_2(cli, tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "record.json").write_text(json.dumps({"format": 1, "run_id": "r", "status": "complete", "cells": [
        {"spec": {"id": "a.b"}, "model": "m", "verdict": {"outcome": "SUPPORTED", "estimate": "high"}}],
        "device": {"type": "cpu"}}))
    r = cli("report", run, "--no-pdf", "--out", tmp_path / "out")
    assert r.exit_code == 2 and "damaged" in r.output and r.output.strip().count("\n") == 0
