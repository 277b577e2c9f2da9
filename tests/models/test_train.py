"""The fine-tuning engine on a tiny hand-built model: facts become correct, same seed → same weights, cached,
a killed training leaves nothing half-written, and the answer-positions-only head gives the full-head loss."""

from __future__ import annotations

import pytest
import torch

from bench.models import train
from bench.models.train import Example, Recipe
from tests.conftest import build_tiny

# The subject is the last prompt token and each answer is one word token plus a newline, so that a 2-layer
# model with random attention can learn the map through its FFNs (what the engine is tested on here).
FACTS = [Example("Q: river", " paper\n"), Example("Q: lake", " train\n"), Example("Q: tree", " morning\n"),
         Example("Q: wood", " station\n")]


@pytest.fixture(scope="module")
def tok():
    from tests.conftest import _tokenizer

    return _tokenizer(700)  # enough merges for whole-word tokens


def tiny(tok, family="llama"):
    """A tiny model whose embeddings (tied to the head) are large enough for confident predictions."""
    model = build_tiny(family, vocab=len(tok))
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(25)
    return model


def greedy(model, tok, prompt: str, n: int = 2) -> str:
    ids = torch.tensor([tok(prompt)["input_ids"]])
    with torch.no_grad():
        for _ in range(n):
            nxt = model(input_ids=ids).logits[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
    return tok.decode(ids[0, -n:])


def correct(model, tok) -> int:
    return sum(greedy(model, tok, e.prompt) == e.answer for e in FACTS)


def lora_recipe(**over) -> Recipe:
    base = dict(method="lora", r=4, alpha=8.0, rslora=True, dropout=0.0, lr=3e-2, batch=4, steps=40,
                targets="ffn", schedule="constant", seed=3)
    return Recipe(**{**base, **over})


def test_target_modules_come_from_the_tree(one_thread):
    model = build_tiny("llama")
    ffn = train.target_modules(model, "ffn")
    assert ffn == [f"model.layers.{i}.mlp.{n}" for i in range(2) for n in ("gate_proj", "up_proj", "down_proj")]
    g = build_tiny("gpt2")
    assert train.target_modules(g, "ffn") == [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]


def test_head_on_answer_positions_equals_full_head_loss(one_thread, tok):
    model = tiny(tok, "gemma3")
    rows = train.encode(tok, FACTS)
    ids, att, tgt = train.collate(rows, 0, "cpu")
    with torch.no_grad():
        a = train.answer_loss(model, ids, att, tgt, True)
        b = train.answer_loss(model, ids, att, tgt, False)
        logits = model(input_ids=ids, attention_mask=att).logits  # plain transformers, soft-capping included
        ref = torch.nn.functional.cross_entropy(logits[:, :-1][tgt], ids[:, 1:][tgt])
    assert torch.allclose(a, b, atol=1e-5) and torch.allclose(a, ref, atol=1e-5)


def test_lora_learns_facts_deterministically_and_leaves_base_intact(one_thread, tok, tmp_path):
    base = tiny(tok)
    before = {n: p.clone() for n, p in base.state_dict().items()}
    assert correct(base, tok) == 0
    weights = []
    for attempt in range(2):
        root = tmp_path / f"c{attempt}"
        with train.derived(base, tok, "fp", FACTS, lora_recipe(), root=root) as t:
            assert not t.cached and len(t.losses) == 40 and t.losses[-1] < 0.05 * t.losses[0]
            assert correct(t.model, tok) == len(FACTS)
            weights.append({n: p.detach().clone() for n, p in t.model.named_parameters() if "lora_" in n})
    assert weights[0].keys() and all(torch.equal(weights[0][n], weights[1][n]) for n in weights[0])
    assert not any("lora" in n for n in base.state_dict())  # adapters removed after the block
    assert all(torch.equal(before[n], p) for n, p in base.state_dict().items())
    with train.derived(base, tok, "fp", FACTS, lora_recipe(seed=4), root=tmp_path / "c0") as t:
        other = {n: p.detach() for n, p in t.model.named_parameters() if "lora_" in n}
    assert not all(torch.equal(other[n], weights[0][n]) for n in other)


def test_full_fine_tuning_learns_facts(one_thread, tok, tmp_path):
    base = tiny(tok)
    rec = Recipe(method="full", lr=1e-2, batch=4, steps=30, schedule="constant", seed=1)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path) as t:
        assert correct(t.model, tok) == len(FACTS)
        trained = {n: p.detach().clone() for n, p in t.model.state_dict().items()}
    assert correct(base, tok) == 0  # full FT trained a copy
    calls = []
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
        assert t.cached and not calls
        assert all(torch.equal(trained[n], p) for n, p in t.model.state_dict().items())


def test_warm_rerun_trains_nothing(one_thread, tok, tmp_path):
    base = tiny(tok)
    rec = lora_recipe(steps=5)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path) as t:
        first = ({n: p.detach().clone() for n, p in t.model.named_parameters() if "lora_" in n}, t.losses)
    calls = []
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
        assert t.cached and not calls and t.losses == first[1]
        assert all(torch.equal(p, first[0][n]) for n, p in t.model.named_parameters() if "lora_" in n)
    with train.derived(base, tok, "other-model", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
        assert not t.cached and calls == [5]


class Killed(Exception):
    pass


def train_until_killed(base, tok, rec: Recipe, root, at: float) -> None:
    """Start training `base` by `rec` under `root` and kill it (an exception from the progress callback) once
    the fraction `at` of its steps is done."""
    def die(fraction, message=""):
        if fraction >= at:
            raise Killed()

    with pytest.raises(Killed):
        with train.derived(base, tok, "fp", FACTS, rec, root=root, progress=die):
            pass


def test_killed_training_leaves_no_entry_and_resumes_identically(one_thread, tok, tmp_path):
    base = tiny(tok)
    rec = lora_recipe(steps=12, checkpoint_every=4, dropout=0.1)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path / "clean") as t:
        clean = ({n: p.detach().clone() for n, p in t.model.named_parameters() if "lora_" in n}, t.losses)

    train_until_killed(base, tok, rec, tmp_path / "k", 10 / 12)
    key = train.train_key("fp", FACTS, rec)
    entry = train.entry_dir(key, tmp_path / "k")
    assert not entry.exists() and not list(entry.parent.glob(f".{key}*"))
    assert (entry.parent / f"{key}.partial" / "state.pt").is_file()  # the step-8 checkpoint
    assert not any("lora" in n for n in base.state_dict())
    steps = []
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path / "k",
                       progress=lambda f, m="": steps.append(f)) as t:
        assert not t.cached and len(steps) == 4  # resumed at step 8 of 12
        assert t.losses == pytest.approx(clean[1], abs=0) or t.losses == clean[1]
        got = {n: p.detach() for n, p in t.model.named_parameters() if "lora_" in n}
    assert all(torch.equal(got[n], clean[0][n]) for n in got)
    assert not (entry.parent / f"{key}.partial").exists()
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path / "k") as t:
        assert t.cached


def test_no_examples_is_a_clear_error(tok, tmp_path):
    with pytest.raises(train.TrainError):
        with train.derived(build_tiny("llama"), tok, "fp", [], lora_recipe(), root=tmp_path):
            pass


def test_whole_example_loss_is_the_causal_lm_loss_over_every_token(one_thread, tok):
    """``loss = "example"`` trains on every token after the first (a causal-LM trainer's labels = inputs): the
    first recorded loss equals transformers' own loss with labels = input ids, and differs from the answer-only
    loss; the default recipe's cache key is unchanged by the option."""
    model = tiny(tok)
    ex = [FACTS[0]]
    ids = torch.tensor([train.encode(tok, ex)[0][0]])
    with torch.no_grad():
        ref = model(input_ids=ids, labels=ids).loss
    whole = train.fit(train.full_copy(model), tok, ex, Recipe(method="full", steps=1, batch=1, loss="example"))
    answer = train.fit(train.full_copy(model), tok, ex, Recipe(method="full", steps=1, batch=1))
    assert whole[0] == pytest.approx(float(ref), abs=1e-5) and abs(answer[0] - whole[0]) > 1e-3
    assert "loss" not in Recipe().params() and Recipe(loss="example").params()["loss"] == "example"


def test_batch_order_shows_every_example_epochs_times():
    order = train.batch_order(20, Recipe(epochs=3, batch=8, seed=5))
    assert [len(b) for b in order] == [8, 8, 4] * 3
    assert sorted(i for b in order for i in b) == sorted(list(range(20)) * 3)


def test_cycle_order_takes_the_examples_in_order_wrapping_around():
    """``order = "cycle"``: 5 examples, 4 a step: (0 1 2 3), (4 0 1 2), (3 4 0 1); the seed plays no part, and
    the key of a shuffled recipe is the one it had before the field existed."""
    for seed in (0, 9):
        r = Recipe(order="cycle", batch=4, steps=3, seed=seed)
        assert train.batch_order(5, r) == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4, 0, 1]]
    assert "order" not in Recipe().params() and Recipe(order="cycle").params()["order"] == "cycle"


def test_after_step_is_called_after_every_step_but_the_last(one_thread, tok):
    seen = []
    with train.recipe_adapters(tiny(tok), lora_recipe(steps=3)) as wrapper:
        losses = train.fit(wrapper.get_base_model(), tok, FACTS, lora_recipe(steps=3), after_step=seen.append)
    assert seen == [1, 2] and len(losses) == 3


@pytest.mark.parametrize("family", ["llama", "gemma3", "phi", "gptj", "falcon_new", "phi3"])  # parallel, fused
def test_a_shared_prompt_prefix_runs_once_with_the_whole_rows_loss_and_gradient(one_thread, tok, family):
    model = tiny(tok, family)
    lead = "Facts about places, one per line.\n"
    rows = train.encode(tok, [train.Example(lead + e.prompt, e.answer) for e in FACTS])
    share = train.prefix_sharing(model)(rows)
    n_lead = len(tok(lead, add_special_tokens=True)["input_ids"])
    assert n_lead - 1 <= share < min(p for _, p in rows)  # the lead at least, never a position with a target
    ids, att, tgt = train.collate(rows, 0, "cpu")
    seen = []
    hook = model.get_input_embeddings().register_forward_hook(lambda m, a, out: seen.append(a[0].numel()))
    grads = []
    for s in (0, share):
        model.zero_grad()
        loss = train.answer_loss(model, ids, att, tgt, True, s)
        loss.backward()
        grads.append((float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    hook.remove()
    assert seen == [ids.numel(), share, ids.numel() - len(rows) * share]  # whole rows; the prefix once, the rests
    (a, ga), (b, gb) = grads
    assert a == pytest.approx(b, rel=1e-5) and ga.keys() == gb.keys() and ga
    for n in ga:
        torch.testing.assert_close(gb[n], ga[n], rtol=1e-4, atol=1e-6)


def test_no_shared_prefix_under_dropout_for_one_row_past_the_window_or_the_whole_example_loss(tok):
    model = tiny(tok)
    rows = train.encode(tok, [train.Example("Q: " + e.prompt, e.answer) for e in FACTS])
    assert train.prefix_sharing(model)(rows) > 0
    assert train.prefix_sharing(model)(rows[:1]) == 0
    assert train.prefix_sharing(model)([(ids, 1) for ids, _ in rows]) == 0  # loss on every token after the first
    model.config.sliding_window = max(len(ids) for ids, _ in rows) - 1  # a row outgrows the window's cache slots
    assert train.prefix_sharing(model)(rows) == 0
    model.config.sliding_window = max(len(ids) for ids, _ in rows)
    assert train.prefix_sharing(model)(rows) > 0
    model.model.layers[0].mlp.add_module("drop", torch.nn.Dropout(0.1))
    assert train.prefix_sharing(model)(rows) == 0


def test_fit_runs_a_batchs_shared_prefix_once(one_thread, tok):
    model = tiny(tok)
    examples = [train.Example("Facts about places, one per line.\n" + e.prompt, e.answer) for e in FACTS]
    rows = train.encode(tok, examples)
    seen = []
    hook = model.get_input_embeddings().register_forward_hook(lambda m, a, out: seen.append(a[0].numel()))
    with train.recipe_adapters(model, lora_recipe(steps=1, batch=len(FACTS), order="cycle")) as wrapper:
        train.fit(wrapper.get_base_model(), tok, examples, lora_recipe(steps=1, batch=len(FACTS), order="cycle"))
    hook.remove()
    share, width = train.prefix_sharing(model)(rows), max(len(ids) for ids, _ in rows)
    assert share > 0 and seen == [share, len(rows) * (width - share)]


def test_an_error_in_the_callers_block_is_the_callers_and_keeps_the_cached_entry(one_thread, tok, tmp_path):
    """An exception raised inside ``with derived(...)`` on a cached entry reaches the caller as it was, and the
    entry stays (it was taken for a damaged one: deleted, retrained, and the error lost behind "generator
    didn't stop after throw()")."""
    base = tiny(tok)
    rec = lora_recipe(steps=2)
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path):
        pass
    calls = []
    with pytest.raises(Killed):
        with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
            assert t.cached
            raise Killed()
    assert calls == [] and (train.entry_dir(train.train_key("fp", FACTS, rec), tmp_path) / "meta.json").is_file()
    with train.derived(base, tok, "fp", FACTS, rec, root=tmp_path, train_hook=calls.append) as t:
        assert t.cached and calls == []


def test_a_fine_tune_saves_its_state_on_its_way_not_at_its_end(one_thread, tok, tmp_path, monkeypatch):
    """Every `checkpoint_every` steps, but not after the last: the trained entry is stored at once, so a state
    written then would only be deleted again."""
    from bench.ground import resume

    saved, real = [], resume.Resume.save
    monkeypatch.setattr(resume.Resume, "save", lambda self, st, total=None: saved.append(st["step"]) or real(self, st, total))
    with train.derived(tiny(tok), tok, "fp", FACTS, lora_recipe(steps=12, checkpoint_every=4), root=tmp_path):
        pass
    assert saved == [4, 8]
