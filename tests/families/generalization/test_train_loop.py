"""The family's training runs on tiny hand-built models: SFT raising accuracy, adapters leaving the model as it
was, the reward wiring, and the probe's caching (a warm re-run trains and generates nothing).  The
policy-gradient update itself is the engine's (tests/models/test_policy.py)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.ground import schemas
from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.families.generalization import probes, tasks, train_loop
from bench.models import decoding, policy
from bench.models import train as engine
from bench.families.generalization.train_loop import config
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def _state(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_lora_leaves_the_model_as_it_was(tiny_tokenizer):
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    ids = torch.tensor([[1, 5, 9, 20]])
    with torch.no_grad():
        ref = hf(input_ids=ids).logits
    cfg = config("sft", steps=1, batch=1, lr=1e-2)
    with train_loop.adapted(hf, cfg) as model:
        n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
        assert 0 < n_train < sum(p.numel() for p in hf.parameters())
        train_loop.train(model, tiny_tokenizer, cfg, ["Answer:"], targets=[" 7\n"], generator=torch.Generator())
    with torch.no_grad():
        assert torch.equal(hf(input_ids=ids).logits, ref)
    assert type(hf).__name__ == "LlamaForCausalLM"


def test_adapter_weights_come_from_the_seed_not_from_what_the_process_drew_before(tiny_tokenizer):
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))

    def lora_a(seed):
        torch.rand(1000)  # another probe's draws from the global generator
        with train_loop.adapted(hf, config("sft", lr=1e-2, seed=seed)) as model:
            return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n}

    first, again, other = lora_a(3), lora_a(3), lora_a(4)
    assert first and all(torch.equal(first[n], again[n]) for n in first)
    assert not all(torch.equal(first[n], other[n]) for n in first)
    state = torch.random.get_rng_state()
    with train_loop.adapted(hf, config("sft", lr=1e-2, seed=3)):
        pass
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator is left as it was


def _accuracy(model, tok, items) -> float:
    comp = decoding.decode(model, tok, [tasks.prompt(it) for it in items], 6)
    return sum(tasks.score(t, it.values, it.target) for t, it in zip(comp.texts, items)) / len(items)


def test_sft_raises_in_distribution_accuracy(tiny_tokenizer):
    # two cards, one a face card, summing to 20: under the J/Q/K = 10 rule every answer is "10+10", which a tiny
    # random model learns from a few verified solutions and then gets right on held-out hands
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    task = tasks.TaskConfig(n_cards=2, target=20, ops="+")
    train_items = tasks.generate(task, "id", 8, seed=0, need_face=True)
    held_out = tasks.generate(task, "id", 4, seed=1, need_face=True)
    cfg = config("sft", steps=60, batch=4, lr=1e-2, adapter="full")
    with train_loop.adapted(hf, cfg) as model:
        before = _accuracy(model, tiny_tokenizer, held_out)
        curve = train_loop.train(model, tiny_tokenizer, cfg, [tasks.prompt(it) for it in train_items],
                                 targets=[f" {it.solution}\n" for it in train_items], generator=torch.Generator())
        after = _accuracy(model, tiny_tokenizer, held_out)
    assert before == 0.0 and after == 1.0
    assert curve.value[-1] < 0.2 * curve.value[0]


class _Model:
    def __init__(self, hf, tok):
        self.hf, self.tokenizer, self.fingerprint = hf, tok, "tiny-test"


PARAMS = {"arms": ["sft", "rl", "base_rl"], "n_cards": 2, "target": 0, "ops": "+", "show_target": False,
          "demos": 0, "n_init": 6, "init_steps": 2, "n_train": 8, "n_eval": 6, "steps": 2, "batch": 2, "group": 2,
          "sft_batch": 2, "lr": 1e-3, "max_new_tokens": 4, "micro_batch": 8, "seeds": 2, "curve_points": 1}


def test_probe_frame_and_warm_rerun(tiny_tokenizer, tmp_path, monkeypatch):
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    ctx = ProbeContext(model=_Model(hf, tiny_tokenizer), seed=0, cache=Cache(tmp_path))
    frame = schemas.validate(probes.sft_vs_rl(ctx, **PARAMS), probes.StageScores, probes.METRICS)
    correct = frame[frame["metric"] == "correct"]
    assert set(correct["stage"]) == {"base", "initial", "sft", "rl", "base_rl"}
    # untrained stages: one row per hand and split; trained arms: one per hand, split and seed
    sizes = correct.groupby(["stage", "split"]).size()
    assert sizes[["base", "initial"]].eq(6).all() and sizes[["sft", "rl", "base_rl"]].eq(12).all()
    assert correct[correct["stage"].isin(["base", "initial"])]["seed"].isna().all()
    assert set(correct[correct["stage"] == "rl"]["seed"]) == {0, 1}
    flops = frame[frame["metric"] == "train_flops"]
    assert (flops["value"] > 0).all() and len(flops) == 1 + 3 * 2  # the initial run, then 3 arms × 2 seeds
    # equal compute: the SFT arm's FLOPs reach the RL arm's and exceed them by less than one SFT step
    f = flops.set_index(["stage", "seed"])["value"]
    steps = frame[frame["metric"] == "train_loss"].groupby(["stage", "seed"])["step"].max() + 1
    for s in (0, 1):
        assert f[("sft", s)] >= f[("rl", s)] > f[("sft", s)] * (1 - 1 / steps[("sft", s)]) - 1
    assert len(frame[(frame["metric"] == "train_reward") & (frame["stage"] == "rl")]) == 2 * 2
    gain = frame[(frame["metric"] == "rl_gain") & (frame["stage"] == "rl")].set_index(["seed", "split", "sample"])
    c = correct.set_index(["stage", "split", "sample"])
    for (seed, split, sample), row in gain.iterrows():
        rl = correct[(correct["stage"] == "rl") & (correct["seed"] == seed) & (correct["split"] == split)
                     & (correct["sample"] == sample)]["value"].item()
        assert row["value"] == rl - c.loc[("initial", split, sample), "value"]
    one = frame.set_index("metric")["value"]
    fmt = frame[frame["metric"] == "format_ok"]
    assert one["initial_format_rate"] == fmt[fmt["stage"] == "initial"]["value"].mean()
    assert one["base_format_rate"] == fmt[fmt["stage"] == "base"]["value"].mean()
    assert one["initial_ood_accuracy"] == correct[(correct["stage"] == "initial")
                                                  & (correct["split"] == "ood")]["value"].mean()
    tid = frame[frame["metric"] == "trained_id_accuracy"].set_index(["stage", "seed"])["value"]
    assert len(tid) == 6 and tid[("sft", 1)] == correct[(correct["stage"] == "sft") & (correct["seed"] == 1)
                                                         & (correct["split"] == "id")]["value"].mean()
    ck = frame[frame["metric"] == "ckpt_flops"]
    assert set(ck["step"]) >= {1, 2}  # a checkpoint half-way and the end
    from bench.families.generalization.charts import sft_vs_rl_chart

    assert sft_vs_rl_chart(frame).to_dict()["hconcat"]  # accuracy bars beside the curves

    def boom(*a, **k):
        raise AssertionError("a warm re-run must not generate or train")

    monkeypatch.setattr(decoding, "decode", boom)
    monkeypatch.setattr(probes, "train", boom)
    monkeypatch.setattr(engine, "fit", boom)
    again = schemas.validate(probes.sft_vs_rl(ctx, **PARAMS), probes.StageScores, probes.METRICS)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), frame.reset_index(drop=True), check_dtype=False)


def test_both_arms_start_from_the_same_sft_initialised_weights(tiny_tokenizer, tmp_path, monkeypatch):
    """The SFT and the RL arm (every seed) start from identical weights, those the initial stage trained and
    scored; RL from the base model starts from the base model (LoRA's B = 0)."""
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    ctx = ProbeContext(model=_Model(hf, tiny_tokenizer), seed=0, cache=Cache(tmp_path))
    starts: dict = {}
    real_fit, real_policy = engine.fit, policy.fit_policy

    def fit_spy(model, tok, examples, recipe, **k):  # the initialisation (through the cache) and the SFT arm
        starts.setdefault("sft", []).append(_state(model))
        losses = real_fit(model, tok, examples, recipe, **k)
        if recipe.steps == PARAMS["init_steps"] and "init_end" not in starts:
            starts["init_end"] = _state(model)
        return losses

    def policy_spy(model, *a, **k):
        starts.setdefault("rl", []).append(_state(model))
        return real_policy(model, *a, **k)

    monkeypatch.setattr(engine, "fit", fit_spy)
    monkeypatch.setattr(policy, "fit_policy", policy_spy)
    probes.sft_vs_rl(ctx, **{**PARAMS, "arms": ["sft", "rl"]})
    init_end = starts["init_end"]
    arm_starts = starts["sft"][1:] + starts["rl"]  # the first SFT run is the initialisation itself
    assert len(arm_starts) == 4
    for st in arm_starts:
        assert set(st) == set(init_end) and all(torch.equal(st[n], init_end[n]) for n in st)
    assert any(not torch.equal(t, 0 * t) for n, t in init_end.items() if "lora_B" in n)  # the init trained
    starts.clear()
    probes.sft_vs_rl(ctx, **{**PARAMS, "arms": ["base_rl"]})
    assert "sft" not in starts  # RL from the base model neither trains nor loads the initialisation
    assert all(torch.equal(t, 0 * t) for st in starts["rl"] for n, t in st.items() if "lora_B" in n)


def test_rl_rewards_each_sample_against_its_own_prompt(tiny_tokenizer):
    """Wiring: with a reward that returns the prompt's index, sample i of a step is scored for prompt
    idx[i // group] (the samples are laid out prompt by prompt), never another hand's."""
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    cfg = config("rl", steps=3, batch=2, group=3, lr=1e-3, max_new_tokens=2)
    prompts = [f"Cards: {k}. Answer:" for k in range(5)]
    seen = []
    real = policy.policy_update

    def capture(model, opt, comp, rewards, group, micro_batch=None):
        seen.append(rewards.tolist())
        assert list(comp.texts) and len(comp.texts) == len(rewards)
        return real(model, opt, comp, rewards, group, micro_batch)

    import unittest.mock as mock

    with train_loop.adapted(hf, cfg) as model, mock.patch.object(policy, "policy_update", capture):
        curve = train_loop.train(model, tiny_tokenizer, cfg, prompts, reward=lambda i, text: float(i),
                                 generator=torch.Generator().manual_seed(0))
    # steps take prompts (0, 1), (2, 3), (4, 0); each prompt's 3 samples get its index
    assert seen == [[0.0] * 3 + [1.0] * 3, [2.0] * 3 + [3.0] * 3, [4.0] * 3 + [0.0] * 3]
    assert curve.value == (0.5, 2.5, 2.0)


def test_converged_known_curves():
    assert train_loop.converged([4.0, 3.0, 2.0, 1.5, 1.2, 1.1, 1.05, 1.04, 1.03, 1.03])  # flat at the end
    assert not train_loop.converged([4.0, 3.6, 3.2, 2.8, 2.4, 2.0, 1.6, 1.2, 0.8, 0.4])  # still falling
    assert not train_loop.converged([1.0, 0.5])  # too short to tell
    assert train_loop.converged([0.0] * 10)
    # judged on the curve's range, not its level: a reward still climbing by 0.2 a step far from 0 is not flat
    assert not train_loop.converged([100 + 0.2 * i for i in range(10)])


def test_equal_flops_steps_known_answer(tiny_tokenizer):
    """An RL step of 2 prompts × 3 samples of 4 new tokens costs, per prompt token p and LoRA, 3·(p + 4)
    training-pass tokens at 4N and as many sampling tokens at 2N; an SFT step of one prompt p with a target t
    costs (p + t) tokens at 4N.  The step count is the fewest SFT steps reaching the RL budget."""
    prompts = ["Cards: 3, J.\nAnswer:"] * 4
    targets = [" 3+10=13\n"] * 4
    p = len(tiny_tokenizer(prompts[0])["input_ids"])
    t = len(tiny_tokenizer(targets[0], add_special_tokens=False)["input_ids"])
    rl = config("rl", steps=5, batch=2, group=3, max_new_tokens=4)
    counts = train_loop.step_tokens(tiny_tokenizer, rl, prompts)
    assert counts == [(3 * (2 * p + 2 * 4), 3 * (2 * p + 2 * 4))] * 5
    budget = sum(train_loop.flops_of(100, rl, *c) for c in counts)
    assert budget == 100 * 5 * (4 + 2) * 3 * (2 * p + 8)
    sft = config("sft", steps=1, batch=1)
    n = train_loop.steps_for_flops(tiny_tokenizer, 100, sft, prompts, targets, budget)
    per = 100 * 4 * (p + t)
    assert (n - 1) * per < budget <= n * per
    assert train_loop.steps_for_flops(tiny_tokenizer, 100, sft, prompts, targets, 3 * per) == 3  # exactly reached
