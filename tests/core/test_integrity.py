"""Tamper-evident records: every frame's sha256 and the record's own, checked where a record is read for a
report, a comparison or a regression check."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.ground import integrity
from bench.ground.integrity import TamperedError
from bench.ground.store import load_record
from tests.core.synthetic_runs import make_run

RNG = np.random.default_rng(0)


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "runs", [
        {"claim": "fam.a", "model": "m1", "values": RNG.normal(1.0, 0.5, 20)},
        {"claim": "fam.b", "model": "m1", "values": RNG.normal(0.0, 0.5, 20)},
    ])


def test_a_fresh_record_is_sealed_and_verifies(run):
    record = load_record(run, verify=True)
    assert record[integrity.RECORD_KEY] == integrity.record_digest(record)
    for cell in record["cells"]:  # the frame hash is the hash of the file's bytes
        assert cell[integrity.FRAME_KEY] == integrity.file_digest(run / cell["frame"])


def test_an_edited_outcome_is_refused_naming_the_record(run):
    path = run / "record.json"
    rec = json.loads(path.read_text())
    rec["cells"][1]["verdict"]["outcome"] = "SUPPORTED"
    path.write_text(json.dumps(rec, indent=1))
    load_record(run)  # without verify: read as before (bench diff compares edited runs on purpose)
    with pytest.raises(TamperedError, match=r"record\.json was edited after the run"):
        load_record(run, verify=True)


def test_reformatting_a_record_is_not_an_edit(run):
    path = run / "record.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4, sort_keys=True))
    load_record(run, verify=True)


def test_an_edited_frame_value_is_refused_naming_the_frame(run):
    rec = load_record(run)
    rel = rec["cells"][0]["frame"]
    f = pd.read_parquet(run / rel)
    f.loc[3, "value"] += 1e-9
    f.to_parquet(run / rel, index=False)
    with pytest.raises(TamperedError, match=rf"frame .*{rel.split('/')[-1]} was edited after the run \(fam\.a × m1\)"):
        load_record(run, verify=True)


def test_a_removed_seal_or_a_missing_frame_is_refused(run):
    path = run / "record.json"
    rec = json.loads(path.read_text())
    (run / rec["cells"][0]["frame"]).unlink()
    with pytest.raises(TamperedError, match="cannot be read"):
        load_record(run, verify=True)
    del rec[integrity.RECORD_KEY]
    path.write_text(json.dumps(rec))
    with pytest.raises(TamperedError, match="its own 'record_sha256' is missing"):
        load_record(run, verify=True)


def test_a_record_from_before_the_seal_is_read(run):
    path = run / "record.json"
    rec = json.loads(path.read_text())
    del rec[integrity.RECORD_KEY]
    for c in rec["cells"]:
        del c[integrity.FRAME_KEY]
    path.write_text(json.dumps(rec))
    assert not integrity.sealed(load_record(run, verify=True))


def test_report_and_compare_exit_2_on_a_tampered_run(run, cli, tmp_path):
    other = make_run(tmp_path / "runs", [{"claim": "fam.a", "model": "m2", "values": RNG.normal(1, 0.5, 20)},
                                         {"claim": "fam.b", "model": "m2", "values": RNG.normal(0, 0.5, 20)}])
    assert cli("compare", run, other).exit_code == 0
    rel = load_record(run)["cells"][1]["frame"]
    f = pd.read_parquet(run / rel)
    f.loc[0, "value"] = 5.0
    f.to_parquet(run / rel, index=False)
    for args in (("compare", run, other), ("report", run, "--no-pdf", "--out", tmp_path / "rep")):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert f"frame {run / rel} was edited after the run (fam.b × m1)" in r.output
