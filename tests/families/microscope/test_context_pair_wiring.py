"""Wiring of `context_pair`: which model's numbers are labelled base and which instruct, whichever side of the
pair the cell's model is, and an empty frame (with the reason) when the model has no counterpart.

The measurement itself is replaced by a scripted one that writes, for each model it is given, one C row whose
value is a number only that model has, so a swapped label or a model measured twice shows in the values.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import torch
import pytest

from bench.ground.context import ProbeContext
from bench.ground.errors import ModelError
from bench.families.microscope import context_probe

VALUE = {"acme-base": 1.0, "acme-chat": 2.0}
CALL: dict = {}
PAIR = {"acme-base": "acme-chat"}


@pytest.fixture
def scripted(monkeypatch):
    seen = []

    def measure(ctx, model, p, subject=None):
        assert ctx is CALL["ctx"] and p is CALL["params"]  # the cell's context and the spec's parameters
        seen.append(model.name)
        frame = pd.DataFrame({"metric": ["context_loss"], "value": [VALUE[model.name]], "subject": [subject],
                              "sample": [0], "position": [0]})
        return frame, [f"measured {model.name}"]

    monkeypatch.setattr(context_probe, "_measure", measure)
    return seen


def run(name: str, instruct_of=PAIR, available=True) -> pd.DataFrame:
    def companion(other):
        if not available:
            raise ModelError(f"'{other}' is not installed")
        return SimpleNamespace(name=other)

    ctx = ProbeContext(model=SimpleNamespace(name=name), seed=0, companions=companion)
    CALL.update(ctx=ctx, params=context_probe.PairParams(instruct_of=instruct_of))
    frame = context_probe.context_pair(ctx, CALL["params"])
    assert "train_seed" in frame.columns  # a trained-decoder frame, empty or not
    return frame


@pytest.mark.parametrize("cell", ["acme-base", "acme-chat"])
def test_each_side_is_labelled_by_the_pair_not_by_which_model_the_cell_runs(scripted, cell):
    frame = run(cell)
    got = dict(zip(frame["subject"], frame["value"]))
    assert got == {"base": 1.0, "instruct": 2.0}
    assert sorted(scripted) == ["acme-base", "acme-chat"]  # each model measured once
    assert any("base (acme-base): measured acme-base" == n for n in frame.attrs["notes"])


def test_a_model_outside_every_pair_gets_an_empty_frame_that_says_why(scripted):
    frame = run("other-model")
    assert frame.empty and scripted == []
    assert "no base/instruct counterpart of 'other-model'" in frame.attrs["notes"][0]
    assert "acme-base → acme-chat" in frame.attrs["notes"][0]


def test_a_missing_counterpart_is_reported_not_invented(scripted):
    frame = run("acme-base", available=False)
    assert frame.empty and scripted == []
    assert "the counterpart 'acme-chat' of 'acme-base' is not available" in frame.attrs["notes"][0]


def test_no_pair_at_all_is_said_in_words(scripted):
    frame = run("acme-base", instruct_of={})
    assert frame.empty and "(pairs: none)" in frame.attrs["notes"][0]
    two = run("other-model", instruct_of={"a": "b", "c": "d"})
    assert "(pairs: a → b, c → d)" in two.attrs["notes"][0]


def test_the_companion_the_run_loads_is_the_other_side_of_the_pair():
    """`_counterpart` names, for the run's loader, the model a cell needs beside its own: one name at most."""
    params = {"instruct_of": {"acme-base": "acme-chat", "zeta": "acme-base"}}
    assert context_probe._counterpart(params, "acme-base") == ["acme-chat"]  # the first pair it belongs to
    assert context_probe._counterpart(params, "acme-chat") == ["acme-base"]
    assert context_probe._counterpart(params, "zeta") == ["acme-base"]
    assert context_probe._counterpart(params, "other") == []
    assert context_probe._counterpart({}, "acme-base") == []


def test_texts_too_short_for_a_prefix_give_an_empty_pool_of_the_same_shape(loaded_tiny):
    """`build_pool` with no full-prefix token (every text shorter than the prefix) returns an empty pool whose
    states and prefixes have the shape and dtype of a full one, and an empty index with its columns."""
    items = context_probe.prepare_items(loaded_tiny.tokenizer, "brown:all", 2, 8)
    full, index = context_probe.build_pool(loaded_tiny, items, 2, 4)
    empty, none = context_probe.build_pool(loaded_tiny, items, 50, 4)
    n_layers, d = loaded_tiny.arch.n_layers, loaded_tiny.arch.d_model
    assert full.states.shape[1:] == (n_layers + 1, d) and len(full.states) == len(index) > 0
    assert empty.states.shape == (0, n_layers + 1, d) and empty.states.dtype == full.states.dtype
    assert empty.prefixes.shape == (0, 50) and empty.prefixes.dtype == torch.long
    assert none.empty and list(none.columns) == ["sample", "position", "cls"]
