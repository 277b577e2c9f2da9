"""Wiring of the sft_vs_rl probe: which hand each training prompt, target and reward belongs to.

The engine's training is replaced by a scripted stand-in that records what the probe hands it and, for RL,
answers every prompt with the verified solution the SFT arm was given for that same prompt.  When the probe
pairs prompts, targets and the reward's hands correctly, every such answer earns the full reward (+5); a
reward scored against another hand (the wrong index, the unshuffled list, the first hand) gives less."""

from __future__ import annotations

import pytest

from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.families.generalization import probes, tasks, train_loop
from bench.models import train as engine
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")

PARAMS = {"arms": ["sft", "rl", "base_rl"], "n_cards": 3, "target": 0, "ops": "+-", "show_target": False,
          "demos": 1, "n_init": 4, "init_steps": 1, "n_train": 6, "n_eval": 2, "steps": 3, "batch": 2, "group": 2,
          "sft_batch": 2, "lr": 1e-3, "max_new_tokens": 2, "micro_batch": 8, "seeds": 2, "curve_points": 0}


class _Model:
    def __init__(self, hf, tok):
        self.hf, self.tokenizer, self.fingerprint = hf, tok, "tiny-wiring"


def test_each_rl_sample_is_rewarded_against_the_hand_of_its_own_prompt(tiny_tokenizer, tmp_path, monkeypatch):
    calls: list[dict] = []
    solution_of: dict[str, str] = {}  # prompt → the target the SFT arm trained on for it

    def scripted_train(model, tok, cfg, prompts, *, targets=None, reward=None, generator, progress=None,
                       checkpoints=None, every=0, micro_batch=None, resume=None):
        calls.append({"method": cfg.method, "prompts": list(prompts), "targets": targets, "micro": micro_batch,
                      "saved": resume.path})
        if cfg.method == "sft":
            solution_of.update(zip(prompts, targets))
            values = [1.0] * cfg.steps
        else:  # each step's prompts (the engine's order) answered with their own verified solutions
            values = [sum(reward(i, solution_of[prompts[i]]) for i in idx) / len(idx)
                      for idx in engine.batch_order(len(prompts), cfg.recipe)]
        return train_loop.curve_of(tok, cfg, prompts, targets, values)

    monkeypatch.setattr(probes, "train", scripted_train)
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    ctx = ProbeContext(model=_Model(hf, tiny_tokenizer), seed=0, cache=Cache(tmp_path))
    frame = probes.sft_vs_rl(ctx, **PARAMS)

    sft = [c for c in calls if c["method"] == "sft"]
    rl = [c for c in calls if c["method"] == "rl"]
    assert len(sft) == 2 and len(rl) == 4  # 2 seeds of sft; 2 seeds of rl, then of base_rl
    for c in sft:
        assert len(c["prompts"]) == PARAMS["n_train"] == len(set(c["prompts"]))
        assert all(t.startswith(" ") and t.endswith("\n") for t in c["targets"])
    # each seed sees the same six hands, in its own order; RL and SFT of one seed in the same order
    assert set(sft[0]["prompts"]) == set(sft[1]["prompts"]) and sft[0]["prompts"] != sft[1]["prompts"]
    assert [c["prompts"] for c in rl] == [sft[0]["prompts"], sft[1]["prompts"]] * 2  # rl 0, 1; base_rl 0, 1
    assert {c["micro"] for c in rl} == {PARAMS["micro_batch"]}  # the RL update's parts: the spec's micro_batch
    # each arm's run saves its state apart from every other, in the run's cache
    assert len({c["saved"] for c in calls}) == 6 and all((tmp_path / "partial") in c["saved"].parents for c in calls)
    rewards = frame[frame["metric"] == "train_reward"]
    assert set(rewards["stage"]) == {"rl", "base_rl"}
    assert len(rewards) == 2 * 2 * PARAMS["steps"]
    assert rewards["value"].tolist() == [tasks.REWARD["correct"]] * len(rewards)


def test_a_solution_scored_against_another_hand_loses_the_reward():
    """The premise of the test above: on the probe's training hands (target 0 draws each hand's own target),
    a hand's solution earns +5 on that hand and less on every other one."""
    task = tasks.TaskConfig(n_cards=3, target=None, ops="+-", show_target=False)
    items = tasks.generate(task, "id", PARAMS["n_train"], seed=0, stream=1)
    grid = [[tasks.shaped_reward(f" {a.solution}\n", b) for a in items] for b in items]
    for i, row in enumerate(grid):
        assert row[i] == tasks.REWARD["correct"]
        assert max(r for j, r in enumerate(row) if j != i) < tasks.REWARD["correct"]


class _Killed(Exception):
    pass


def test_a_killed_probe_resumes_its_arms_runs_to_the_frame_of_a_run_never_stopped(tiny_tokenizer, tmp_path,
                                                                                   monkeypatch):
    """The whole probe with the engine's real training on a tiny model (its state saved after every step),
    killed in the middle of the second seed's RL run after its checkpoint evaluation, then run again on the same
    cache: the frame equals that of a run never stopped (the curves, the checkpoints' accuracies, the final
    scores), the runs finished before the kill are not trained again, and no saved state is left."""
    monkeypatch.setenv("BENCH_SAVE_EVERY", "1e-9")
    params = {**PARAMS, "steps": 4, "curve_points": 1, "arms": ["sft", "rl"]}
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))

    def run(root, progress=lambda f, m="": None):
        ctx = ProbeContext(model=_Model(hf, tiny_tokenizer), seed=0, cache=Cache(root), progress=progress)
        return probes.sft_vs_rl(ctx, **params)

    clean = run(tmp_path / "a")
    said = []

    def die(fraction, message=""):
        said.append(message)
        if message.startswith("rl: policy step 3/4") and sum(m.startswith("rl: policy step 1/") for m in said) == 2:
            raise _Killed

    with pytest.raises(_Killed):
        run(tmp_path / "b", die)
    assert list((tmp_path / "b" / "partial").rglob("*.pt"))
    again = []
    frame = run(tmp_path / "b", lambda f, m="": again.append(m))
    assert [m for m in again if "step 1/" in m] == []  # nothing trained from its first step again
    assert sum(m.startswith("rl: policy step 4/4") for m in again) == 1  # the killed run's last step
    assert frame.drop(columns="hp", errors="ignore").equals(clean.drop(columns="hp", errors="ignore"))
    assert not list((tmp_path / "b" / "partial").rglob("*.pt"))
