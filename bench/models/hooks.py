"""Capture or change module inputs and outputs, named by their module path, only inside a ``with`` block.

Every hook is removed in ``finally``, also when the forward pass raises, so a model never keeps a hook past
the block that set it.  Sites are module paths as ``model.named_modules()`` gives them (``model.layers.3.mlp``).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator

import torch

from bench.core.errors import ArchError


def _module(model: torch.nn.Module, path: str) -> torch.nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError:
        raise ArchError(f"no module at '{path}' in {type(model).__name__}") from None


def _first(x):
    """The tensor of a module's output (decoder layers may return a tuple whose first item is the tensor)."""
    return x[0] if isinstance(x, (tuple, list)) else x


@contextlib.contextmanager
def capture(model: torch.nn.Module, paths: Iterable[str], *, inputs: bool = False,
            transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Record the output (or, with ``inputs=True``, the first positional input) of each module per forward call.

    Yields ``{path: [tensor per call]}``; tensors are detached, and passed through `transform` when given
    (e.g. a reduction, so that only what is needed is kept).
    """
    store: dict[str, list[torch.Tensor]] = {p: [] for p in paths}
    handles = []
    try:
        for path in store:
            mod = _module(model, path)

            def record(t, path=path):
                t = _first(t).detach()
                store[path].append(transform(t) if transform else t)

            if inputs:
                handles.append(mod.register_forward_pre_hook(lambda m, args, kwargs, record=record:
                                                             record(args[0] if args else next(iter(kwargs.values()))),
                                                             with_kwargs=True))
            else:
                handles.append(mod.register_forward_hook(lambda m, args, out, record=record: record(out)))
        yield store
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def intervene(model: torch.nn.Module, edits: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> Iterator[None]:
    """Replace each module's output by ``fn(output)`` (applied to the tensor; tuple outputs keep their tail)."""
    handles = []
    try:
        for path, fn in edits.items():
            mod = _module(model, path)

            def hook(m, args, out, fn=fn):
                if isinstance(out, tuple):
                    return (fn(out[0]), *out[1:])
                return fn(out)

            handles.append(mod.register_forward_hook(hook))
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def attention_implementation(model: torch.nn.Module, impl: str) -> Iterator[None]:
    """Switch the attention kernel (e.g. to "eager", which returns attention probabilities), then restore it."""
    config = getattr(model, "config", None)
    before = getattr(config, "_attn_implementation", None)
    if before == impl or not hasattr(model, "set_attn_implementation"):
        yield
        return
    model.set_attn_implementation(impl)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
