"""Cost models against what their probes actually push through a tiny model.

A forward pre-hook on the model's body counts the token ids of every call (prefills, decoding steps, training
passes); one on the LM head counts the rows it is applied to.  A probe is run once on a tiny Llama, and its
cost model, given the same parameters, the model's config and the same tokenizer, must predict both counts
exactly.  Decoding is held to its worst case by a hook that makes one ordinary token win every step (never a
newline, never end-of-sequence), so every answer runs to its whole budget, as the cost model counts it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from bench.ground import costs as gc
from bench.ground import registry
from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.models import arch as arch_mod
from tests.conftest import build_tiny
from tests.corpora.test_corpora_parallel import fake_locales


class Pushed:
    """Tokens into the body and rows into the head, counted by hooks; optionally one token made to win."""

    def __init__(self, hf, winner: int | None = None):
        self.tokens = 0
        self.rows = 0
        self.calls = 0
        self.decoded = 0  # calls of one token per row on a KV cache that already holds positions: decoding steps
        self.hooks = [hf.base_model.register_forward_pre_hook(self._body, with_kwargs=True),
                      hf.get_output_embeddings().register_forward_pre_hook(self._head)]
        if winner is not None:
            def force(mod, args, out):
                out = out.clone()
                out[..., winner] += 1e4
                return out
            self.hooks.append(hf.get_output_embeddings().register_forward_hook(force))

    def _body(self, mod, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls += 1
        if ids is not None:
            self.tokens += ids.numel()
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        if ids is not None and ids.shape[-1] == 1 and cache is not None and cache.get_seq_length() > 0:
            self.decoded += 1

    def _head(self, mod, args):
        x = args[0]
        self.rows += x.numel() // x.shape[-1]

    def close(self):
        for h in self.hooks:
            h.remove()


@pytest.fixture
def tiny(tmp_path, monkeypatch, tiny_tokenizer, one_thread):
    monkeypatch.setenv("BENCH_LOCALE_DIR", str(fake_locales(tmp_path / "locale")))
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    model = SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), tokenizer=tiny_tokenizer, device=torch.device("cpu"),
                            dtype=torch.float32, fingerprint="tiny-llama", name="tiny")
    return SimpleNamespace(model=model, ctx=ProbeContext(model=model, seed=0, cache=Cache(tmp_path / "cache")))


def _letter(tok) -> int:
    """An ordinary one-character token: decoding it never writes a newline or ends the sequence."""
    ids = tok("a", add_special_tokens=False)["input_ids"]
    assert len(ids) == 1 and ids[0] != tok.eos_token_id
    return ids[0]


def _check(tiny, name: str, params: dict, *, force: bool = False) -> gc.Work:
    info = registry.probe(name)
    assert not info.check(params), info.check(params)
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    predicted = gc.cost_of(info, planned, params).total()
    seen = Pushed(tiny.model.hf, _letter(tiny.model.tokenizer) if force else None)
    try:
        info.call(tiny.ctx, **params)
    finally:
        seen.close()
    assert seen.tokens > 0
    assert seen.tokens == predicted.forward + predicted.generated + predicted.backward
    assert seen.rows == predicted.head + predicted.generated + predicted.backward_head
    assert seen.decoded == predicted.decoded_calls
    return predicted


def test_induction_counts_every_repeated_sequence_once(tiny):
    w = _check(tiny, "induction", {"seq_len": 6, "batch": 5})
    assert w.forward == 5 * 12 and w.head == 5 * 12  # known answer: 5 sequences of 2 × 6 tokens


def test_icl_counts_prefixes_once_and_answers_at_their_budget(tiny):
    w = _check(tiny, "icl_demonstrations", {"tasks": ["successor"], "n_items": 4, "demos": [0, 1, 2],
                                             "max_new_tokens": 3, "batch": 5}, force=True)
    assert w.generated == 12 * 2  # 12 prompts, each step after the first one token per row


def test_token_removal_counts_shared_prefix_decoding(tiny):
    _check(tiny, "token_removal", {"n_questions": 5, "n_demos": 1, "max_new_tokens": 3, "micro_batch": 2},
           force=True)


def test_layer_pass_counts_its_micro_batches(tiny):
    _check(tiny, "nonlinearity", {"corpus": "brown:all", "n_texts": 5, "max_tokens": 24, "micro_batch": 2})


def test_language_statistics_count_their_chunks(tiny):
    _check(tiny, "activation_stats", {"corpus": "gettext:en,de,fr,ru", "eval_texts": 4, "selection_tokens": 64,
                                       "doc_tokens": 16, "methods": ["lape"]})


def test_pv_counts_the_gradient_it_keeps_for_every_ffn_weight(tiny, monkeypatch):
    """PV keeps a gradient of every FFN weight until it reads their norms (no optimizer state): the
    plan's `grads` is the number of elements that hold a gradient after a backward pass (a full-size run on
    gemma3-270m held 0.26 GiB of them that the plan did not count)."""
    held = []
    backward = torch.Tensor.backward

    def counted(self, *a, **k):
        backward(self, *a, **k)
        held.append(sum(p.numel() for p in tiny.model.hf.parameters() if p.grad is not None))

    monkeypatch.setattr(torch.Tensor, "backward", counted)
    w = _check(tiny, "activation_stats", {"corpus": "gettext:en,de,fr,ru", "eval_texts": 4, "selection_tokens": 64,
                                           "doc_tokens": 16, "methods": ["pv"]})
    assert held and max(held) == w.grads > 0
    assert gc.peak_parts(gc.Shape.from_config(tiny.model.hf.config), w, 4)["gradients"] == 4 * w.grads


def test_crosslingual_similarity_counts_its_batches(tiny):
    _check(tiny, "crosslingual_similarity", {"corpus": "gettext:en,de,fr,ru", "eval_texts": 4, "n_texts": 3,
                                              "micro_tokens": 40})


def test_sft_arm_counts_training_and_every_evaluation(tiny):
    """The SFT-initialised start, the SFT arm at the RL arm's FLOPs with one checkpoint evaluation, decoding
    held to its budget (the RL arm is left out: its update depends on the sampled rewards)."""
    _check(tiny, "sft_vs_rl", {"arms": ["sft"], "n_cards": 2, "target": 0, "ops": "+", "show_target": False,
                               "demos": 0, "n_init": 4, "init_steps": 2, "n_train": 6, "n_eval": 3, "steps": 2,
                               "batch": 2, "group": 2, "sft_batch": 2, "max_new_tokens": 3, "micro_batch": 2,
                               "seeds": 1, "curve_points": 1}, force=True)


@pytest.mark.parametrize("micro_batch", [3, 8, 50])
def test_rl_step_counts_its_sampling_and_each_micro_batch_of_its_update(tiny, micro_batch):
    """One RL step of two prompts × four samples against its cost model: sampling held to its budget, then the
    update's passes in parts of `micro_batch` answers, each part running the shared prefix again (3 parts of at
    most 3, or one).  A reward alternating within each group keeps the update from being skipped."""
    import itertools

    from bench.families.generalization import costs as gen_costs
    from bench.families.generalization import train_loop
    from bench.models import policy
    from bench.models import train as engine

    m = tiny.model
    prompts = ["Cards: 3, K. Target: 13.\nAnswer:", "Cards: 1, 2, 9. Target: 3.\nAnswer:"]
    cfg = train_loop.config("rl", steps=1, batch=2, group=4, max_new_tokens=3, lora_rank=2)
    predicted = gen_costs._decode_rl(m.tokenizer, prompts, cfg, micro_batch)
    alternate = itertools.count()
    with train_loop.adapted(m.hf, cfg) as model:
        opt, _ = engine.optimizer(model, cfg.recipe, 1)
        seen = Pushed(m.hf, _letter(m.tokenizer))
        try:
            policy.policy_step(model, m.tokenizer, opt, prompts, lambda k, text: float(next(alternate) % 2),
                               cfg.sampling, torch.Generator().manual_seed(0), micro_batch)
        finally:
            seen.close()
    assert seen.tokens == predicted.forward + predicted.generated + predicted.backward
    assert seen.rows == predicted.head + predicted.generated + predicted.backward_head
    assert seen.calls == predicted.calls
    assert seen.decoded == predicted.decoded_calls == cfg.sampling.max_new_tokens - 1


def test_a_collapsed_rl_step_counts_one_sampled_token_and_no_update(tiny):
    """The floor of an RL step (:func:`_decode_rl` with `collapsed`): when every sample is the end token at once
    and every group scores alike (an empty answer's -2 everywhere), the step samples one token and the update
    is skipped.  The hook makes the end token win; the counts must be the floor's, and far below the step's."""
    from bench.families.generalization import costs as gen_costs
    from bench.families.generalization import train_loop
    from bench.models import policy
    from bench.models import train as engine

    m = tiny.model
    prompts = ["Cards: 3, K. Target: 13.\nAnswer:", "Cards: 1, 2, 9. Target: 3.\nAnswer:"]
    cfg = train_loop.config("rl", steps=1, batch=2, group=4, max_new_tokens=5, lora_rank=2)
    floor = gen_costs._decode_rl(m.tokenizer, prompts, cfg, 3, collapsed=True)
    most = gen_costs._decode_rl(m.tokenizer, prompts, cfg, 3)
    with train_loop.adapted(m.hf, cfg) as model:
        opt, _ = engine.optimizer(model, cfg.recipe, 1)
        seen = Pushed(m.hf, m.tokenizer.eos_token_id)
        try:
            policy.policy_step(model, m.tokenizer, opt, prompts, lambda k, text: -2.0, cfg.sampling,
                               torch.Generator().manual_seed(0), 3)
        finally:
            seen.close()
    assert seen.tokens == floor.forward + floor.generated + floor.backward
    assert seen.rows == floor.head + floor.generated + floor.backward_head
    assert seen.calls == floor.calls and seen.decoded == floor.decoded_calls == 0
    assert floor.backward == floor.steps == 0 and most.backward > 0 and most.generated > 0


def test_rl_from_the_base_model_is_planned_between_its_bounds(tiny):
    """The base model's RL arm has a floor (its first step at the budget with its update, then one-token
    batches and evaluations), the SFT start's RL arm none; the plan's middle is the bounds' geometric mean."""
    info, tok = registry.probe("sft_vs_rl"), tiny.model.tokenizer
    params = {"arms": ["rl", "base_rl"], "n_cards": 2, "target": 0, "ops": "+", "show_target": False, "demos": 0,
              "n_init": 4, "init_steps": 1, "n_train": 6, "n_eval": 3, "steps": 3, "batch": 2, "group": 2,
              "sft_batch": 2, "max_new_tokens": 6, "micro_batch": 8, "seeds": 1, "curve_points": 0}
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tok, seed=0)
    cost = gc.cost_of(info, planned, params)
    assert set(cost.floors) == {"sft_vs_rl|base_rl|0"}
    most, least = dict(cost.parts)["sft_vs_rl|base_rl|0"], cost.floors["sft_vs_rl|base_rl|0"]
    assert least.steps == 1 and most.steps == 3  # the first step's update only
    first = (most.generated - 2 * 3 * 5) // 3  # less its evaluation: six held-out answers, 5 tokens after the first
    assert least.generated == first and first == 2 * 2 * 5  # 2 prompts × 2 samples × (6 - 1)
    assert cost.total(least=True).generated == cost.total().generated - most.generated + least.generated
    assert gc.middle(2.0, 8.0) == 4.0 and gc.middle(3.0, 3.0) == 3.0 and gc.middle(0.0, 5.0) == 5.0


def test_training_steps_count_forward_and_backward(tiny):
    """:func:`bench.models.costs.fit` against :func:`bench.models.train.fit` on a LoRA-adapted tiny model."""
    from bench.models import costs as mc
    from bench.models import train

    m = tiny.model
    exs = [train.Example(f"Question: what follows {n}?\nAnswer:", f" {n + 1}\n") for n in range(5)]
    recipe = train.Recipe(epochs=2, batch=2, r=2, targets="ffn", loss="answer", dropout=0.0)
    predicted = mc.fit(m.tokenizer, exs, recipe, trainable=0)
    seen = Pushed(m.hf)
    try:
        with train.recipe_adapters(m.hf, recipe) as wrapper:
            losses = train.fit(wrapper.get_base_model(), m.tokenizer, exs, recipe)
    finally:
        seen.close()
    assert len(losses) == predicted.steps == 2 * 3  # 2 epochs of ⌈5 / 2⌉ steps
    assert seen.tokens == predicted.backward
    assert seen.rows == predicted.backward_head


def test_every_probe_of_every_family_has_a_cost_model():
    from bench.ground.registry import family_packages

    packages = tuple(family_packages().values())
    ours = {n for n, p in registry.probes().items() if p.fn.__module__.startswith(packages)}
    missing = sorted(ours - set(gc.costs()))
    assert not missing, f"probes without a cost model (@cost_def): {missing}"


def test_k_composition_counts_every_product_and_every_random_number(tiny, monkeypatch):
    """The composition loops (after the shared head scores) under torch's FLOP counter, and every Gaussian number
    and permutation drawn counted by wrapping the generators: both equal the cost model's own part (its worst
    case, the top induction head in the last layer, is scripted here)."""
    import numpy as np
    import pandas as pd
    from torch.utils.flop_counter import FlopCounterMode

    from bench.families.circuits import lm
    from bench.families.circuits.lm import Repeats

    L, H = tiny.model.arch.n_layers, tiny.model.arch.n_heads
    ind = np.zeros((L, H))
    ind[L - 1, 1] = 0.9
    prev = np.full((L, H), 0.1)
    heads = pd.concat([lm.head_rows(ind[None], "induction_score"), lm.head_rows(prev[None], "prev_token_score")],
                      ignore_index=True)
    monkeypatch.setattr(Repeats, "scores", lambda self, ctx: heads)
    drawn = []

    def counted(real):
        def draw(*a, **k):
            out = real(*a, **k)
            drawn.append(out.numel())
            return out
        return draw

    for name in ("randn", "randperm"):
        monkeypatch.setattr(torch, name, counted(getattr(torch, name)))
    info = registry.probe("k_composition")
    with FlopCounterMode(display=False) as counter:
        info.call(tiny.ctx, n_baseline=7)
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    own = gc.Cost(gc.cost_of(info, planned, {"n_baseline": 7}).parts[1:]).total()
    assert own.flops == counter.get_total_flops() > 0
    assert own.drawn == sum(drawn) > 0


def test_direct_path_counts_the_corpus_it_builds_and_the_characters_it_tokenises(tiny, monkeypatch):
    """Characters handed to the tokenizer and words the corpus loader joins into text, counted by wrapping
    both, against the cost model (words are counted from the texts, not from the loader's word lists: within 5 %
    here, 2 % short; counting only the texts the probe keeps would be 20 times too few)."""
    from bench.corpora import tagged
    from bench.families.circuits import costs as cc

    cc._WORDS.clear()
    joined, chars = [], []
    real_join = tagged.detokenize
    monkeypatch.setattr(tagged, "detokenize", lambda words, classes: joined.append(len(words)) or real_join(words, classes))
    tok = tiny.model.tokenizer
    real_call = type(tok).__call__
    monkeypatch.setattr(type(tok), "__call__", lambda self, texts, *a, **k: (
        chars.append(sum(map(len, [texts] if isinstance(texts, str) else texts))), real_call(self, texts, *a, **k))[1])
    params = {"corpus": "brown_text:humor", "n_texts": 20, "n_first": 3, "top_k": 3}
    info = registry.probe("direct_path_bigrams")
    info.call(tiny.ctx, **params)
    monkeypatch.setattr(tagged, "detokenize", real_join)
    monkeypatch.setattr(type(tok), "__call__", real_call)
    cc._WORDS.clear()
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tok, seed=0)
    w = gc.cost_of(info, planned, params).total()
    assert w.chars == chars[0] > 0
    assert 0.95 * sum(joined) <= w.words <= 1.05 * sum(joined)


def test_readout_decoders_train_without_calling_the_model(tiny):
    """With ``reader = "readout"`` the decoders are an encoder and a slice of the head: the model is called only
    for the states of the training and scored texts (the shared pass and the probe's own), never per training
    step or scoring batch; the calls and tokens through the body equal the cost model's."""
    params = {"corpus": "brown:all", "n_texts": 6, "max_tokens": 16, "micro_batch": 4, "n_eval": 3, "n_train": 5,
              "prefix": 3, "reader": "readout", "hidden": 8, "steps": 20, "batch": 8}
    info = registry.probe("contextualization")
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    predicted = gc.cost_of(info, planned, params).total()
    seen = Pushed(tiny.model.hf)
    try:
        info.call(tiny.ctx, **params)
    finally:
        seen.close()
    assert seen.calls == predicted.calls > 0
    assert seen.tokens == predicted.forward
    assert predicted.calls < params["steps"]  # fewer calls than training steps: no step is a model call


@pytest.mark.parametrize("name, params", [
    ("activation_stats", {"methods": ["lape"], "split_halves": 2}),
    ("layer_distribution", {"methods": ["lape", "pv"], "split_halves": 0}),
    ("deactivation", {"full": ["lape"], "diagonal": ["rs"]}),
])
def test_language_neuron_probes_count_the_corpus_files_they_hash(tiny, monkeypatch, name, params):
    """A cell fingerprints its corpus for every split and shared-result lookup, but each file is read and hashed
    once per process; the bytes hashed from a fresh process state, counted where a file's digest is stored,
    equal the cost model's."""
    from bench.corpora import parallel

    hashed = []

    class Counting(dict):
        def __setitem__(self, key, value):
            hashed.append(key[1])  # (path, size, mtime): a file read and hashed
            super().__setitem__(key, value)

    monkeypatch.setattr(parallel, "_FILE_DIGESTS", Counting())
    params = {"corpus": "gettext:en,de,fr,ru", "eval_texts": 4, "selection_tokens": 64, "doc_tokens": 16, **params}
    info = registry.probe(name)
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    predicted = gc.cost_of(info, planned, params).total()
    parallel._FILE_DIGESTS.clear()
    hashed.clear()
    info.call(tiny.ctx, **params)
    assert predicted.hashed == sum(hashed) > 0


def test_grouped_decoding_counts_each_prefix_once_and_the_shared_batches(tiny):
    """decode_groups (the knowledge categorisations): one padded pass over the groups' prefixes, then
    micro-batches that cut across groups, each padded to its longest rest; every answer at its whole budget."""
    from bench.models import costs as mc
    from bench.models import decoding

    tok, hf = tiny.model.tokenizer, tiny.model.hf
    groups = [[f"Question: one two three\nAnswer: x\n\nQuestion: {q}\nAnswer:" for q in ("a", "b c", "d e f")],
              [f"Question: four\nAnswer: y\n\nQuestion: {q}\nAnswer:" for q in ("g", "h i")]]
    predicted = mc.decode_groups(tok, groups, 3, micro_batch=2)
    seen = Pushed(hf, _letter(tok))
    try:
        decoding.decode_groups(hf, tok, groups, 3, micro_batch=2)
    finally:
        seen.close()
    assert seen.tokens == predicted.forward + predicted.generated
    assert seen.rows == predicted.head + predicted.generated
    assert seen.decoded == predicted.decoded_calls > 0
    assert predicted.head == 2 + 5 and predicted.generated == 5 * 2  # 2 prefixes, 5 first tokens, 2 more each


def test_knowledge_plans_the_pools_first_chunk_and_notes_that_it_may_grow(tiny, monkeypatch):
    """The pool grows past its first chunk only while too few of its facts are Unknown, which the plan cannot
    know: it counts the first chunk (room to grow adds nothing), and a larger chunk adds its categorisation."""
    from bench.corpora.facts import Fact
    from bench.families.knowledge import study

    def facts(prefix, n):
        return [Fact(f"{prefix}{i}", rel, (f"{prefix.lower()}{i}",)) for rel in ("capital", "country")
                for i in range(n)]

    def split(design):  # chunks of n_pool facts, half of each relation, up to max_pool
        n = design.n_pool
        every = facts("P", design.max_pool // 2)
        halves = [[f for f in every if f.relation == rel] for rel in ("capital", "country")]
        chunks = [h[c * n // 2:(c + 1) * n // 2] for c in range(design.max_pool // n) for h in halves]
        return facts("D", 4), [chunks[i] + chunks[i + 1] for i in range(0, len(chunks), 2)]

    monkeypatch.setattr(study, "split", split)
    info = registry.probe("knowledge_shift")
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    base = dict(corpus="facts:x", n_demos=8, n_pool=8, max_pool=8, k=2, shots=2, n_train=2, n_mix=1, epochs=1,
                batch=2, conditions=["uk_only"], seeds=[1], max_new=4)

    def before_work(**change):
        cost = gc.cost_of(info, planned, {**base, **change})
        return [w for k, w in cost.parts if k and k.startswith("knowledge-before")], cost

    one, cost = before_work()
    room, _ = before_work(max_pool=32)
    bigger, _ = before_work(n_pool=16, max_pool=16)
    assert len(one) == len(room) == len(bigger) == 1
    assert room[0] == one[0] and bigger[0].generated > one[0].generated
    assert cost.notes[0] == ("the pool counted as its first chunk of 8 facts: it grows, by chunks up to max_pool = 8, "
                             "only while fewer than n_train = 2 of them are Unknown")
    # units per training run (each rule decides per run): the trained facts for reliability, the rest held out
    assert cost.units_for("reliability") == (2, "trained facts per training run") == cost.units_for("fitted")
    assert cost.units_for("negative_shift") == cost.units_for(None) == (8 - 2 - 1, "held-out facts per training run")
    assert before_work(seeds=[1, 2, 3])[1].units_for("reliability")[0] == 2


def test_grouped_decoding_counts_answers_that_stop_early_at_their_expected_lengths(tiny):
    """`lengths`: each answer at its own length (capped at the budget).  By hand for a layout, and against the
    model when every answer is a newline (decoding stops each row after one token): the same counts as pushed."""
    from bench.models import costs as mc
    from bench.models import decoding

    tok, hf = tiny.model.tokenizer, tiny.model.hf
    groups = [[f"Question: one two three\nAnswer: x\n\nQuestion: {q}\nAnswer:" for q in ("a", "b c", "d e f")],
              [f"Question: four\nAnswer: y\n\nQuestion: {q}\nAnswer:" for q in ("g", "h i")]]
    whole = mc.decode_groups(tok, groups, 3, micro_batch=2)
    short = mc.decode_groups(tok, groups, 3, micro_batch=2, lengths=[[1, 2, 9], [2, 2]])
    # budgets 1, 2, 3 (9 capped), 2, 2 in batches [1, 2], [3, 2], [2]: (0 + 1) + (2 + 1) + 1 more tokens, and the
    # calls each batch makes: its longest budget
    assert short.generated == 5 and whole.generated == 10
    assert short.head == whole.head == 2 + 5
    assert whole.calls - short.calls == (3 - 2) + (3 - 3) + (3 - 2)
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert len(newline) == 1
    predicted = mc.decode_groups(tok, groups, 3, micro_batch=2, lengths=[[1] * 3, [1] * 2])
    seen = Pushed(hf, newline[0])
    try:
        out = decoding.decode_groups(hf, tok, groups, 3, micro_batch=2)
    finally:
        seen.close()
    assert all(t.strip() == "" for g in out for t in g)
    assert seen.tokens == predicted.forward + predicted.generated
    assert seen.rows == predicted.head + predicted.generated
    assert seen.decoded == predicted.decoded_calls == 0  # each row stops after its first token


def test_knowledge_counts_each_answer_at_its_length_in_the_demonstrations_format(tiny):
    from bench.corpora.facts import Fact
    from bench.families.knowledge import costs as kc

    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    fact = Fact("France", "capital", ("Paris",))
    tok = tiny.model.tokenizer
    assert kc.answer_tokens(planned, fact) == len(tok(" Paris\n", add_special_tokens=False)["input_ids"])


def test_toy_composition_counts_every_attention_probability_its_toys_form(tiny, monkeypatch):
    """Known answer, counted in the probe's own toys: every layer of the 1- and 2-layer toy forms batch × heads ×
    T × T probabilities per step of training (T = 2·period − 1 inputs) and per evaluated sequence (T = 2·period);
    the cost model's counts equal the patterns the toys' forward passes return, run by run."""
    from bench.families.circuits import toy

    seen = {"train": 0, "eval": 0}
    forward = toy.AttnOnlyTransformer.forward

    def counting(self, ids):
        logits, patterns = forward(self, ids)
        seen["train" if self.training else "eval"] += sum(p.numel() for p in patterns)
        return logits, patterns

    monkeypatch.setattr(toy.AttnOnlyTransformer, "forward", counting)
    params = {"toy_vocab": 8, "toy_width": 8, "toy_heads": 2, "toy_period": 4, "toy_steps": 3, "toy_batch": 2,
              "toy_eval": 5, "toy_runs": 2, "seq_len": 4, "batch": 2}
    info = registry.probe("toy_composition")
    assert not info.check(params), info.check(params)
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    w = gc.cost_of(info, planned, params).total()
    info.call(tiny.ctx, **params)
    assert w.maps_trained == seen["train"] == 2 * 3 * 2 * (1 + 2) * 2 * 7 * 7  # runs·steps·batch·layers·heads·T²
    assert w.maps == seen["eval"] == 2 * 5 * (1 + 2) * 2 * 8 * 8


@pytest.mark.parametrize("name", ["activation_stats", "layer_distribution"])
def test_selecting_from_cached_statistics_counts_its_passes_with_its_split_halves(tiny, name):
    """Known answer on the tiny model (2 layers × 64 neurons, 4 languages): every language's 8 chunks of 3
    statistics read and summed (2·3·8·N·K), 14 passes per selection over the (K, N) stack and one over the N
    entropies (their argsort), and per split half
    the chunks read again, each half summed (3·4·N·K) and selected; counted in every cell (no cache holds it)."""
    from bench.families.langneurons import shared

    info = registry.probe(name)
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer, seed=0)
    n, k = 2 * 64, 4
    base = {"corpus": "gettext:en,de,fr,ru", "eval_texts": 4, "selection_tokens": 64, "doc_tokens": 16,
            "methods": ["lape"]}
    assert shared.CHUNKS == 8
    plain = gc.cost_of(info, planned, base)
    halves = gc.cost_of(info, planned, {**base, "split_halves": 2})
    chunks, select = 2 * 3 * 8 * n * k, 14 * k * n + n
    assert [w.array for key, w in plain.parts if key is None] == [chunks + select]
    assert [w.array for key, w in halves.parts if key is None] == [chunks + select + chunks
                                                                    + 2 * 2 * (3 * 4 * n * k + select)]
    two = gc.cost_of(info, planned, {**base, "methods": ["lape", "lave"]})
    assert [w.array for key, w in two.parts if key is None] == [chunks + 2 * select]


def test_norm_folding_counts_the_fresh_copy_it_folds(tiny):
    """Known answer: the bytes of the folded copy's parameters (its tied head untied into a matrix of its own) are
    the fresh memory the cost model counts, and the fold streams them three times (scaled in place, read for the
    shift)."""
    from bench.models import folding

    w = gc.cost_of(registry.probe("norm_folding"),
                   gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tiny.model.tokenizer,
                              seed=0), {"corpus": "builtin:english", "n_texts": 2, "max_tokens": 8}).total()
    folded, _ = folding.folded_copy(tiny.model.hf)
    matrices = sum(p.numel() for n, p in folded.named_parameters() if "norm" not in n)
    assert tiny.model.hf.config.tie_word_embeddings  # the untying is part of the count
    assert w.fresh == matrices * 4 and w.streamed == 3 * w.fresh


def test_held_out_answers_count_at_their_solutions_length_once_the_format_is_trained(tiny):
    """The base model's held-out answers (it rarely follows the task's format) count at their whole budget; a
    checkpoint trained on the format writes " <solution>" and the newline that stops it, and counts at that."""
    from bench.families.generalization import tasks

    info, tok = registry.probe("sft_vs_rl"), tiny.model.tokenizer
    params = {"arms": ["base_rl", "sft"], "n_cards": 2, "target": 0, "ops": "+", "show_target": False, "demos": 0,
              "n_init": 4, "init_steps": 1, "n_train": 4, "n_eval": 3, "steps": 1, "batch": 2, "group": 2,
              "sft_batch": 2, "max_new_tokens": 40, "micro_batch": 8, "seeds": 1, "curve_points": 0}
    planned = gc.Planned(shape=gc.Shape.from_config(tiny.model.hf.config), tokenizer=tok, seed=0)
    parts = dict(gc.cost_of(info, planned, params).parts)
    task = tasks.TaskConfig(2, None, "+", info.params["max_target"].default, show_target=False)
    items = [it for rule, stream in (("id", 2), ("ood", 3))
             for it in tasks.generate(task, rule, 3, 0, stream=stream, need_face=True)]
    lengths = [len(tok(f" {it.solution}\n", add_special_tokens=False)["input_ids"]) for it in items]
    assert max(lengths) < 40
    assert parts["sft_vs_rl|base"].generated == len(items) * (40 - 1)
    assert parts["sft_vs_rl|initial"].generated == sum(n - 1 for n in lengths)  # its SFT fit decodes nothing


def test_the_plan_holds_one_prefix_decoder_of_the_size_one_takes(tiny):
    """The memory the contextualization plan keeps for its decoder is what a decoder built on the tiny model holds
    beside the model (its copied blocks and its head's rows; norms aside, within 2%), once: the probe scores each
    decoder as its training ends and lets it go (tests/families/microscope: the order of events)."""
    from bench.families.microscope import costs as mcosts
    from bench.families.microscope.contextual import Decoder, DecoderConfig

    hf = tiny.model.hf
    vocab = torch.arange(hf.config.vocab_size)
    dec = Decoder(tiny.model, DecoderConfig(decoder_layers=0, lora_rank=2), vocab, start_id=0)
    aside = {id(p) for p in hf.parameters()} | {id(p) for p in dec.lora}  # the model's own, and the adapters
    held = sum(p.numel() * p.element_size() for p in dec.parameters() if id(p) not in aside)
    held += dec.head.w_head.numel() * dec.head.w_head.element_size()
    planned = mcosts.decoder_bytes(gc.Shape.from_config(hf.config), 1.0, hf.config.vocab_size, 4)
    assert abs(planned - held) <= 0.02 * held, (planned, held)
    assert mcosts.decoder_bytes(gc.Shape.from_config(hf.config), 0.5, 10, 2) < planned  # half the blocks, bf16
