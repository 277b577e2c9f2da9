"""The fresh memory a full fine-tune's cost model counts, against the buffers its training loop allocates.

A dispatch mode sees every tensor an operation returns, backward passes included.  On a tiny model, the
(vocabulary × d) tensors that a run of S + 1 steps allocates beyond a run of S steps are one step's: they must
be the step's gradients of the (vocabulary × d) parameters plus the extra buffers the cost model counts, for a
tied and an untied head, with the batch's shared prefix run as its own call (2 calls a step) and without it."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench.ground import costs as gc
from bench.models import costs as mc
from bench.models import train
from bench.models.adapters import full_copy
from bench.models.train import Example, Recipe
from tests.conftest import build_tiny


class Allocated(TorchDispatchMode):
    """Counts the tensors of the given shapes that operations return in storage none of their inputs had."""

    def __init__(self, shapes):
        super().__init__()
        self.shapes, self.n = shapes, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if (isinstance(o, torch.Tensor) and tuple(o.shape) in self.shapes
                    and o.untyped_storage().data_ptr() not in inputs):
                self.n += 1
        return out


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("loss", ["answer", "example"])
def test_full_fine_tune_counts_the_vocabulary_buffers_its_steps_allocate(tiny_tokenizer, one_thread, tied, loss):
    hf = build_tiny("gemma3", vocab=len(tiny_tokenizer), tie_word_embeddings=tied)
    V, d = hf.config.vocab_size, hf.config.hidden_size
    examples = [Example(f"Question: what is item {i}?\nAnswer:", f" thing {i}\n") for i in range(6)]

    def allocated(steps: int) -> int:
        mode = Allocated({(V, d), (d, V)})
        with mode:
            train.fit(full_copy(hf), tiny_tokenizer, examples,
                      Recipe(method="full", steps=steps, batch=2, lr=1e-3, dropout=0.0, loss=loss))
        return mode.n

    one_step = allocated(3) - allocated(2)
    shape = gc.Shape.from_config(hf.config)
    assert (shape.vocab, shape.d_model, shape.tied) == (V, d, tied)
    recipe = Recipe(method="full", steps=1, batch=2, lr=1e-3, dropout=0.0, loss=loss)
    fit = mc.fit(tiny_tokenizer, examples[:2], recipe, shape.n_params)
    assert fit.calls == (2 if loss == "answer" else 1)  # the shared prefix runs as its own call
    vd_params = 1 if tied else 2
    assert one_step == vd_params + mc.extra_embedding_buffers(fit.calls, 1, tied)
    counted = mc.full_fit_fresh(shape, fit)
    once = shape.n_params * 4 * 3  # the copy and the two moments
    assert counted.fresh - once == (shape.n_params + (one_step - vd_params) * V * d) * 4
    assert counted.full_copy
