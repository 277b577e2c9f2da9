"""Capture or change module inputs and outputs, named by their module path, only inside a ``with`` block.

Every hook is removed in ``finally``, also when the forward pass raises, so a model never keeps a hook past
the block that set it.  Sites are module paths as ``model.named_modules()`` gives them (``model.layers.3.mlp``).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator

import torch

from bench.ground.errors import ArchError


def _module(model: torch.nn.Module, path: str) -> torch.nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError:
        raise ArchError(f"no module at '{path}' in {type(model).__name__}") from None


def _first(x):
    """The tensor of a module's output (decoder layers may return a tuple whose first item is the tensor)."""
    return x[0] if isinstance(x, (tuple, list)) else x


def home_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go and its statistics are gathered: the device of its first parameter that is
    not offloaded (a model split by accelerate keeps offloaded weights on the meta device until they run)."""
    for p in model.parameters():
        if p.device.type != "meta":
            return p.device
    return torch.device("cpu")


def is_split(model: torch.nn.Module) -> bool:
    """True when accelerate placed the model's modules on more than one device (GPUs, CPU, disk)."""
    placed = getattr(model, "hf_device_map", None) or {}
    return len({str(d) for d in placed.values()}) > 1


def gatherer(model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """For a split or reduced-precision model: move a captured tensor to the home device in float32, so that
    the statistics see one device and full precision.  None (nothing to do) for a float32 model in one place."""
    low = any(p.dtype in (torch.float16, torch.bfloat16) for p in model.parameters())
    if not (low or is_split(model)):
        return None
    home = home_device(model)
    return lambda t: t.to(home, torch.float32) if t.is_floating_point() else t.to(home)


@contextlib.contextmanager
def capture(model: torch.nn.Module, paths: Iterable[str], *, inputs: bool = False,
            transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
            gather: bool = True) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Record the output (or, with ``inputs=True``, the first positional input) of each module per forward call.

    Yields ``{path: [tensor per call]}``; tensors are detached, gathered on the model's home device in float32
    when the model is split over devices or runs in bfloat16/float16 (see :func:`gatherer`; ``gather=False``
    keeps them where and as they are), and passed through `transform` when given (e.g. a reduction, so that
    only what is needed is kept).
    """
    store: dict[str, list[torch.Tensor]] = {p: [] for p in paths}
    handles = []
    move = gatherer(model) if gather else None
    try:
        for path in store:
            mod = _module(model, path)

            def record(t, path=path):
                t = _first(t).detach()
                if move is not None:
                    t = move(t)
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
                t = out[0] if isinstance(out, tuple) else out
                new = fn(t)
                if isinstance(new, torch.Tensor) and (new.device != t.device or new.dtype != t.dtype):
                    new = new.to(t.device, t.dtype)  # an edit computed on the home device, for a split model
                return (new, *out[1:]) if isinstance(out, tuple) else new

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
