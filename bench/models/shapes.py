"""A model's config and tokenizer without its weights, for planning a run (:mod:`bench.spine.costs`).

Where they come from: an embedded model's converted folder (or, before its first conversion, the GGUF file's
header, whose metadata is read without de-quantising a tensor), a checkpoint folder's config.json (with a
stand-in tokenizer when the folder has none), a GGUF
file's header, the hub cache's snapshot folder or the hub (config and tokenizer files only).  A
``+random-init`` control has its base model's config and tokenizer.  No weight file is opened."""

from __future__ import annotations

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


def read(ref: ModelRef) -> tuple[Any, Any, str]:
    """(config, tokenizer, note) of `ref`, weights untouched.  A folder with a config.json and no tokenizer (a
    shape to plan for, nothing downloaded) has its tokens counted by the embedded :data:`STAND_IN`'s tokenizer;
    the note says so (token counts of the same text differ between tokenizers by some tens of percent)."""
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
            tok = AutoTokenizer.from_pretrained(where, **kw, **NO_REMOTE_CODE)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the config of '{ref.display}': {str(exc).splitlines()[0]}") from None
    return config, tok, note


def tokenizer_bytes(ref: ModelRef) -> int:
    """Bytes of the tokenizer files a load of `ref` reads (its converted or checkpoint folder's; 0 where they are
    not on this machine: a hub id not downloaded, a GGUF not yet converted)."""
    from bench.models.loading import IDENTITY_FILES, IDENTITY_SUFFIXES

    where, _ = source(ref)
    folder = Path(where)
    if not folder.is_dir():
        return 0
    names = [n for n in IDENTITY_FILES if n not in ("config.json", "generation_config.json")]
    return sum(p.stat().st_size for p in folder.iterdir()
               if p.is_file() and (p.name in names or p.suffix in IDENTITY_SUFFIXES))


def shape(config) -> Shape:
    try:
        return Shape.from_config(config)
    except ValueError as exc:
        raise ModelError(f"cannot plan for this config: {exc}") from None
