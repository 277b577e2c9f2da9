"""Training a bfloat16 model: float32 master weights keep updates that bfloat16 would round away, a killed
bfloat16 run resumes bit-identically, and neither a trained model nor a cached sub-result of one dtype or device
is reused by a run in another."""

from __future__ import annotations

import pandas as pd
import torch

from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.models import train
from bench.models.precision import MasterAdamW
from bench.models.train import Recipe
from tests.models.test_train import FACTS, tiny, tok, train_until_killed  # noqa: F401 (tok: the module fixture)


def _steps(opt_kind, n=50, lr=1e-5):
    w = torch.nn.Parameter(torch.tensor([0.03], dtype=torch.bfloat16))
    opt = opt_kind([w], lr=lr, weight_decay=0.0)
    for _ in range(n):
        opt.zero_grad()
        w.grad = torch.ones_like(w)      # a constant gradient: every Adam step moves the weight by lr
        opt.step()
    return w


def test_master_weights_keep_the_updates_bfloat16_rounds_away():
    start = torch.tensor([0.03], dtype=torch.bfloat16)
    assert torch.equal(_steps(torch.optim.AdamW).detach(), start)       # plain AdamW: 50 updates of 1e-5 lost
    got = _steps(MasterAdamW).detach()
    expect = (start.float() - 50 * 1e-5).to(torch.bfloat16)             # the float32 walk, rounded once
    assert torch.equal(got, expect) and not torch.equal(got, start)


def test_full_fine_tuning_of_a_bfloat16_model_moves_its_weights(one_thread, tok, tmp_path):
    base = tiny(tok).to(torch.bfloat16)
    rec = Recipe(method="full", lr=1e-5, batch=4, steps=20, schedule="constant", seed=1)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path) as t:
        moved = sum(int((p != q).sum()) for p, q in zip(t.model.parameters(), base.parameters()))
        assert all(p.dtype == torch.bfloat16 for p in t.model.parameters())
    n = sum(p.numel() for p in base.parameters())
    assert moved > 0.2 * n                   # plain bfloat16 AdamW leaves almost every weight where it was


def test_a_killed_bfloat16_run_resumes_to_the_same_weights(one_thread, tok, tmp_path):
    base = tiny(tok).to(torch.bfloat16)
    rec = Recipe(method="full", lr=1e-4, batch=4, steps=8, schedule="constant", seed=1, checkpoint_every=4)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path / "clean") as t:
        clean = [p.detach().clone() for p in t.model.parameters()]
    train_until_killed(base, tok, rec, tmp_path / "k", 6 / 8)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path / "k") as t:
        assert all(torch.equal(p, q) for p, q in zip(t.model.parameters(), clean))


def test_a_trained_model_is_not_reused_across_dtypes(one_thread, tok, tmp_path):
    base = tiny(tok)
    rec = Recipe(method="full", lr=1e-3, batch=4, steps=2, schedule="constant", seed=1)
    calls = []
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append):
        pass
    with train.derived(base.to(torch.bfloat16), tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
        assert not t.cached and calls == [2, 2]
    assert train.train_key("fp", FACTS, rec) != train.train_key("fp", FACTS, rec, dtype="bfloat16") \
        != train.train_key("fp", FACTS, rec, device="cuda")


class _Model:
    def __init__(self, dtype, device="cpu"):
        self.dtype, self.device = dtype, torch.device(device)


def test_a_memoised_sub_result_is_keyed_by_the_models_dtype_and_device(tmp_path):
    cache, calls = Cache(tmp_path), []

    def compute():
        calls.append(1)
        return pd.DataFrame({"value": [float(len(calls))]})

    parts = {"fn": "probe-part", "model": "fp"}
    f32 = ProbeContext(model=_Model(torch.float32), seed=0, cache=cache)
    assert f32.memo(parts, compute)["value"][0] == 1 and f32.memo(parts, compute)["value"][0] == 1
    b16 = ProbeContext(model=_Model(torch.bfloat16), seed=0, cache=cache)
    assert b16.memo(parts, compute)["value"][0] == 2
    gpu = ProbeContext(model=_Model(torch.float32, "meta"), seed=0, cache=cache)
    assert gpu.memo(parts, compute)["value"][0] == 3
    assert f32.where() == {"device": "cpu", "dtype": "float32"}
    bare = ProbeContext(model=None, seed=0, dtype="bfloat16")
    assert bare.where() == {"device": "cpu", "dtype": "bfloat16"}


def test_a_memoised_sub_result_and_a_trained_model_are_keyed_by_the_library_versions(tmp_path, monkeypatch):
    from bench.ground import context

    cache, calls = Cache(tmp_path), []
    ctx = ProbeContext(model=_Model(torch.float32), seed=0, cache=cache)
    compute = lambda: calls.append(1) or pd.DataFrame({"value": [float(len(calls))]})  # noqa: E731
    assert ctx.memo({"fn": "part"}, compute)["value"][0] == 1
    rec = Recipe(method="full", steps=1)
    before = train.train_key("fp", FACTS, rec)
    other = {"torch": "9.9", "transformers": "9.9"}
    monkeypatch.setattr(context, "libraries", lambda: other)
    monkeypatch.setattr(train, "libraries", lambda: other)
    assert ctx.memo({"fn": "part"}, compute)["value"][0] == 2
    assert train.train_key("fp", FACTS, rec) != before
