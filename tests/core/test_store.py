"""The cache never trusts a damaged entry, writes are atomic, run records stay readable after every cell."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from bench.ground.errors import StoreError, UsageError
from bench.ground.schemas import SampleMetrics, validate
from bench.ground.store import Cache, RunWriter, find_run, key_of, load_record


def frame() -> pd.DataFrame:
    f = pd.DataFrame({"sample": [0, 1], "metric": ["m", "m"], "value": [0.5, 0.25]})
    f["sample"] = f["sample"].astype("Int64")
    f.attrs["notes"] = ["a note"]
    return f


def check(f):
    return validate(f, SampleMetrics, ("m",))


def test_key_is_order_independent_and_content_sensitive():
    assert key_of({"a": 1, "b": [1, 2]}) == key_of({"b": [1, 2], "a": 1})
    assert key_of({"a": 1}) != key_of({"a": 2})


def test_round_trip_keeps_values_and_notes(tmp_path):
    cache = Cache(tmp_path)
    k = key_of({"x": 1})
    assert cache.get(k) is None
    cache.put(k, frame(), {"x": 1})
    back = cache.get(k, check)
    pd.testing.assert_frame_equal(back, check(frame()))
    assert back.attrs["notes"] == ["a note"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete-data", "garbage-meta", "bad-schema"])
def test_corrupt_entry_is_detected_dropped_and_reported(tmp_path, damage):
    warnings = []
    cache = Cache(tmp_path, warn=warnings.append)
    k = key_of({"x": damage})
    cache.put(k, frame(), {})
    data, meta = cache._paths(k)
    if damage == "truncate":
        data.write_bytes(data.read_bytes()[:20])
    elif damage == "flip":
        b = bytearray(data.read_bytes())
        b[len(b) // 2] ^= 0xFF
        data.write_bytes(bytes(b))
    elif damage == "delete-data":
        data.unlink()
    elif damage == "garbage-meta":
        meta.write_text("{not json")
    elif damage == "bad-schema":  # a well-formed entry whose content breaks the schema is not trusted either
        bad = pd.DataFrame({"sample": [0], "metric": ["m"], "value": [float("nan")]})
        cache.put(k, bad, {})
    assert cache.get(k, check) is None
    assert warnings and "corrupt" in warnings[0] and k[:12] in warnings[0]
    assert not data.exists() and not meta.exists()
    calls = []
    out = cache.memo({"x": damage}, lambda: calls.append(1) or frame())
    assert calls == [1] and len(out) == 2


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    cache = Cache(tmp_path)
    k = key_of({"y": 1})

    def boom(*a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        cache.put(k, frame(), {})
    monkeypatch.undo()
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == []
    assert cache.get(k) is None


def test_run_writer_record_is_valid_after_each_cell(tmp_path):
    w = RunWriter.create(tmp_path / "runs", {"seed": 0, "device": {"type": "cpu"}})
    rec = load_record(w.dir)
    assert rec["status"] == "running" and rec["cells"] == []
    w.add({"spec": {"id": "a.b"}, "model": "org/model name", "verdict": {"outcome": "SUPPORTED"}}, frame())
    rec = load_record(w.dir)
    assert len(rec["cells"]) == 1 and rec["cells"][0]["frame"] == "frames/a.b/org_model_name.parquet"
    assert (w.dir / rec["cells"][0]["frame"]).is_file()
    w.finish("complete")
    assert load_record(find_run(w.dir.name, tmp_path / "runs"))["status"] == "complete"


def test_unwritable_runs_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot write runs dir"):
        RunWriter.create(blocker / "runs", {})


def test_bad_records(tmp_path):
    with pytest.raises(StoreError, match="no run record"):
        find_run("missing", tmp_path)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "record.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(StoreError, match="not a bench run record"):
        load_record(tmp_path / "r")


def test_written_files_are_readable_by_others(tmp_path):
    import stat

    from bench.ground.store import _UMASK, atomic_write_bytes

    p = tmp_path / "f.json"
    atomic_write_bytes(p, b"{}")
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~_UMASK  # as open() would create it, not mkstemp's 0600
