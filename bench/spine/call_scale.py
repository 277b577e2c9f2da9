"""How long a model call's per-layer overhead is on an architecture, relative to the Llama layer the calibration
times (:mod:`bench.spine.calibrate`): measured once per architecture and machine, and cached.

A model call's fixed cost is interpreter work: each layer's modules, norms, rotary embeddings and masks, paid
whatever the width.  Architectures differ in it.  A Gemma 3 layer has four norms and normalises its queries and
keys, and the model builds a sliding-window mask beside the causal one; one-token calls of gemma3-270m took about
1.8 times the per-layer overhead that the Llama-shaped calibration gives, and its decoding cells were planned
half as long as they ran.  So two models of the same tiny width and of the config's own layer count (at most
:data:`MAX_LAYERS`), one of the config's class and one Llama, are timed on one-token calls, in turns; their
ratio is the architecture's :attr:`bench.ground.costs.Shape.call_scale`.  A Llama config is 1 by definition and
is not timed; a config whose class cannot be built small is planned at 1.
"""

from __future__ import annotations

import copy
import json
import os
import time

from bench.ground.store import atomic_write_json, cache_root
from bench.spine.calibrate import NARROW as TINY, machine_key
MAX_LAYERS = 48  # beyond this the ratio no longer changes with depth, and the timing grows
REFERENCE = "llama"
ROUNDS, CALLS = 5, 10


def _text(config):
    """The text part of `config` (a multimodal config's language model), or `config` itself."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _depth(config) -> int:
    """The layers the tiny models are built with: the config's own, at most :data:`MAX_LAYERS`."""
    return max(1, min(MAX_LAYERS, int(getattr(_text(config), "num_hidden_layers", 1) or 1)))


def small_config(config, n_layers: int):
    """A copy of `config` (its text part) at the tiny width :data:`TINY`, with `n_layers` layers; the same class,
    so the same modules run.  Key/value heads keep their sharing (one when the config has one, all four when it
    has as many as query heads, else two); a per-layer list of attention kinds keeps its pattern; a padding id
    beyond the tiny vocabulary is dropped (an embedding cannot pad with a row it lacks)."""
    cfg = copy.deepcopy(_text(config))
    heads, kv = getattr(cfg, "num_attention_heads", 1), getattr(cfg, "num_key_value_heads", None)
    for name, value in TINY.items():
        try:
            setattr(cfg, name, value)
        except AttributeError:
            pass  # derived by the config itself (Falcon's head size)
    if kv is not None:
        cfg.num_key_value_heads = 1 if kv == 1 else 4 if kv == heads else 2
    cfg.num_hidden_layers = n_layers
    kinds = getattr(cfg, "layer_types", None)
    if isinstance(kinds, list) and kinds:
        cfg.layer_types = [kinds[i % len(kinds)] for i in range(n_layers)]
    if isinstance(getattr(cfg, "pad_token_id", None), int) and cfg.pad_token_id >= TINY["vocab_size"]:
        cfg.pad_token_id = None
    return cfg


def _reference(n_layers: int, kv_heads: int | None):
    import transformers as tf

    return tf.LlamaConfig(**TINY, num_hidden_layers=n_layers, num_key_value_heads=kv_heads or TINY[
        "num_attention_heads"])


def measure(config, device: str = "cpu") -> float:
    """The config's per-call time over a Llama's of the same tiny width and depth (module docstring)."""
    import torch
    import transformers as tf

    from bench.models import hub

    n = _depth(config)
    small = small_config(config, n)
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    with torch.random.fork_rng(devices=[]), hub.quiet():
        torch.manual_seed(0)
        models = [tf.AutoModelForCausalLM.from_config(c).to(dev).eval()
                  for c in (small, _reference(n, getattr(small, "num_key_value_heads", None)))]
    one = torch.ones(1, 1, dtype=torch.long, device=dev)

    def timed(model) -> float:
        t = time.perf_counter()
        with torch.no_grad():
            for _ in range(CALLS):
                model(input_ids=one, use_cache=False)
        sync()
        return time.perf_counter() - t

    best = [float("inf")] * len(models)
    for m in models:
        timed(m)  # warm-up
    for _ in range(ROUNDS):  # in turns, so that other work on the machine slows both alike
        for i, m in enumerate(models):
            best[i] = min(best[i], timed(m))
    return best[0] / max(1e-9, best[1])


def call_scale(config, device: str = "cpu") -> float:
    """The cached :func:`measure` of `config`'s architecture on this machine and `device` (``BENCH_RECALIBRATE=1``
    measures again, as it does the rates); 1 for a Llama or a config whose class cannot be built at the tiny width
    (an architecture transformers lacks)."""
    arch = str(getattr(_text(config), "model_type", "") or "")
    if arch in ("", REFERENCE):
        return 1.0
    path = cache_root() / "calibration" / f"{machine_key(device)}-calls.json"
    try:
        known = json.loads(path.read_text()) if path.is_file() and not os.environ.get("BENCH_RECALIBRATE") else {}
    except ValueError:
        known = {}
    if not isinstance(known, dict):
        known = {}  # an unreadable file is measured again, and written anew
    key = f"{arch}|{_depth(config)}"
    if not isinstance(known.get(key), (int, float)):
        try:
            known[key] = round(measure(config, device), 3)
        except Exception:  # noqa: BLE001 - a class that cannot be built small: planned at a Llama's overhead
            known[key] = 1.0
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, known)
    return float(known[key])
