"""A model's config and tokenizer without its weights, for planning a run (:mod:`bench.spine.costs`).

Where they come from: an embedded model's converted folder (or, before its first conversion, the GGUF file's
header, whose metadata is read without de-quantising a tensor), a checkpoint folder's config.json (with a
stand-in tokenizer when the folder has none), a GGUF
file's header, the hub cache's snapshot folder or the hub (config and tokenizer files only).  A
``+random-init`` control has its base model's config and tokenizer.  No weight file is opened."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.ground.costs import Shape
from bench.ground.errors import ModelError
from bench.models import hub
from bench.ground.store import cache_root
from bench.models.loading import ALIASES, NO_REMOTE_CODE, ModelRef, _file_hash


def source(ref: ModelRef) -> tuple[str, dict[str, Any]]:
    """(folder or hub id, extra keyword arguments for ``from_pretrained``) of `ref`'s config and tokenizer."""
    ref = ref.base
    if ref.kind in ("alias", "gguf"):
        gguf = ALIASES[ref.name].gguf_path() if ref.kind == "alias" else Path(ref.location)
        converted = cache_root() / "models" / _file_hash(gguf)[:16]
        if (converted / "bench-provenance.json").is_file():
            return str(converted), {}
        return str(gguf.parent), {"gguf_file": gguf.name}
    if ref.kind == "hub" and not Path(ref.location).is_dir():
        return ref.location, {"revision": ref.revision}
    return ref.location, {}


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "vocab.txt")
STAND_IN = "smollm2-135m"  # whose tokenizer counts the tokens of a config folder that has none


def read(ref: ModelRef) -> tuple[Any, Any, str, float]:
    """(config, tokenizer, note, seconds the tokenizer took to load) of `ref`, weights untouched.  A folder with a
    config.json and no tokenizer (a shape to plan for, nothing downloaded) has its tokens counted by the embedded
    :data:`STAND_IN`'s tokenizer; the note says so (token counts of the same text differ between tokenizers by
    some tens of percent), and its load counts 0 s.  The load is timed because a run loads the same tokenizer
    with each model: its time depends on the tokenizer's class as much as on its files (Gemma 3's 33 MB loads in
    3 s at one thread, most of it a JSON parse in Python, while a plain byte-pair tokenizer's 4.5 MB take 0.2 s)."""
    from transformers import AutoConfig, AutoTokenizer

    where, kw = source(ref)
    note = ""
    try:
        with hub.quiet():
            config = AutoConfig.from_pretrained(where, **kw, **NO_REMOTE_CODE)
            folder = Path(where)
            if folder.is_dir() and not any((folder / n).is_file() for n in TOKENIZER_FILES):
                from bench.models.loading import resolve

                where, kw = source(resolve(STAND_IN))
                note = f"token counts from {STAND_IN}'s tokenizer: {ref.base.display} has none"
            began = time.perf_counter()
            tok = AutoTokenizer.from_pretrained(where, **kw, **NO_REMOTE_CODE)
            took = 0.0 if note else time.perf_counter() - began
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the config of '{ref.display}': {str(exc).splitlines()[0]}") from None
    return config, tok, note, took


def shape(config) -> Shape:
    try:
        return Shape.from_config(config)
    except ValueError as exc:
        raise ModelError(f"cannot plan for this config: {exc}") from None
