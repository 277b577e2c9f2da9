"""The fine-tuning engine: (prompt, answer) examples and a :class:`Recipe` in, a trained model out.

Two methods share one loop: ``lora`` (peft adapters, rsLoRA optional, on modules found from the module tree,
:mod:`bench.models.adapters`) and ``full`` (every parameter).  :func:`optimizer` (AdamW, fused where it can be, and
the schedule) serves this loop and the policy-gradient loop of :mod:`bench.models.policy`.  The loss is the mean next-token
cross-entropy over the answer tokens (``Recipe.loss = "answer"``) or over every token of the example after the
first (``"example"``, as a causal-LM trainer does with labels = inputs); the body runs on the whole sequence (a
prompt prefix common to the batch once, where nothing random tells the rows apart), the LM head only on the
positions that predict a target token (a 262k-word head costs more than the blocks otherwise).

Training is seeded: the same model, examples, recipe and seed give identical weights on CPU (LoRA
initialisation, dropout and batch order draw from one generator seeded by the recipe).

:func:`derived` is what probes call: "this base model + this recipe + these examples" → the trained model,
cached by content hash under ``$BENCH_CACHE/trained/<k[:2]>/<k>/`` (model fingerprint, examples, recipe).  An
entry is written to a temp folder and renamed into place, so a killed run leaves no half-written entry, only a
temp folder that the next run removes.  The loop also saves its state in ``<k>.partial/`` every
``$BENCH_SAVE_EVERY`` seconds (and every ``checkpoint_every`` steps where a recipe asks) and a re-run resumes from
there (bit-identically: the batch order and the RNG state are restored; :mod:`bench.ground.resume`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Sequence

import torch
from torch import nn

from bench.ground.context import libraries, placement
from bench.ground.store import cache_root, key_of, sha256_bytes
from bench.models import decoding
from bench.models.adapters import (  # noqa: F401 (the engine's names for its adapters)
    Targets, TrainError, full_copy, lora_adapters, lora_targets, recipe_adapters, target_modules)
from bench.models.logits import logit_cap, softcap
from bench.models.precision import LOW_PRECISION, MasterAdamW
from bench.ground.resume import Resume, maybe_save, restore, snapshot

ENGINE_VERSION = 3  # 2: the fused AdamW kernel (the same update, rounded differently; ~10x faster per step)
# 3: a batch's common prompt prefix runs once (answer loss, no dropout): the same loss up to float rounding
@dataclass(frozen=True)
class Example:
    """One training example: the loss is taken on `answer`'s tokens, conditioned on `prompt`."""

    prompt: str
    answer: str


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a training run besides the model and the examples."""

    method: Literal["lora", "full"] = "lora"
    steps: int | None = None        # optimizer steps; None: epochs × ceil(n / batch)
    epochs: int = 10
    batch: int = 8
    lr: float = 1e-3
    schedule: Literal["constant", "linear"] = "linear"
    weight_decay: float = 0.0
    seed: int = 0
    r: int = 1                      # LoRA rank
    alpha: float = 2.0
    rslora: bool = True             # scale alpha / sqrt(r) instead of alpha / r
    dropout: float = 0.1
    targets: Targets = "ffn"        # which linears get adapters: FFN in/out, attention q/k/v/o, or both
    checkpoint_every: int = 0       # also save resumable state every N steps (0: by wall time only)
    loss: Literal["answer", "example"] = "answer"  # the loss on the answer's tokens, or on the whole example
    order: Literal["shuffled", "cycle"] = "shuffled"  # a fresh permutation per epoch, or the examples in order

    def params(self) -> dict[str, Any]:
        """The hyper-parameters, for cache keys and frames (the checkpoint interval changes no weight; the
        default answer-only loss and shuffled order are left out, so the keys of recipes made before they existed
        stay valid)."""
        d = asdict(self)
        d.pop("checkpoint_every")
        for name, default in (("loss", "answer"), ("order", "shuffled")):
            if d[name] == default:
                d.pop(name)
        return d

    def n_steps(self, n_examples: int) -> int:
        return self.steps if self.steps is not None else self.epochs * math.ceil(n_examples / self.batch)


@dataclass
class Trained:
    model: nn.Module               # the trained causal LM (LoRA layers injected, or a full copy)
    losses: list[float]            # training loss per optimizer step
    key: str                       # content hash of (model, examples, recipe)
    cached: bool = False           # loaded from the cache rather than trained
    info: dict[str, Any] = field(default_factory=dict)


def data_hash(examples: Sequence[Example]) -> str:
    return sha256_bytes(json.dumps([[e.prompt, e.answer] for e in examples], ensure_ascii=False).encode())


def train_key(fingerprint: str, examples: Sequence[Example], recipe: Recipe, *, device: str = "cpu",
              dtype: str = "float32") -> str:
    """The cache key of a training run: the base weights, the examples, the recipe, where it ran (device type)
    and in which dtype (a bfloat16 run trains differently from a float32 one and must not reuse its result)."""
    return key_of({"engine": ENGINE_VERSION, "model": fingerprint, "data": data_hash(examples),
                   "recipe": recipe.params(), **libraries(), "device": device, "dtype": dtype})


# ── batches and the loss ────────────────────────────────────────────────────────────────────────────────────

def encode(tokenizer, examples: Sequence[Example]) -> list[tuple[list[int], int]]:
    """(token ids of prompt + answer, number of prompt tokens) per example; a BOS is kept where the
    tokenizer adds one.  The prompt is tokenized alone, so the answer's first token is what follows it."""
    out = []
    for e in examples:
        p = tokenizer(e.prompt, add_special_tokens=True)["input_ids"]
        full = tokenizer(e.prompt + e.answer, add_special_tokens=True)["input_ids"]
        if full[: len(p)] != p:  # the answer merged into the prompt's last token: split by tokenizing apart
            full = p + tokenizer(e.answer, add_special_tokens=False)["input_ids"]
        if len(full) <= len(p):
            raise TrainError(f"answer {e.answer!r} adds no tokens to prompt {e.prompt[-40:]!r}")
        out.append((full, len(p)))
    return out


def collate(rows: list[tuple[list[int], int]], pad_id: int, device) -> tuple[torch.Tensor, ...]:
    """Right-padded ids (B, T), attention mask (B, T) and the answer-target mask (B, T-1)."""
    T = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    tgt = torch.zeros((len(rows), T - 1), dtype=torch.bool)
    for i, (seq, n_prompt) in enumerate(rows):
        ids[i, : len(seq)] = torch.tensor(seq)
        att[i, : len(seq)] = 1
        tgt[i, n_prompt - 1: len(seq) - 1] = True  # position t predicts token t + 1
    return ids.to(device), att.to(device), tgt.to(device)


def head_of(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The LM head as a function of final hidden states, with the config's logit soft-capping if any."""
    head = model.get_output_embeddings()
    cap = logit_cap(model)
    if cap:
        return lambda h: softcap(head(h), cap)
    return head


def body_of(model: nn.Module) -> nn.Module:
    """The decoder without its LM head (``base_model`` of a transformers causal LM)."""
    body = getattr(model, "base_model", None)
    if body is None or body is model:
        raise TrainError(f"{type(model).__name__} has no separate body to run without its head")
    return body


def answer_loss(model: nn.Module, ids: torch.Tensor, att: torch.Tensor, tgt: torch.Tensor,
                head_positions_only: bool = True, share: int = 0) -> torch.Tensor:
    """Mean cross-entropy over answer tokens.  With `head_positions_only`, the head sees only the (N, d)
    hidden states that predict answer tokens; otherwise it runs on every position (for comparison).  `share`:
    the first `share` tokens, the same in every row and before every target (:func:`prefix_sharing`), run once
    and their cache is copied along the batch by ``repeat_interleave``, whose backward sums the rows' gradients:
    the loss and its gradient are the whole rows' up to float rounding."""
    body = body_of(model)
    if share:
        past = body(input_ids=ids[:1, :share], use_cache=True).cache
        past.batch_repeat_interleave(ids.shape[0])
        pos = torch.arange(share, ids.shape[1], device=ids.device)[None].expand(ids.shape[0], -1)
        hidden = body(input_ids=ids[:, share:], attention_mask=att, position_ids=pos, cache=past,
                      use_cache=True).last_hidden_state                           # (B, T - share, d)
        ids, tgt = ids[:, share:], tgt[:, share:]
    else:
        hidden = body(input_ids=ids, attention_mask=att).last_hidden_state       # (B, T, d)
    labels = ids[:, 1:][tgt]                                                       # (N,)
    head = head_of(model)
    if head_positions_only:
        logits = head(hidden[:, :-1][tgt])                                         # (N, d) → (N, V)
    else:
        logits = head(hidden)[:, :-1][tgt]                                         # (B, T, V) → (N, V)
    return nn.functional.cross_entropy(logits.float(), labels)


def prefix_sharing(model: nn.Module) -> Callable[[list[tuple[list[int], int]]], int]:
    """For `model`, how many leading tokens a batch of (ids, first target index + 1) rows runs once in
    :func:`answer_loss`: :func:`common_prefix` within the model's sliding window, or none when the model draws
    dropout (a mask shared along the batch would differ from one drawn per row); the model is read once."""
    if _stochastic(model):
        return lambda rows: 0
    window = decoding.window(model)
    return lambda rows: common_prefix(rows, window)


def common_prefix(rows: list[tuple[list[int], int]], window: int | None = None) -> int:
    """The tokens every one of several (ids, first target index + 1) rows starts with, up to the first position
    that predicts a target: 0 for a single row, or when a row is longer than a sliding `window` (a window counts
    cache slots)."""
    if len(rows) < 2 or (window and max(len(ids) for ids, _ in rows) > window):
        return 0
    first = rows[0][0]
    n = min(p for _, p in rows) - 1
    for ids, _ in rows[1:]:
        n = next((k for k in range(n) if ids[k] != first[k]), n)
    return max(n, 0)


def _stochastic(model: nn.Module) -> bool:
    cfg = getattr(model, "config", None)
    drop = max(float(getattr(cfg, name, 0) or 0) for name in ("attention_dropout", "attn_pdrop", "dropout"))
    return drop > 0 or any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())


# ── the loop ────────────────────────────────────────────────────────────────────────────────────────────────

def batch_order(n: int, recipe: Recipe) -> list[list[int]]:
    """The batches of example indices :func:`fit` runs, one per step: a fresh permutation per epoch (seeded by
    the recipe), epochs back to back.  With ``steps = None`` every example is seen exactly `epochs` times.
    ``order = "cycle"``: `batch` examples a step in the given order, cycling (a batch may wrap to the start)."""
    gen, steps = torch.Generator().manual_seed(recipe.seed), recipe.n_steps(n)
    if recipe.order == "cycle":
        return [[(s * recipe.batch + j) % n for j in range(recipe.batch)] for s in range(steps)]
    out: list[list[int]] = []
    while len(out) < steps:
        perm = torch.randperm(n, generator=gen).tolist()
        out += [perm[i: i + recipe.batch] for i in range(0, n, recipe.batch)]
    return out[:steps]


def _trainable(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def optimizer(model: nn.Module, recipe: Recipe, steps: int):
    """The optimizer of every training run and its learning-rate schedule over `steps`: AdamW (the fused kernel
    where every trainable parameter allows it) on the parameters of `model` that require grad; with float32
    master weights (:class:`MasterAdamW`) where a trainable parameter is bfloat16 or float16."""
    params = [p for _, p in _trainable(model)]
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params) or None
    kind = MasterAdamW if any(p.dtype in LOW_PRECISION for p in params) else torch.optim.AdamW
    opt = kind(params, lr=recipe.lr, weight_decay=recipe.weight_decay, fused=fused)
    decay = (lambda s: 1.0 - s / steps) if recipe.schedule == "linear" else (lambda s: 1.0)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, decay)


def fit(model: nn.Module, tokenizer, examples: Sequence[Example], recipe: Recipe, *,
        progress: Callable[[float, str], None] = lambda f, m="": None, resume: Resume | None = None,
        head_positions_only: bool = True, after_step: Callable[[int], None] | None = None) -> list[float]:
    """Train `model` in place (its trainable parameters are whatever requires grad) and return the losses.

    With `resume`, the loop's state is saved there now and then and picked up again (:mod:`bench.ground.resume`).
    `after_step(step)` is called after every step but the last (a caller scoring the model part-way)."""
    if not examples:
        raise TrainError("no training examples")
    device = next(model.parameters()).device
    rows = encode(tokenizer, examples)
    rows = [(ids, 1) for ids, _ in rows] if recipe.loss == "example" else rows  # every token after the first
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id or 0
    steps, order = recipe.n_steps(len(rows)), batch_order(len(rows), recipe)
    opt, sched = optimizer(model, recipe, steps)
    torch.manual_seed(recipe.seed + 1)  # dropout masks
    params = _trainable(model)
    saved = restore(resume, params, opt, sched=sched)
    start, losses = (saved["step"], list(saved["losses"])) if saved else (0, [])
    shared = prefix_sharing(model)
    model.train()
    try:
        for step in range(start, steps):
            batch = [rows[i] for i in order[step]]
            ids, att, tgt = collate(batch, pad, device)
            loss = answer_loss(model, ids, att, tgt, head_positions_only, shared(batch))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            progress((step + 1) / steps, f"training {recipe.method} step {step + 1}/{steps} loss {losses[-1]:.3f}")
            if after_step is not None and step + 1 < steps:
                after_step(step + 1)
            maybe_save(resume, step + 1, steps,
                       lambda: snapshot(params, opt, sched=sched, step=step + 1, losses=list(losses)))
    finally:
        model.eval()
    return losses


# ── cached derived models ───────────────────────────────────────────────────────────────────────────────────

def entry_dir(key: str, root: Path | None = None) -> Path:
    return Path(root or cache_root()) / "trained" / key[:2] / key


@contextlib.contextmanager
def derived(base: nn.Module, tokenizer, fingerprint: str, examples: Sequence[Example], recipe: Recipe, *,
            progress: Callable[[float, str], None] = lambda f, m="": None, root: Path | None = None,
            train_hook: Callable[[int], None] | None = None) -> Iterator[Trained]:
    """The base model trained on `examples` by `recipe`, from the cache when it holds it.

    LoRA adapters are injected into `base` for the duration of the ``with`` block and removed afterwards (the
    base weights are never changed); full fine-tuning works on a copy.  `train_hook` is for tests (called with
    the step count before training starts)."""
    first = next(base.parameters())
    key = train_key(fingerprint, examples, recipe, **placement(first.device, first.dtype))
    final = entry_dir(key, root)
    with contextlib.ExitStack() as stack:
        lora = recipe.method == "lora"  # the causal LM itself with adapters injected, or a full copy
        model = stack.enter_context(recipe_adapters(base, recipe)).get_base_model() if lora else full_copy(base)
        trained = [n for n, _ in _trainable(model)]
        if (final / "meta.json").is_file():
            try:
                losses = _load(model, final, recipe)
            except Exception:  # noqa: BLE001 - a damaged entry is retrained, never trusted
                shutil.rmtree(final, ignore_errors=True)
                _reset(model, base, recipe)
            else:  # (an error in the caller's block is the caller's: it neither deletes the entry nor retrains)
                yield Trained(model, losses, key, cached=True, info={"steps": len(losses)})
                return
        if train_hook:
            train_hook(recipe.n_steps(len(examples)))
        partial = final.with_name(final.name + ".partial")
        resume = Resume(partial / "state.pt", every_steps=recipe.checkpoint_every, at_end=False,  # stored below
                        label=f"{recipe.method} fine-tune")
        losses = fit(model, tokenizer, examples, recipe, progress=progress, resume=resume)
        _store(model, final, recipe, losses, trained)
        shutil.rmtree(partial, ignore_errors=True)
        yield Trained(model, losses, key, cached=False, info={"steps": len(losses)})


def _reset(model: nn.Module, base: nn.Module, recipe: Recipe) -> None:
    """Undo a failed partial load: LoRA weights back to their seeded start, a full copy back to the base."""
    if recipe.method == "lora":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(recipe.seed)
            for module in model.modules():
                if hasattr(module, "reset_lora_parameters"):
                    module.reset_lora_parameters("default", True)
    else:
        model.load_state_dict(base.state_dict())


def _store(model: nn.Module, final: Path, recipe: Recipe, losses: list[float], names: list[str]) -> None:
    from safetensors.torch import save_file

    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".{final.name}.*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        tensors = {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if n in set(names)}
        if recipe.method == "full":  # tied weights are one tensor under two names: store it once
            seen: dict[int, str] = {}
            for n in list(tensors):
                ptr = dict(model.named_parameters())[n].data_ptr()
                if ptr in seen:
                    tensors.pop(n)
                seen.setdefault(ptr, n)
        save_file(tensors, str(tmp / "weights.safetensors"))
        (tmp / "meta.json").write_text(json.dumps({"recipe": recipe.params(), "losses": losses,
                                                   "engine": ENGINE_VERSION}))
        os.chmod(tmp, 0o755)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load(model: nn.Module, final: Path, recipe: Recipe) -> list[float]:
    from safetensors.torch import load_file

    meta = json.loads((final / "meta.json").read_text())
    tensors = load_file(str(final / "weights.safetensors"))
    named = dict(model.named_parameters())
    missing = [n for n in named if named[n].requires_grad and n not in tensors and recipe.method == "lora"]
    if missing or any(n not in named for n in tensors):
        raise ValueError("stored weights do not fit the model")
    with torch.no_grad():
        for n, t in tensors.items():
            named[n].copy_(t)
    model.eval()
    return [float(x) for x in meta["losses"]]
