"""The sft_vs_rl probe refuses settings that describe no runnable task, each with its own message, before it
touches a model (the context here is None)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pandas as pd
import pytest

from bench.families.generalization import probes

ARMS_MSG = "unknown arms {} (known: sft, rl, base_rl)"
SHAPE_MSG = "adapter must be 'lora' or 'full', ops a subset of '+-*/', n_cards and steps ≥ 1"
RUN_MSG = "reward must be one of ['binary', 'shaped'], seeds ≥ 1, curve_points ≥ 0"


@pytest.mark.parametrize("settings, message", [
    ({"arms": ["sft", "ppo"]}, ARMS_MSG.format("['ppo']")),
    ({"arms": []}, ARMS_MSG.format("[]")),
    ({"adapter": "qlora"}, SHAPE_MSG),
    ({"ops": "+^"}, SHAPE_MSG),
    ({"n_cards": 0}, SHAPE_MSG),
    ({"steps": 0}, SHAPE_MSG),
    ({"reward": "dense"}, RUN_MSG),
    ({"seeds": 0}, RUN_MSG),
    ({"curve_points": -1}, RUN_MSG),
])
def test_settings_without_a_runnable_task_are_refused(settings, message):
    with pytest.raises(probes.TaskSetupError, match=f"^{re.escape(message)}$"):
        probes.sft_vs_rl(None, **settings)


class _Recorder:
    """Stands in for the probe's run: keeps what the probe hands it and the stages it asks for, in order."""

    made: list = []

    def __init__(self, ctx, task, data, micro_batch, cfg, plan):
        self.args = dict(task=task, data=data, micro_batch=micro_batch, cfg=cfg, plan=plan)
        self.stages: list = []
        _Recorder.made.append(self)

    def stage(self, name, seed=None):
        self.stages.append((name, seed))
        return probes._rows("correct", name, [1.0, 0.0], split=["id", "ood"], sample=[0, 1], seed=seed)

    def notes(self, frame):
        return ["recorded"]


def _recorded(monkeypatch, **settings):
    _Recorder.made = []
    monkeypatch.setattr(probes, "_Run", _Recorder)
    frame = probes.sft_vs_rl(None, **settings)
    (run,) = _Recorder.made
    return run, frame


def _expected(values: dict) -> dict:
    """What the run must receive for the probe's parameter `values`, each in its own place."""
    v = values
    return dict(
        task=probes.tasks.TaskConfig(v["n_cards"], v["target"] or None, v["ops"], v["max_target"],
                                     show_target=v["show_target"]),
        data=dict(demos=v["demos"], demo_faces=v["demo_faces"], n_init=v["n_init"], init_faces=v["init_faces"],
                  n_train=v["n_train"], n_eval=v["n_eval"]),
        micro_batch=v["micro_batch"],
        cfg={"batch": v["batch"], "group": v["group"], "lr": v["lr"], "adapter": v["adapter"],
             "lora_rank": v["lora_rank"], "lora_alpha": 2 * v["lora_rank"], "max_new_tokens": v["max_new_tokens"],
             "temperature": v["temperature"]},
        plan=dict(init_steps=v["init_steps"], steps=v["steps"], sft_batch=v["sft_batch"], reward=v["reward"],
                  curve_points=v["curve_points"]))


def test_a_spec_that_sets_nothing_runs_with_the_defaults_the_registry_documents(monkeypatch):
    """The defaults docs/PARAMETERS.md lists (read from the signature by the registry) are the values the run is
    given, each in its place, and the stages run in the design's order: the start, then each arm's seeds."""
    from bench.ground.registry import PROBES

    defaults = {p.name: p.default for p in PROBES.get("sft_vs_rl").params.values()}
    run, frame = _recorded(monkeypatch)
    assert run.args == _expected(defaults)
    seeds = range(defaults["seeds"])
    assert run.stages == [("initial", None)] + [(a, s) for a in defaults["arms"] for s in seeds]
    assert frame.attrs["notes"] == ["recorded"]


def test_every_setting_reaches_its_own_place_in_the_run(monkeypatch):
    """Values unlike the defaults and unlike each other: a setting passed to the wrong slot, or dropped, shows."""
    values = dict(arms=["base_rl", "rl"], n_cards=3, target=0, ops="+*", max_target=50, show_target=False, demos=2,
                  demo_faces=True, n_init=11, init_steps=13, init_faces=True, n_train=17, n_eval=19, steps=23,
                  batch=5, group=6, sft_batch=7, lr=3e-4, adapter="full", lora_rank=4, max_new_tokens=29,
                  temperature=0.7, micro_batch=9, reward="binary", seeds=3, curve_points=2)
    run, _ = _recorded(monkeypatch, **values)
    assert run.args == _expected(values)
    assert run.stages == ([("base", None), ("initial", None)] + [("rl", s) for s in range(3)]
                          + [("base_rl", s) for s in range(3)])


class _Hands:
    """What _Run reads of a context: the seed, and the model's fingerprint, weights and tokenizer."""

    def __init__(self, seed):
        import torch

        self.seed = seed
        self.model = type("M", (), {"fingerprint": "fp", "hf": torch.nn.Linear(2, 3), "tokenizer": None})()


@pytest.mark.parametrize("faces", [False, True])
def test_the_runs_hand_sets_come_from_their_own_streams(faces):
    """Training hands (stream 1), the start's hands (stream 4, half with a face card when init_faces), and the
    held-out in- and out-of-distribution hands (streams 2 and 3, every hand with a face card), each the draw of
    its own stream; demonstrations follow demo_faces."""
    from bench.families.generalization import tasks

    task = tasks.TaskConfig(4, 24, "+-*/", 100)
    data = dict(demos=2, demo_faces=faces, n_init=12, init_faces=faces, n_train=16, n_eval=10)
    run = probes._Run(_Hands(3), task, data, 4, {"max_new_tokens": 8}, {})
    init_task = tasks.TaskConfig(4, 24, "+-*/", 100, face_share=0.5 if faces else 0.0)
    assert run.train_items == tasks.generate(task, "id", 16, 3, stream=1)
    assert run.init_items == tasks.generate(init_task, "id", 12, 3, stream=4)
    assert run.eval_items["id"] == tasks.generate(task, "id", 10, 3, stream=2, need_face=True)
    assert run.eval_items["ood"] == tasks.generate(task, "ood", 10, 3, stream=3, need_face=True)
    assert run.demos == {r: tasks.demo_items(task, r, 2, 3, faces=faces) for r in ("id", "ood")}
    draws = [run.train_items, run.init_items, run.eval_items["id"]]
    assert len({tuple(items) for items in draws}) == 3  # three streams, three different draws
    assert run.n_params == 2 * 3 + 3


def test_the_runs_configurations_put_each_setting_in_its_place():
    """The start is SFT of init_steps steps of sft_batch hands; RL takes `steps` steps of the run's batch; every
    configuration carries the run's recipe and seed (or the seed asked for); each training seed sees the hands in
    its own order, the one the plan counts."""
    from bench.families.generalization import tasks
    from bench.families.generalization.train_loop import config

    task = tasks.TaskConfig(4, 24, "+-*/", 100)
    data = dict(demos=1, demo_faces=False, n_init=4, init_faces=False, n_train=12, n_eval=4)
    cfg = {"batch": 5, "group": 6, "lr": 3e-4, "adapter": "lora", "lora_rank": 4, "lora_alpha": 8,
           "max_new_tokens": 9, "temperature": 0.7}
    plan = dict(init_steps=13, steps=23, sft_batch=7, reward="shaped", curve_points=0)
    run = probes._Run(_Hands(3), task, data, 4, cfg, plan)
    assert run.init_cfg() == config("sft", steps=13, **{**cfg, "batch": 7}, seed=3)
    assert run.rl_cfg() == config("rl", steps=23, **cfg, seed=3)
    assert run._cfg("sft", 2, seed=11) == config("sft", steps=2, **cfg, seed=11)
    orders = [run.order(s) for s in range(3)]
    assert all(sorted(map(id, o)) == sorted(map(id, run.train_items)) for o in orders)
    assert len({tuple(map(id, o)) for o in orders}) == 3
    assert orders[1] == tasks.training_order(run.train_items, 3, 1)
    assert run.prompts(run.eval_items["ood"][:2]) == [tasks.prompt(it, run.demos["ood"])
                                                      for it in run.eval_items["ood"][:2]]


@pytest.mark.parametrize("shown", [True, False])
def test_the_runs_evaluation_scores_each_answer_against_its_own_hand(monkeypatch, shown):
    """Scripted answers: the hand's own solution, nonsense, or the solution's expression alone, in turn, each
    split's items in order; the rows carry the split, the position and the training seed, and the progress
    names the stage.  With the target hidden, the answer must state its value ("= N"): the bare expression fails."""
    from types import SimpleNamespace

    from bench.families.generalization import tasks

    task = tasks.TaskConfig(4, 0, "+-*/", 30, show_target=shown)
    data = dict(demos=1, demo_faces=False, n_init=4, init_faces=False, n_train=4, n_eval=6)
    ctx = _Hands(3)
    said = []
    ctx.progress = lambda f, m="": said.append((f, m))
    run = probes._Run(ctx, task, data, 5, {"max_new_tokens": 9}, {})
    by_prompt = {}
    for split, items in run.eval_items.items():
        for i, (p, it) in enumerate(zip(run.prompts(items), items)):
            by_prompt[p] = (f" {it.solution}\n" if i % 3 == 0 else " no idea\n" if i % 3 == 1 else
                            f" {it.solution.split('=')[0].strip()}\n")  # the expression alone: no stated value
    asked = []

    def decode(model, tok, prompts, max_new, micro_batch):
        asked.append((model, max_new, micro_batch))
        return SimpleNamespace(texts=[by_prompt[p] for p in prompts])

    monkeypatch.setattr(probes.decoding, "decode", decode)
    frame = run.evaluate("the model", "sft", seed=2)
    assert asked == [("the model", 9, 5)] * 2
    assert said == [(0.0, "sft: answering 6 id items"), (0.0, "sft: answering 6 ood items")]
    for split in ("id", "ood"):
        bare = 1.0 if shown else 0.0  # a hidden hand's answer must state its value
        for metric, want in (("correct", [1.0, 0.0, bare] * 2), ("format_ok", [1.0, 0.0, bare] * 2)):
            rows = frame[(frame.metric == metric) & (frame.split == split)]
            assert rows["sample"].tolist() == list(range(6)) and rows["value"].tolist() == want, (split, metric)
            assert rows["seed"].tolist() == [2] * 6 and (rows["stage"] == "sft").all()


def test_the_sft_arm_takes_the_fewest_steps_of_sft_batch_hands_that_reach_the_rl_arms_flops(tiny_tokenizer):
    """Equal compute: the SFT arm's steps (each of sft_batch hands, in the seed's order) just reach the FLOPs the
    RL arm spends on the same seed; one step fewer would not."""
    from bench.families.generalization.train_loop import flops_of, step_tokens

    _, run = _keyed_run(tiny_tokenizer, n_train=10, init_steps=1, steps=4, curve_points=0)
    sft = run.sft_cfg(1)
    assert sft.recipe.batch == 3 and sft.method == "sft"
    items = run.order(1)
    prompts = run.prompts(items)
    budget = sum(flops_of(run.n_params, run.rl_cfg(), *t) for t in step_tokens(tiny_tokenizer, run.rl_cfg(), prompts))
    per = step_tokens(tiny_tokenizer, sft.with_steps(len(prompts)), prompts, run.targets(items))
    spent = [flops_of(run.n_params, sft, *per[s % len(per)]) for s in range(sft.recipe.steps)]
    assert sum(spent) >= budget > sum(spent[:-1])


def _keyed_run(tiny_tokenizer, n_train: int = 6, **plan):
    """A run of 4-card hands on the tiny tokenizer (seed 3); `plan` overrides init_steps 2, steps 3, sft_batch 3,
    the shaped reward and 5 curve points."""
    from bench.families.generalization import tasks

    task = tasks.TaskConfig(4, 24, "+-*/", 100)
    data = dict(demos=0, demo_faces=False, n_init=4, init_faces=False, n_train=n_train, n_eval=2)
    ctx = _Hands(3)
    ctx.model.tokenizer = tiny_tokenizer
    cfg = {"batch": 2, "group": 3, "lr": 1e-4, "adapter": "lora", "lora_rank": 4, "lora_alpha": 8,
           "max_new_tokens": 6, "temperature": 1.0}
    plan = {"init_steps": 2, "steps": 3, "sft_batch": 3, "reward": "shaped", "curve_points": 5, **plan}
    return ctx, probes._Run(ctx, task, data, 4, cfg, plan)


def test_each_stage_is_cached_under_everything_it_depends_on(tiny_tokenizer):
    """A stage's cache key holds what its numbers depend on, and nothing it does not: the base model none of the
    training; the SFT start its own recipe and hands; each arm its own recipe (SFT's or RL's, with its seed), the
    start it grew from, the reward and the curve's points; the RL arm from the base model no start.  A key that
    missed one would hand back a stage trained otherwise."""
    ctx, run = _keyed_run(tiny_tokenizer)
    keys, saves, events = [], [], []

    class Saved:  # where an arm's run saves its state: asked for under the stage's key, cleared once stored
        def __init__(self, parts, label=""):
            self.parts, self.label = parts, label
            saves.append(self)

        def clear(self):
            events.append(("cleared", self.parts["stage"]))

    ctx.resume = Saved
    ctx.memo = lambda parts, compute: keys.append(parts) or compute()
    run._compute = lambda name, seed, resume=None: events.append(("computed", name, resume)) or (name, seed)
    asked = [("base", None), ("initial", None), ("sft", 1), ("rl", 1), ("base_rl", 2)]
    assert [run.stage(name, seed) for name, seed in asked] == asked
    assert [s.parts for s in saves] == keys[2:]  # the three arms' runs, none for the base model or the start
    assert [s.label for s in saves] == [f"generalization: the {n} arm's run, seed {k}" for n, k in asked[2:]]
    assert events == [("computed", "base", None), ("computed", "initial", None)] + [
        e for s in saves for e in (("computed", s.parts["stage"], s), ("cleared", s.parts["stage"]))]
    start = {"init": run.init_cfg().describe(), "n_init_items": 4}
    arm = {"reward": "shaped", "curve_points": 5}
    hps = [{}, start, {**start, "train": run.sft_cfg(1).describe(), **arm},
           {**start, "train": run.rl_cfg().describe(), **arm}, {"train": run.rl_cfg().describe(), **arm}]
    assert keys == [{**run.base, "stage": name, "run_seed": seed, "hp": hp} for (name, seed), hp in zip(asked, hps)]
    assert run.sft_cfg(1).describe() != run.rl_cfg().describe() != run.init_cfg().describe()


def test_a_training_curves_rows_carry_its_stage_and_seed(tiny_tokenizer):
    """The curve's values by step, the run's FLOPs and whether the curve flattened, each row with the stage and
    the training seed (the rules pair runs by seed); an SFT curve is a loss, an RL curve a reward."""
    from bench.families.generalization.train_loop import Curve, converged, train_flops

    _, run = _keyed_run(tiny_tokenizer)
    curve = Curve((0, 1, 2, 3, 4), (2.0, 1.0, 0.5, 0.5, 0.5), 100, 40)
    for cfg, metric in ((run.sft_cfg(2), "train_loss"), (run.rl_cfg(), "train_reward")):
        rows = run._curve_rows("arm", 2, cfg, curve)
        assert rows["metric"].tolist() == [metric] * 5 + ["train_flops", "converged"]
        assert rows["value"].tolist() == [2.0, 1.0, 0.5, 0.5, 0.5, train_flops(run.n_params, cfg, curve),
                                          float(converged(curve.value))]
        assert rows["step"].tolist()[:5] == [0, 1, 2, 3, 4] and rows["step"].isna().tolist()[5:] == [True, True]
        assert (rows["stage"] == "arm").all() and rows["seed"].tolist() == [2] * 7


def test_the_start_names_itself_in_the_progress(tiny_tokenizer, monkeypatch):
    """The SFT start trains under the name "initial": the progress it reports says so."""
    import contextlib
    from types import SimpleNamespace

    import pandas as pd

    ctx, run = _keyed_run(tiny_tokenizer)
    said = []
    ctx.progress = lambda f, m="": said.append(m)
    ctx.cache = None

    @contextlib.contextmanager
    def derived(hf, tok, fingerprint, examples, recipe, *, root, progress):
        progress(0.5, "training")
        yield SimpleNamespace(model="trained", losses=[1.0, 0.5])

    monkeypatch.setattr(probes.engine, "derived", derived)
    monkeypatch.setattr(run, "evaluate", lambda model, name, seed=None: pd.DataFrame())
    run._compute("initial", None)
    assert said == ["initial: training"]


def test_a_checkpoints_rows_are_its_accuracy_per_split_and_the_flops_spent_to_reach_it(tiny_tokenizer):
    """At a checkpoint after `step` steps: the share of correct answers in each split (format_ok rows are not
    accuracy), and the FLOPs of the first `step` steps of this seed's hands, each row with its step and seed."""
    import pandas as pd

    from bench.families.generalization.train_loop import flops_of, step_tokens

    _, run = _keyed_run(tiny_tokenizer)
    scored = pd.DataFrame({"metric": ["correct"] * 4 + ["format_ok"] * 4, "split": ["id", "id", "ood", "ood"] * 2,
                           "value": [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]})
    cfg = run.sft_cfg(1)
    rows = run._ckpt_rows("sft", 1, cfg, 2, scored)
    acc = rows[rows.metric == "ckpt_accuracy"]
    assert acc["split"].tolist() == ["id", "ood"] and acc["value"].tolist() == [0.5, 0.0]
    items = run.order(1)
    per = step_tokens(tiny_tokenizer, cfg, run.prompts(items), run.targets(items))
    flops = rows[rows.metric == "ckpt_flops"]["value"].tolist()
    assert flops == [sum(flops_of(run.n_params, cfg, *t) for t in per[:2])]
    assert rows["step"].tolist() == [2, 2, 2] and rows["seed"].tolist() == [1, 1, 1] and (rows.stage == "sft").all()


@pytest.mark.parametrize("arm", ["sft", "rl", "base_rl"])
def test_an_arms_training_gets_its_hands_progress_checkpoints_and_generator(tiny_tokenizer, monkeypatch, arm):
    """What _fit hands the training loop: the prompts of the hands in the order given (SFT: with their solutions
    as targets), a checkpoint every steps // (curve_points + 1) steps that scores the model under training, the
    progress named after the arm, and the arm's own generator stream."""
    from bench.families.generalization import tasks

    ctx, run = _keyed_run(tiny_tokenizer)
    said, streams, got = [], [], {}
    ctx.progress = lambda f, m="": said.append((f, m))
    ctx.generator = lambda stream: streams.append(stream) or f"gen{stream}"

    def train(model, tok, cfg, prompts, *, generator, progress, checkpoints, every, targets=None, reward=None,
              micro_batch=None, resume=None):
        got.update(model=model, cfg=cfg, prompts=prompts, generator=generator, every=every, targets=targets,
                   reward=reward, micro_batch=micro_batch, resume=resume)
        if resume is not None:  # as a restored state does: its carry replaces the entries in place
            resume.carry.clear()
            resume.carry.update(ckpts=["of the steps before the save"])
        progress(0.25, "step 1")
        progress(0.5)
        checkpoints(3)
        return "curve"

    monkeypatch.setattr(probes, "train", train)
    monkeypatch.setattr(run, "evaluate", lambda model, name, seed=None: ("scored", model, name, seed))
    monkeypatch.setattr(run, "_ckpt_rows", lambda *a: a)
    items = run.order(2)
    cfg = run.sft_cfg(2) if arm == "sft" else run.rl_cfg()
    assert run._fit("the model", cfg, arm, items, 2) == "curve"
    assert got["prompts"] == run.prompts(items) and got["model"] == "the model" and got["cfg"] is cfg
    assert got["every"] == cfg.steps // 6 and isinstance(got["every"], int)  # curve_points = 5
    assert got["micro_batch"] == (run.micro if arm != "sft" else None)  # the RL update's parts
    assert said == [(0.25, f"{arm}: step 1"), (0.5, f"{arm}: ")]
    assert run._ckpts == [(arm, 2, cfg, 3, ("scored", "the model", arm, 2))]
    stream = 20 + 100 * 2 + (arm == "base_rl")  # the RL arm from the base model draws apart from the other RL arm
    assert streams == [stream] and got["generator"] == f"gen{stream}"
    streams.clear()
    run._fit("the model", cfg, arm, items, 0)  # seed 0 is a seed like any other
    assert streams == [20 + (arm == "base_rl")] and got["resume"] is None
    saved = SimpleNamespace(carry={})
    run._fit("the model", cfg, arm, items, 2, saved)  # a resumed run: the saved checkpoints, then its own
    assert got["resume"] is saved
    assert run._ckpts == ["of the steps before the save", (arm, 2, cfg, 3, ("scored", "the model", arm, 2))]
    assert saved.carry["ckpts"] == run._ckpts  # saved with the state from then on
    if arm == "sft":
        assert got["targets"] == run.targets(items) and got["reward"] is None
    else:
        assert got["targets"] is None
        right = tasks.REWARDS["shaped"](" " + items[1].solution, items[1])
        assert got["reward"](1, " " + items[1].solution) == right


def test_the_notes_state_accuracy_format_steps_units_and_flops_per_stage(tiny_tokenizer):
    """Known answer: the notes' accuracy and format lines (means per stage and split, correct and format_ok kept
    apart), the steps each stage trained (its last curve step + 1), the seeds per arm and the FLOPs per stage."""
    import pandas as pd

    _, run = _keyed_run(tiny_tokenizer)

    def rows(metric, stage, split, values, seed=None, step=None):
        return pd.DataFrame({"metric": metric, "stage": stage, "split": split, "value": values, "seed": seed,
                             "step": step if step is not None else [None] * len(values)})

    frame = pd.concat([rows("correct", "sft", "id", [1.0, 0.0], seed=0), rows("correct", "sft", "ood", [0.0, 0.0], seed=1),
                       rows("format_ok", "sft", "id", [1.0, 1.0], seed=0),
                       rows("format_ok", "sft", "ood", [1.0, 0.0], seed=1),
                       rows("correct", "rl", "id", [1.0, 1.0], seed=0),
                       rows("train_loss", "sft", None, [2.0, 1.0, 0.5], seed=0, step=[0, 1, 2]),
                       rows("train_reward", "rl", None, [0.1, 0.2], seed=0, step=[0, 1]),
                       rows("train_flops", "sft", None, [1e9, 3e9], seed=0),
                       rows("train_flops", "rl", None, [2e9], seed=0)], ignore_index=True)
    notes = run.notes(frame)
    assert notes[0].startswith("task: 4 cards, ops +-*/, target 24; 4 hands for the SFT-initialised checkpoint, "
                               "6 other training hands (J/Q/K = 10), 2 held-out hands per split")
    assert notes[1].startswith("training: batch 2, group 3, lr 0.0001, ") and "curve_points 5" in notes[1]
    assert notes[1].endswith("; SFT and RL start from the same SFT-initialised weights, see the same hands in each "
                             "seed's order and are compared at equal estimated training FLOPs")
    import dataclasses

    for task, words in ((dataclasses.replace(run.task, show_target=False), "hidden (the answer states its value)"),
                        (dataclasses.replace(run.task, target=0), "drawn")):
        run.task = task
        assert run.notes(frame)[0].startswith(f"task: 4 cards, ops +-*/, target {words}; 4 hands")
    assert notes[2:] == ["steps per run: rl 2, sft 3",
                         "units: 2 training seeds per arm × 2 held-out hands per split (the same hands for every "
                         "seed and stage)",
                         "accuracy: rl/id 1.000; sft/id 0.500; sft/ood 0.000",
                         "format followed: sft/id 1.000; sft/ood 0.500",
                         "training FLOPs (estimate, mean over seeds) rl: 2e+09",
                         "training FLOPs (estimate, mean over seeds) sft: 2e+09"]


def test_the_bounds_themselves_are_accepted(monkeypatch):
    """One card, one step, one seed and no curve points describe a runnable task."""
    run, _ = _recorded(monkeypatch, n_cards=1, steps=1, seeds=1, curve_points=0)
    assert (run.args["task"].n_cards, run.args["plan"]["steps"], run.args["plan"]["curve_points"]) == (1, 1, 0)
    assert run.stages == [("initial", None), ("sft", 0), ("rl", 0)]


class _Scored(_Recorder):
    """A run whose stages score numbers that name the stage, the seed and the item."""

    START = {"base": [0.0, 1.0, 2.0, 3.0], "initial": [10.0, 20.0, 30.0, 40.0]}

    def stage(self, name, seed=None):
        self.stages.append((name, seed))
        k = {"sft": 1, "rl": 2, "base_rl": 3}.get(name)
        values = self.START[name] if k is None else [100.0 * k + 10 * seed + i for i in range(4)]
        return probes._rows("correct", name, values, split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1],
                            seed=seed)


@pytest.mark.parametrize("arms, stages", [
    (["sft", "rl", "base_rl"], ["base", "initial", "sft", "rl", "base_rl"]),
    (["sft"], ["initial", "sft"]),
    (["rl"], ["initial", "rl"]),
    (["base_rl"], ["base", "base_rl"]),
])
def test_each_rl_arm_gains_against_its_own_start_and_only_the_arms_asked_run(monkeypatch, arms, stages):
    _Recorder.made = []
    monkeypatch.setattr(probes, "_Run", _Scored)
    frame = probes.sft_vs_rl(None, arms=arms, seeds=2)
    (run,) = _Recorder.made
    assert [name for name, _ in run.stages] == [s for s in stages for _ in ((0, 1) if s in probes.ARMS else (0,))]
    assert frame.index.equals(pd.RangeIndex(len(frame)))
    gain = frame[frame["metric"] == "rl_gain"]
    starts = {"rl": "initial", "base_rl": "base"}
    assert sorted(set(gain["stage"])) == sorted(a for a in arms if a in starts)
    for arm in set(gain["stage"]):
        for seed in (0, 1):
            got = gain[(gain["stage"] == arm) & (gain["seed"] == seed)]
            assert got["split"].tolist() == ["id", "id", "ood", "ood"] and got["sample"].tolist() == [0, 1, 0, 1]
            after = [100.0 * (2 if arm == "rl" else 3) + 10 * seed + i for i in range(4)]
            assert got["value"].tolist() == [a - b for a, b in zip(after, _Scored.START[starts[arm]])]
