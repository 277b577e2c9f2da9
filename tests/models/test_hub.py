"""Model options: hub ids from the local cache fingerprinted by commit, NAME@REV, one hub request at most,
short display names, --dtype and --device."""

from __future__ import annotations

import shutil
import time

import pytest
import torch

from bench import models
from bench.ground.errors import ModelError, UsageError

SHA_A = "a" * 40
SHA_B = "b" * 40


@pytest.fixture
def hub_cache(tmp_path, monkeypatch, tiny_model_dir):
    """A Hugging Face cache holding org/tiny at two commits; refs/main points at the second."""
    from huggingface_hub import constants

    root = tmp_path / "hf-cache"
    repo = root / "models--org--tiny"
    for sha in (SHA_A, SHA_B):
        shutil.copytree(tiny_model_dir, repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SHA_B)
    (repo / "refs" / "v1").write_text(SHA_A)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    return root


def test_cached_hub_id_fingerprinted_by_commit(hub_cache):
    ref = models.resolve("org/tiny")
    assert ref.kind == "hub" and ref.revision == SHA_B and ref.fingerprint() == f"hub:org/tiny@{SHA_B}"
    assert ref.display == "org/tiny"
    pinned = models.resolve(f"org/tiny@{SHA_A}")
    assert pinned.revision == SHA_A and pinned.fingerprint() != ref.fingerprint()
    assert pinned.display == "org/tiny"
    assert models.resolve("org/tiny", revision="v1").revision == SHA_A  # a tag through refs/
    m = models.load(ref, "cpu")  # from the snapshot folder: no network
    assert m.arch.n_layers == 2 and m.fingerprint == ref.fingerprint()


def test_unknown_revision_of_cached_repo_is_one_line(hub_cache):
    with pytest.raises(ModelError) as info:
        models.resolve("org/tiny@nope")
    assert "revision 'nope'" in str(info.value) and "\n" not in str(info.value)


def test_hub_asked_once_without_retries(monkeypatch):
    """An uncached id with the hub enabled: exactly one model_info call, then a one-line error."""
    from huggingface_hub import HfApi

    calls = []

    def refuse(self, repo, revision=None, timeout=None, **kw):
        calls.append((repo, revision, timeout))
        raise ConnectionError("no route to host")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(HfApi, "model_info", refuse)
    t = time.perf_counter()
    with pytest.raises(ModelError) as info:
        models.resolve("nobody/nothing")
    assert time.perf_counter() - t < 5
    assert len(calls) == 1 and calls[0][2] is not None  # one request, with a timeout
    assert "ConnectionError" in str(info.value) and "\n" not in str(info.value)


def test_uncached_hub_id_pinned_to_the_commit_the_hub_gives(monkeypatch):
    from types import SimpleNamespace

    from huggingface_hub import HfApi

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(HfApi, "model_info", lambda self, repo, revision=None, timeout=None: SimpleNamespace(sha=SHA_A))
    ref = models.resolve("org/remote@main")
    assert ref.kind == "hub" and ref.location == "org/remote" and ref.fingerprint() == f"hub:org/remote@{SHA_A}"


def test_suggestion_comes_first():
    with pytest.raises(ModelError) as info:
        models.resolve("smollm2-13m")
    assert str(info.value).startswith("did you mean 'smollm2-135m'?")


def test_display_names(tiny_model_dir, tmp_path):
    from bench.spine.run import display_names

    assert models.resolve(str(tiny_model_dir)).display == tiny_model_dir.name
    gguf = models.ModelRef("x/y/model-q4.gguf", "gguf", "/x/y/model-q4.gguf")
    assert gguf.display == "model-q4"
    other = tmp_path / "a" / tiny_model_dir.name
    shutil.copytree(tiny_model_dir, other)
    refs = {str(tiny_model_dir): models.resolve(str(tiny_model_dir)), str(other): models.resolve(str(other))}
    assert display_names(refs) == {k: k for k in refs}  # same short name twice: the names as given


def test_dtype_option(tiny_model_dir):
    ref = models.resolve(str(tiny_model_dir))
    assert models.load(ref, "cpu", dtype="bfloat16").hf.dtype == torch.bfloat16
    assert models.load(ref, "cpu").dtype == torch.float32  # auto on the CPU
    with pytest.raises(ModelError, match="unknown dtype 'float8'"):
        models.torch_dtype("float8", "cpu")


def test_device_option():
    from bench.spine.run import resolve_device

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda", "mps")
    for bad in ("tpu", "cuda:x"):
        with pytest.raises(UsageError, match="unknown device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="no CUDA device"):
            resolve_device("cuda:1")
    else:
        with pytest.raises(UsageError, match="numbered from 0"):
            resolve_device(f"cuda:{torch.cuda.device_count()}")
