"""What a probe costs before it runs: counted work, and the arithmetic that turns work into seconds and bytes.

Every probe has a cost model beside it, registered with ``@cost_def("probe")``: a function that takes the same
parameters as the probe (its table, or its keyword parameters with their defaults filled in) and, instead of a
loaded model, a :class:`Planned` — the model's :class:`Shape` read from its config, its tokenizer, the run's
seed and dtype — and returns a :class:`Cost`.  A cost model counts from the probe's own loops: the tokens of
every forward pass (padding included, since it is computed), the positions whose LM-head logits are computed,
the positions run forward and back for a gradient, the tokens decoded one at a time with a KV cache, the model
calls, the optimizer steps, and the sizes of what the largest batch keeps.  Where a count depends on what the
model outputs (a stop string, a pool that grows until enough facts are unknown) it counts the budget's worst
case and says so in a note.  Where an outcome of training decides it (an RL run whose answers collapse to an
immediate end), a part also has a floor (:attr:`Cost.floors`), and the plan predicts the geometric middle of
the two bounds' seconds (:func:`middle`) and shows both.

Work that probes share through ``ctx.memo`` is a part with a key: a plan counts each key once per model, as a
cold run computes it once (a key that starts with ``global|`` once per run: work that reads no model).

Seconds (:func:`seconds`) = FLOPs ÷ the machine's measured FLOP rates (blocks without and with gradients,
decoding, the LM head) + model calls × a measured overhead per layer (scaled to the architecture) + one read of
the weights per call: at the measured memory bandwidth, or for a decoding step at the rate a few-row product
streams them, taking the longer of that read and the step's arithmetic (:func:`model_seconds`) + optimizer
steps × 28 bytes per trained parameter at that bandwidth + random numbers drawn, characters tokenised, words
joined into running text and bytes hashed, each at its measured rate.  A model's load
(:func:`load_seconds`) is a measured fixed part, its tokenizer's load as timed when the plan read it, and its
weights' bytes (or, for a random-init control, its parameters drawn by the initialiser) at their measured rate.
FLOPs per token are 2 × the block parameters (× 3 with the backward pass) plus the attention scores (4 × layers
× heads × head size × context), plus 2 × vocabulary × d_model for each LM-head position.

Bytes (:func:`peak_bytes`) = weights in the run's dtype + the largest batch's activations, logits (float32),
attention maps and KV cache + trained parameters with their gradients and AdamW state + gradients kept without
an optimizer (in the weights' dtype) + stated extras.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping

from bench.ground import params as tables
from bench.ground.registry import Registry, _discover_measure

ADAMW_BYTES = 28  # an AdamW step reads weight, gradient and two moments and writes three of them (float32)
NOT_GATED = ("gpt2", "gpt_neox", "opt", "phi", "gptj", "falcon", "gpt_bigcode", "bloom")  # FFN types with two matrices


def kv_heads(cfg, heads: int) -> int:
    """The key/value heads a config declares: ``num_key_value_heads``, else the multi-query conventions of the
    configs that name them their own way (Falcon: ``new_decoder_architecture`` with ``num_kv_heads``, else one
    head when ``multi_query``; GPT-BigCode: ``multi_query``), else one per query head."""
    n = getattr(cfg, "num_key_value_heads", None)
    if n:
        return int(n)
    if getattr(cfg, "new_decoder_architecture", False) and getattr(cfg, "num_kv_heads", None):
        return int(cfg.num_kv_heads)
    return 1 if getattr(cfg, "multi_query", False) else heads


@dataclass(frozen=True)
class Shape:
    """What a cost depends on, read from a model's config (never from its name), and how much interpreter work a
    model call of its architecture does per layer beside a Llama's (:mod:`bench.spine.call_scale`)."""

    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True
    gated: bool = True
    window: int | None = None  # the smallest sliding attention window, if any layer has one
    call_scale: float = 1.0  # a model call's overhead per layer ÷ a Llama layer's: measured, not read (a plan sets it)

    @classmethod
    def from_config(cls, config) -> "Shape":
        cfg = config.get_text_config() if hasattr(config, "get_text_config") else config

        def first(*names, default=None):
            for n in names:
                v = getattr(cfg, n, None)
                if v is not None:
                    return v
            if default is None:
                raise ValueError(f"the config has none of {names}")
            return default

        d = int(first("hidden_size", "n_embd", "d_model"))
        heads = int(first("num_attention_heads", "n_head"))
        return cls(n_layers=int(first("num_hidden_layers", "n_layer")), d_model=d,
                   d_ff=int(first("intermediate_size", "n_inner", "ffn_dim", default=4 * d)), n_heads=heads,
                   n_kv_heads=kv_heads(cfg, heads),
                   head_dim=int(first("head_dim", default=d // heads)), vocab=int(first("vocab_size")),
                   tied=bool(getattr(config, "tie_word_embeddings", getattr(cfg, "tie_word_embeddings", True))),
                   gated=getattr(cfg, "model_type", "") not in NOT_GATED,
                   window=int(cfg.sliding_window) if getattr(cfg, "sliding_window", None) else None)

    @property
    def attn_params(self) -> int:
        q = self.n_heads * self.head_dim
        return self.d_model * q * 2 + 2 * self.d_model * self.n_kv_heads * self.head_dim

    @property
    def ffn_params(self) -> int:
        return (3 if self.gated else 2) * self.d_model * self.d_ff

    @property
    def block_params(self) -> int:
        """Parameters of the blocks (attention and FFN matrices; norms are negligible)."""
        return self.n_layers * (self.attn_params + self.ffn_params)

    @property
    def head_params(self) -> int:
        return self.vocab * self.d_model

    @property
    def n_params(self) -> int:
        return self.block_params + self.head_params * (1 if self.tied else 2)

    def attention_flops(self, context: int) -> float:
        """FLOPs of one position's attention scores and weighted sum over `context` positions."""
        return 4.0 * self.n_layers * self.n_heads * self.head_dim * max(1, context)


@dataclass(frozen=True)
class Work:
    """Counted work of one part of a probe.  Time fields add up; memory fields (``batch_tokens`` on) are the
    largest batch's and take the maximum."""

    forward: int = 0       # positions run through every block without gradients (padding included)
    head: int = 0          # of those, positions whose LM-head logits are computed
    backward: int = 0      # positions run forward and back through the blocks for a gradient
    backward_head: int = 0  # of those, positions whose logits enter the loss
    generated: int = 0     # tokens decoded one step at a time with a KV cache (each through blocks and head)
    calls: int = 0         # model calls (forward passes and decoding steps): each costs a per-layer overhead
    decoded_calls: int = 0  # of those, decoding steps: one token per row with a KV cache (bound by the weights' read)
    steps: int = 0         # optimizer steps
    context: int = 0       # longest sequence a position attends over (the attention term)
    flops: float = 0.0     # arithmetic outside the model (Gram sums, small trained models, baselines)
    drawn: int = 0         # random numbers drawn from a generator outside the model (Gaussian baselines)
    chars: int = 0         # characters of text run through the model's tokenizer
    words: int = 0         # words joined into running text by the corpora's detokeniser (interpreter-bound, per word)
    maps: int = 0          # attention probabilities formed by eager attention outside a model's block count (a toy)
    maps_trained: int = 0  # … formed in training (forward and backward)
    array: int = 0         # float64 elements passed through numpy outside the model (one per element per pass)
    fresh: int = 0         # bytes written to newly allocated memory (a copy of the model: each page faulted in)
    streamed: int = 0      # bytes read or written at the memory bandwidth outside model calls (in-place passes)
    hashed: int = 0        # bytes of files read and hashed (a corpus's fingerprint, once per file and process)
    batch_tokens: int = 0  # positions of the largest no-gradient batch
    grad_tokens: int = 0   # positions of the largest batch kept for a backward pass
    logit_rows: int = 0    # LM-head rows of the largest batch held at once (float32)
    attention_maps: int = 0  # attention probabilities kept at once (batch × layers × heads × T²)
    kv_tokens: int = 0     # KV-cache positions held at once (rows × length)
    trainable: int = 0     # parameters trained (adapters; all of them for a full fine-tune)
    grads: int = 0         # parameters whose gradient is kept with no optimizer (PV's gradient norms)
    full_copy: bool = False  # a trained float32 copy of the whole model beside it
    extra_bytes: int = 0   # other buffers kept at once (Gram matrices, stored states)

    TIME = ("forward", "head", "backward", "backward_head", "generated", "calls", "decoded_calls", "steps", "flops",
            "drawn", "chars", "words", "hashed", "maps", "maps_trained", "array", "fresh", "streamed")

    def __add__(self, other: "Work") -> "Work":
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            out[f.name] = a + b if f.name in self.TIME else (a or b) if isinstance(a, bool) else max(a, b)
        return Work(**out)

    def times(self, k: int) -> "Work":
        """The time fields `k` times over (a loop run k times), the memory fields once."""
        return replace(self, **{n: getattr(self, n) * k for n in self.TIME})


@dataclass(frozen=True)
class Cost:
    """A probe's counted work in parts (a key names work shared through ``ctx.memo``; None: the cell's own),
    the number of units its frame measures (texts, facts, sequences, seeds) and notes on worst cases.
    `units_of`: metric → (units, unit) where a metric's test counts other units than the frame's (the knowledge
    probe's reliability is over the trained facts, its erosion over the held-out ones); the plan takes the entry
    of the metric the spec's rule reads."""

    parts: tuple[tuple[str | None, Work], ...]
    units: int | None = None
    unit: str = ""
    notes: tuple[str, ...] = ()
    units_of: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    floors: Mapping[str, Work] = field(default_factory=dict)  # part key → its least work (see `total`)

    def units_for(self, metric: str | None) -> tuple[int | None, str]:
        """(units, unit) of the test of `metric` (the frame's when the probe names no other)."""
        return self.units_of.get(metric, (self.units, self.unit))

    def total(self, done: set[str] | None = None, *, least: bool = False) -> Work:
        """The work of the parts not in `done` (keys already counted), in one.  `least`: each part that has a
        floor at its floor — the work left when an outcome of training that no plan can see cuts the part short
        (an RL run whose answers collapse to an immediate end); the parts count the most it can be."""
        out = Work()
        for key, w in self.parts:
            if key is None or done is None or key not in done:
                out = out + (self.floors.get(key, w) if least and key is not None else w)
        return out

    def keyed(self, name: Callable[[str | None], str | None]) -> "Cost":
        """The same cost with every part key (and its floor's) renamed by `name`."""
        return replace(self, parts=tuple((name(k), w) for k, w in self.parts),
                       floors={name(k): w for k, w in self.floors.items()})


def middle(low: float, high: float) -> float:
    """The prediction between the bounds of work an outcome of training decides: their geometric mean, the
    estimate whose worst ratio to any outcome between them is smallest (the square root of high ÷ low)."""
    return high if not 0 < low < high else (low * high) ** 0.5


@dataclass(frozen=True)
class Planned:
    """What a cost model gets instead of a loaded model."""

    shape: Shape
    tokenizer: Any
    seed: int = 0
    dtype_bytes: int = 4
    name: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rates:
    """Measured speeds of this machine: FLOP/s of no-gradient forward, of forward+backward and of cached
    decoding; seconds of overhead per layer of every model call; FLOP/s of small kernels outside the model;
    bytes the process holds before any model (torch and transformers imported); weight bytes loaded per
    second; FLOP/s of the LM head's wide products; memory bandwidth; Gaussian draws per second; characters
    tokenised per second; seconds per word joined into running text; a model load's fixed seconds and, for a
    random-init control, parameters initialised per second; bytes of files read and hashed per second; attention
    probabilities formed per second by a model that keeps them (eager attention), without and with the backward
    pass; float64 elements per second through a numpy pass; bytes per second written to fresh memory."""

    forward: float
    backward: float
    generate: float
    call_layer_s: float
    kernel: float
    base_bytes: int
    load_bps: float = 2e8  # bytes of weights loaded per second
    head: float = 0.0  # FLOP/s of LM-head-sized products (a wide matrix and its log-softmax); 0: the forward rate
    bandwidth: float = 1e10  # bytes/s of streaming memory: each model call reads the weights once
    rng: float = 5e7  # Gaussian float64 numbers drawn per second
    tokenize: float = 2e6  # characters of text a fast tokenizer splits per second
    word_s: float = 7e-7  # seconds to join one word into running text (bench.corpora.tagged.detokenize)
    load_fixed_s: float = 0.0  # seconds of a model load that do not grow with its size (classes, modules, config)
    init_ps: float = 1e8  # parameters drawn by an architecture's initialiser per second (a random-init control)
    hash_bps: float = 5e8  # bytes of files read and hashed (sha256) per second
    attention: float = 1e8  # attention probabilities formed and kept per second by eager attention, no gradient
    attention_train: float = 3e7  # … the same, forward and backward
    array: float = 3e8  # float64 elements per second through one numpy pass (element-wise or a reduction)
    fresh: float = 1e9  # bytes per second written to newly allocated memory (the pages faulted in as they are)
    stream: float = 3e9  # bytes per second a few-row matrix product reads from a matrix beyond the caches
    machine: str = ""
    load: float = 0.0  # the 1-minute load average per CPU when measured: other work slows every rate above

    def __post_init__(self):
        if not self.head:
            object.__setattr__(self, "head", self.forward)


COSTS: Registry[Callable] = Registry("cost model", _discover_measure)


def cost_def(probe_name: str):
    """Register the cost model of probe `probe_name` (see the module docstring)."""

    def wrap(fn: Callable) -> Callable:
        COSTS.add(probe_name, fn)
        return fn

    return wrap


def costs() -> dict[str, Callable]:
    return COSTS.all()


def cost_of(info, planned: Planned, values: Mapping[str, Any]) -> Cost:
    """The cost of probe `info` (a ProbeInfo) with flat spec `values`, given as the probe takes them."""
    fn = COSTS.get(info.name)
    if info.table is not None:
        return fn(planned, tables.build(info.table, values, info.table_default))
    full = {n: p.default for n, p in info.params.items() if not p.required}
    full.update(values)
    accepted = inspect.signature(fn).parameters
    return fn(planned, **{k: v for k, v in full.items() if k in accepted})


def flops(shape: Shape, w: Work) -> dict[str, float]:
    """FLOPs of `w` on a model of `shape`: through the blocks without gradients (``forward``), with the backward
    pass (``backward``), decoding (``generate``), and of the LM head in all three (``head``)."""
    per_block = 2.0 * shape.block_params + shape.attention_flops(w.context)
    head = 2.0 * shape.head_params
    return {"forward": w.forward * per_block, "backward": 3.0 * w.backward * per_block,
            "generate": w.generated * per_block,
            "head": head * (w.head + 3.0 * w.backward_head + w.generated)}


def model_seconds(shape: Shape, w: Work, rates: Rates, dtype_bytes: int = 4) -> float:
    """Seconds of `w`'s model calls, less their fixed overhead.  Decoding steps (one token per row on a KV cache)
    take the longer of their arithmetic (FLOPs at the decoding and head rates) and their read of the blocks' and
    the head's weights at the rate a few-row product streams a matrix from memory (:attr:`Rates.stream`): with
    few rows a step is bound by the read.  gemma3-270m's tied 262,144-row head is 0.67 GB in float32; a step of
    8 rows reads it in 0.26 s at 2.6 GB/s on this project's 2-core machine, while its 2.7 GFLOP take 0.04 s,
    and a plan that charged one read at the copy bandwidth (13 GB/s, measured on a block a 480 MB cache holds)
    had its decoding cells at half their time.  Other calls, with many positions each, are bound by their
    arithmetic: their FLOPs at their rates and one read of all the weights at the copy bandwidth."""
    f = flops(shape, w)
    decode_head = flops(shape, Work(generated=w.generated))["head"]  # the decoded tokens' share of the head
    decode = f["generate"] / rates.generate + decode_head / rates.head
    other = f["forward"] / rates.forward + f["backward"] / rates.backward + (f["head"] - decode_head) / rates.head
    rest = max(0, w.calls - w.decoded_calls)
    read_decode = w.decoded_calls * (shape.block_params + shape.head_params) * dtype_bytes / rates.stream
    read_other = rest * shape.n_params * dtype_bytes / rates.bandwidth
    return max(decode, read_decode) + other + read_other


def seconds(shape: Shape, w: Work, rates: Rates, dtype_bytes: int = 4) -> float:
    """Predicted seconds of `w` (module docstring): the model calls' products (:func:`model_seconds`) and their
    overhead per layer, an AdamW step its memory traffic (:data:`ADAMW_BYTES` per trained parameter) at the
    measured bandwidth, and the work outside the model at its measured rates."""
    return (model_seconds(shape, w, rates, dtype_bytes) + w.calls * shape.n_layers * rates.call_layer_s
            * shape.call_scale + w.flops / rates.kernel
            + ADAMW_BYTES * w.steps * w.trainable / rates.bandwidth
            + w.drawn / rates.rng + w.chars / rates.tokenize + w.words * rates.word_s
            + w.hashed / rates.hash_bps + w.maps / rates.attention + w.maps_trained / rates.attention_train
            + w.array / rates.array + w.fresh / rates.fresh + w.streamed / rates.bandwidth)


# numpy passes over the (K, N) statistics in one selection of N neurons by entropy over K languages: the sum over
# languages, the division, two masks, the log, the product and its sum, the negativity check, the partition for the
# bar, the comparison with it, its `any`, the masked entropies and the stack of the languages' arrays
SELECT_PASSES = 14


def selection_elements(k: int, n: int) -> int:
    """Elements passed through numpy (:attr:`Work.array`) by one entropy selection of `n` neurons over `k`
    languages: :data:`SELECT_PASSES` over K·N, and one over the N entropies for their stable argsort (its
    n·log n comparisons are paid for by the rate, which the calibration times on this same selection)."""
    return SELECT_PASSES * k * n + n


def load_seconds(shape: Shape, rates: Rates, *, tokenizer_s: float = 0.0, initialised: bool = False) -> float:
    """Predicted seconds of loading a model of `shape` (float32 weights, as they are stored) with its tokenizer
    (`tokenizer_s`: the seconds its load took when the plan read it): the load's fixed part, the tokenizer, and
    the weights' bytes at the load rate — or, for a control whose weights an initialiser draws (`initialised`),
    its parameters at the initialiser's rate."""
    weights = shape.n_params / rates.init_ps if initialised else shape.n_params * 4 / rates.load_bps
    return rates.load_fixed_s + tokenizer_s + weights


def peak_parts(shape: Shape, w: Work, dtype_bytes: int) -> dict[str, int]:
    """The peak bytes of the model and what `w`'s largest batch keeps, by what holds them (module docstring)."""
    d, f, L = shape.d_model, shape.d_ff, shape.n_layers
    return {"weights": shape.n_params * dtype_bytes,
            "activations": w.batch_tokens * (6 * d + 3 * f) * dtype_bytes  # one layer's at a time
            + w.grad_tokens * L * (12 * d + 4 * f) * dtype_bytes,  # every layer's, kept for the backward pass
            "logits": w.logit_rows * shape.vocab * 4 * 3,  # float32 logits, their softmax and its gradient
            "attention_maps": w.attention_maps * 4,
            "kv_cache": w.kv_tokens * 2 * L * shape.n_kv_heads * shape.head_dim * dtype_bytes,
            "optimizer": w.trainable * 4 * 4,  # float32 weight, gradient and two AdamW moments
            "gradients": w.grads * dtype_bytes,  # in the weights' own dtype
            "trained_copy": shape.n_params * 4 if w.full_copy else 0,
            "extra": w.extra_bytes}  # Gram matrices, stored states: what the cost model states


def peak_bytes(shape: Shape, w: Work, dtype_bytes: int) -> int:
    """Peak bytes of the model and what `w`'s largest batch keeps (the sum of :func:`peak_parts`)."""
    return int(sum(peak_parts(shape, w, dtype_bytes).values()))


def host_memory() -> int:
    """Bytes of memory this machine has (``BENCH_HOST_MEMORY`` in GiB overrides it)."""
    given = os.environ.get("BENCH_HOST_MEMORY")
    if given:
        return int(float(given) * (1 << 30))
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0
