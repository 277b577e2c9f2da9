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


def test_a_frame_read_twice_is_decoded_once_and_handed_out_as_a_copy(tmp_path, monkeypatch):
    """The cells of one process that share a result read its file once; each gets its own copy (a probe that
    edits its frame cannot change the next reader's), and an entry written again is read again."""
    from bench.ground import store

    cache = Cache(tmp_path)
    k = key_of({"x": "twice"})
    cache.put(k, frame(), {})
    decoded = []
    real = store.read_frame
    monkeypatch.setattr(store, "read_frame", lambda data: decoded.append(1) or real(data))
    first = cache.get(k, check)
    first.loc[0, "value"] = 99.0
    second = cache.get(k, check)
    assert decoded == [1]
    pd.testing.assert_frame_equal(second, check(frame()))
    assert second.attrs["notes"] == ["a note"]
    changed = frame().assign(value=[0.75, 0.125])
    cache.put(k, changed, {})
    pd.testing.assert_frame_equal(cache.get(k, check), check(changed))
    assert decoded == [1, 1]
    cache.drop(k)
    assert cache.get(k) is None and cache._read_bytes == 0


def test_the_frames_kept_stay_within_their_bound_oldest_out_first(tmp_path, monkeypatch):
    """At most KEPT_BYTES of frames are kept, the oldest read leaving first; a frame over a quarter of the bound is
    never kept."""
    from bench.ground import store

    cache = Cache(tmp_path)
    keys = [key_of({"x": i}) for i in range(5)]
    for k in keys:
        cache.put(k, frame(), {})
    size = int(cache.get(keys[0]).memory_usage(index=True, deep=True).sum())
    cache = Cache(tmp_path)
    monkeypatch.setattr(store, "KEPT_BYTES", 4 * size + size // 2)  # room for four
    for k in keys:
        cache.get(k)
    assert list(cache._read) == keys[1:] and cache._read_bytes == 4 * size
    monkeypatch.setattr(store, "KEPT_BYTES", 4 * size - 4)
    cache = Cache(tmp_path)
    cache.get(keys[0])
    assert not cache._read and cache._read_bytes == 0


def test_time_spent_waiting_for_an_entry_another_holds_is_counted(tmp_path):
    """`waited_s` adds the seconds a compute lock was held by someone else (a cell's timings report them as
    `wait_s`); a free lock adds next to nothing."""
    from tests.core.holding import held_elsewhere

    holder, cache = Cache(tmp_path), Cache(tmp_path)
    k = key_of({"x": "held"})
    with cache.computing(k):
        pass
    assert cache.waited_s < 0.05
    with held_elsewhere(holder, k, 0.5):
        with cache.computing(k):
            pass
    assert 0.3 <= cache.waited_s < 5
