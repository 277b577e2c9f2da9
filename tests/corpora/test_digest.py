"""A corpus's fingerprint hashes its files once per process and notices a changed file."""

import os

from bench.corpora import parallel


def test_each_file_is_read_once_and_a_changed_file_again(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_FILE_DIGESTS", {})
    a, b = tmp_path / "a.mo", tmp_path / "b.mo"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    reads = []
    real = type(a).read_bytes
    monkeypatch.setattr(type(a), "read_bytes", lambda self: reads.append(self.name) or real(self))

    first = parallel.digest_files([a, b])
    assert parallel.digest_files([b, a]) == first          # order-free, and nothing read again
    assert sorted(reads) == ["a.mo", "b.mo"]

    a.write_bytes(b"ONE")                                   # same size: the modification time tells
    os.utime(a, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns + 1_000_000))
    second = parallel.digest_files([a, b])
    assert second != first and sorted(reads) == ["a.mo", "a.mo", "b.mo"]
    b.write_bytes(b"three")                                 # a new size
    assert parallel.digest_files([a, b]) not in (first, second) and reads.count("b.mo") == 2


def test_the_digest_covers_names_and_contents(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_FILE_DIGESTS", {})
    (tmp_path / "x").write_bytes(b"same")
    (tmp_path / "y").write_bytes(b"same")
    assert parallel.digest_files([tmp_path / "x"]) != parallel.digest_files([tmp_path / "y"])
