"""This machine's speeds, measured once and cached: the rates :func:`bench.ground.costs.seconds` divides by.

A small Llama-shaped model is built from a config with random weights (nothing is downloaded) and timed on
the device the run uses:
- a memory copy (bandwidth), and the same copy into newly allocated memory (bytes per second written to fresh
  pages);
- eight rows multiplied by two 256 MiB matrices in turn (the rate a decoding step streams weights that no cache
  holds);
- a wide product with its log-softmax (LM-head FLOP/s);
- a no-gradient forward pass over a batch (forward FLOP/s), the same batch forward and backward (FLOP/s with the
  backward pass), cached one-token decoding steps (decoding FLOP/s);
- one-token calls (the overhead per layer of a model call, less one read of the weights; at least that of a
  model as deep and 64 wide);
- a float64 matrix product (FLOP/s of kernels outside the model);
- a save and load of the weights beside a tiny model's (bytes loaded per second, and the fixed part of a load);
- a byte-pair tokenizer splitting text (characters per second; a tokenizer's load is timed by the plan that
  reads it);
- eager attention forming and keeping its probabilities (elements per second, without and with the backward
  pass);
- numpy passes over float64 arrays (elements per second), Gaussian draws from a seeded generator, the corpora's
  word joining (seconds per word), a corpus fingerprint's file hashing (bytes per second), the initialiser
  drawing the model's weights (parameters per second);
- the process's resident memory before any model.

The result is cached in the bench cache folder under a key of what is measured (:data:`VERSION`), the machine
(host name, processor, CPU count), the torch version, the thread count and the device; ``BENCH_RECALIBRATE=1``
measures again.  The load average at measurement is kept with the rates: `bench plan` warns when they were
taken on a busy machine.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import asdict

from bench.ground.costs import Rates, Shape, Work, flops, selection_elements
from bench.ground.store import atomic_write_json, cache_root, sha256_bytes

CONFIG = dict(vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
              num_key_value_heads=4, max_position_embeddings=512, tie_word_embeddings=True)
BATCH, LENGTH, ROWS, STEPS = 8, 128, 64, 24
HEAD_ROWS, HEAD_VOCAB = 512, 65536  # an LM head as wide as a large vocabulary
# a width whose weights take no time to read: a call of it is the interpreter's overhead alone
NARROW = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, head_dim=16, vocab_size=256)
STREAM_ROWS = 8  # rows of the few-row products timed for the rate weights stream from memory
VERSION = 7  # of what is measured: part of the cache key, so rates measured by an older bench are measured again
DRAWS = 1 << 21  # Gaussian numbers drawn to time the generator
MERGES = 60_000  # merges of the byte-pair tokenizer whose splitting of text is timed
ITEMS = 200_000  # words joined to time the corpora's word joining


def machine_key(device: str) -> str:
    import torch

    parts = [f"v{VERSION}", platform.node(), platform.machine(), platform.processor(), str(os.cpu_count()),
             torch.__version__, str(torch.get_num_threads()), device]
    if device.startswith("cuda") and torch.cuda.is_available():
        parts.append(torch.cuda.get_device_name(torch.device(device)))
    return sha256_bytes("|".join(parts).encode())[:16]


def rates(device: str = "cpu", refresh: bool = False) -> Rates:
    """The cached rates of this machine and `device`, measured now when there are none (a few seconds)."""
    path = cache_root() / "calibration" / f"{machine_key(device)}.json"
    if path.is_file() and not refresh and not os.environ.get("BENCH_RECALIBRATE"):
        try:
            return Rates(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # an unreadable entry is measured again
    got = measure(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, asdict(got))
    return got


BUSY = 0.5  # rates measured above this load per CPU are taken with other work running


def busy() -> float:
    """The 1-minute load average per CPU (0 where the system does not report one)."""
    try:
        return os.getloadavg()[0] / max(1, os.cpu_count() or 1)
    except (AttributeError, OSError):
        return 0.0


def warning(r: Rates) -> str | None:
    """Why predictions from `r` may be too long: it was measured while other work held the CPUs."""
    if r.load <= BUSY:
        return None
    return (f"this machine's rates were measured at a load of {r.load:.1f} per CPU (other work running), so the "
            f"predicted times are likely too long; measure again on a quiet machine with BENCH_RECALIBRATE=1")


def oversubscribed(threads: int) -> str | None:
    """Why this run may crawl: the CPUs are already busy and each process runs several compute threads.  Threads
    that share a core with other work wait for each other at every parallel step: one knowledge cell took 2,524 s
    with a 2-thread run beside other 2-thread work on 2 CPUs, and 176 s with one thread per run."""
    cpus = os.cpu_count() or 1
    load = busy() * cpus
    if threads <= 1 or load <= cpus:
        return None
    return (f"the CPUs are already busy (load {load:.1f} on {cpus}) and this run computes on {threads} threads; "
            f"threads that share cores with other work wait on each other and can run many times slower. "
            f"Where jobs run side by side, give each OMP_NUM_THREADS=1")


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def best_time(fn, repeat: int = 3, warmup: bool = False) -> float:
    """The shortest of `repeat` timings of `fn` (the one least disturbed by other work), after one untimed call
    with `warmup`."""
    if warmup:
        fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def call_overhead(t_call: float, t_read: float, t_narrow: float, layers: int) -> float:
    """Seconds of overhead per layer of a model call: a call (`t_call`) less its weights' read (`t_read`), and
    never less than a narrow model's call of the same depth (`t_narrow`), whose weights take no time to read."""
    return max(t_call - t_read, t_narrow) / layers


def measure(device: str = "cpu") -> Rates:
    """Time each kind of work once (the shortest of a few tries) and divide out what else the timing holds:
    a call's fixed cost (the blocks' rates are timed without a head)."""
    import torch
    import transformers as tf

    base = _resident_bytes()
    load = busy()
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cfg = tf.LlamaConfig(**CONFIG)
        model = tf.LlamaForCausalLM(cfg).to(dev).eval()
        big = torch.randn(64 << 20, device=dev)  # 256 MiB, beyond any cache
        wide = torch.randn(HEAD_VOCAB, CONFIG["hidden_size"], device=dev)
        rows_h = torch.randn(HEAD_ROWS, CONFIG["hidden_size"], device=dev)
    shape = Shape.from_config(cfg)
    other = torch.empty_like(big)
    t_copy = best_time(lambda: (other.copy_(big), sync()))
    bandwidth = 2 * big.numel() * 4 / max(1e-9, t_copy)  # read and write
    # a copy into memory allocated for it: on the CPU a block this large is mapped afresh at each allocation, so
    # every page is faulted in as it is first written (a model's deep copy pays this, not the bandwidth alone)
    t_fresh = best_time(lambda: (torch.empty_like(big).copy_(big), sync()))
    fresh = big.numel() * 4 / max(1e-9, t_fresh)
    # a decoding step's products: a few rows against weights that no cache holds (two 256 MiB matrices in turn)
    few = torch.randn(STREAM_ROWS, CONFIG["hidden_size"], device=dev)
    mats = [x.view(-1, CONFIG["hidden_size"]) for x in (big, other)]
    t_stream = best_time(lambda: ([few @ m.T for m in mats], sync()), warmup=True)
    stream = 2 * big.numel() * 4 / max(1e-9, t_stream)
    t_head = best_time(lambda: (torch.log_softmax(rows_h @ wide.T, dim=-1), sync()))
    head = 2.0 * HEAD_ROWS * HEAD_VOCAB * CONFIG["hidden_size"] / max(1e-9, t_head)
    ids = torch.randint(0, CONFIG["vocab_size"], (BATCH, LENGTH), generator=torch.Generator().manual_seed(0)).to(dev)
    one = ids[:1, :1]
    # A call's overhead per layer: this model's one-token call less one read of its weights at the copy
    # bandwidth, spread over its layers (the width-bound small operations a call runs are in it).  That is a
    # difference of two near numbers: with the weights' 67 MB held in a large cache the read can run faster than
    # the copy's bandwidth, and it once came out at 0.  Its floor is the same call of a model as deep and 64
    # wide, whose weights take no time to read: the interpreter's part alone.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        narrow = tf.LlamaForCausalLM(tf.LlamaConfig(**NARROW, num_hidden_layers=shape.n_layers)).to(dev)

    def call(m, x):
        with torch.no_grad():
            m(input_ids=x, use_cache=False)
        sync()

    token = torch.ones(1, 1, dtype=torch.long, device=dev)
    call(model, ids)  # warm-up
    call(narrow.eval(), token)
    t_call = best_time(lambda: [call(model, token) for _ in range(20)]) / 20
    t_narrow = best_time(lambda: [call(narrow, token) for _ in range(20)]) / 20
    overhead = call_overhead(t_call, shape.n_params * 4 / bandwidth, t_narrow, shape.n_layers)
    # The blocks' rates are timed on the blocks alone (the base model, no head): subtracting a head's time
    # estimated at the head rate left a remainder small and noisy enough to inflate the forward rate tenfold
    # (1.9e12 FLOP/s on 2 cores), and every forward-heavy cell was planned that much too short.
    blocks = model.get_decoder()

    def through(x):
        with torch.no_grad():
            blocks(input_ids=x, use_cache=False)
        sync()

    through(ids)
    t_one = best_time(lambda: [through(one) for _ in range(20)]) / 20
    rest = lambda t: max(t - t_one, 0.5 * t)  # noqa: E731 - a timing less one call's fixed cost
    t_fwd = best_time(lambda: through(ids))
    forward = flops(shape, Work(forward=BATCH * LENGTH, context=LENGTH))["forward"] / rest(t_fwd)

    def train():
        blocks(input_ids=ids, use_cache=False).last_hidden_state.pow(2).mean().backward()
        model.zero_grad(set_to_none=True)
        sync()

    t_bwd = best_time(train, repeat=2)
    backward = flops(shape, Work(backward=BATCH * LENGTH, context=LENGTH))["backward"] / rest(t_bwd)
    rows = ids.repeat(ROWS // BATCH, 1)[:, :32]

    def decode():
        with torch.no_grad():
            past = blocks(input_ids=rows, use_cache=True).cache
            nxt = rows[:, -1:]
            sync()
            t = time.perf_counter()
            for _ in range(STEPS):
                past = blocks(input_ids=nxt, cache=past, use_cache=True).cache
            sync()
            return time.perf_counter() - t

    t_gen = min(decode() for _ in range(2))
    f = flops(shape, Work(generated=ROWS * STEPS, context=32 + STEPS))
    generate = f["generate"] / max(t_gen - STEPS * t_one, 0.5 * t_gen)
    a = torch.randn(384, 384, dtype=torch.float64, device=dev)
    t_mm = best_time(lambda: (a @ a, sync()))
    kernel = 2 * 384 ** 3 / max(1e-9, t_mm)
    gen = torch.Generator().manual_seed(0)
    rng = DRAWS / max(1e-9, best_time(lambda: torch.randn(DRAWS, generator=gen, dtype=torch.float64)))
    with torch.random.fork_rng(devices=[]):
        t_init = best_time(lambda: tf.LlamaForCausalLM(cfg), repeat=2)
    loads = _loads(tf, model)
    maps = _attention_maps(torch, dev, sync)
    array = _array_rate()
    return Rates(forward=forward, backward=backward, generate=generate, call_layer_s=overhead, kernel=kernel,
                 base_bytes=base, head=head, bandwidth=bandwidth, rng=rng, word_s=_word_s(),
                 init_ps=sum(p.numel() for p in model.parameters()) / max(1e-9, t_init), hash_bps=_hash_bps(),
                 **loads, **maps, array=array, fresh=fresh, stream=stream,
                 machine=machine_key(device), load=max(load, busy()))


def _loads(tf, model) -> dict[str, float]:
    """A model's load as :func:`bench.ground.costs.load_seconds` counts it: the weights of `model` beside a
    one-layer model's (their difference: bytes per second; the small one: the fixed part), and a byte-pair
    tokenizer splitting text (characters per second).  A tokenizer's own load is timed by the plan that reads it
    (:func:`bench.models.shapes.read`)."""
    tiny = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                              num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    bars = tf.utils.logging.is_progress_bar_enabled()
    tf.utils.logging.disable_progress_bar()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            times, sizes = [], []
            for i, m in enumerate((tiny, model)):
                where = os.path.join(tmp, f"model{i}")
                m.save_pretrained(where)
                sizes.append(_bytes(where, lambda f: f.endswith(".safetensors")))
                times.append(best_time(lambda: tf.AutoModelForCausalLM.from_pretrained(where), repeat=2))
    finally:
        if bars:
            tf.utils.logging.enable_progress_bar()
    tok = _tokenizer(tf, MERGES)
    texts = _words(200_000, seed=1)
    texts = [" ".join(texts[i: i + 100]) for i in range(0, len(texts), 100)]
    t_split = best_time(lambda: tok(texts), repeat=2)
    return {"load_fixed_s": times[0],
            "load_bps": (sizes[1] - sizes[0]) / max(1e-9, times[1] - times[0], 0.05 * times[1]),
            "tokenize": sum(len(t) for t in texts) / max(1e-9, t_split)}


MAPS = (16, 4, 48, 16)  # batch, heads, positions, head size of the attention timed (an attention-only toy's)


def _attention_maps(torch, dev, sync) -> dict[str, float]:
    """Attention probabilities formed per second by eager attention that keeps them: the scores' product, the
    scale, the causal mask, the softmax and the product with the values, without and with the backward pass.  At
    small widths these, not the FLOPs of the projections, take most of a layer's time (a 64-wide toy's
    training step: 13 ms a layer at one thread, two thirds of it on the maps)."""
    B, H, T, dh = MAPS
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, dh, generator=gen).to(dev).requires_grad_() for _ in range(3))
    future = torch.ones(T, T, dtype=torch.bool, device=dev).triu(1)

    def attend():
        p = (q @ k.transpose(-2, -1) / dh ** 0.5).masked_fill(future, float("-inf")).softmax(-1)
        return p @ v

    def forward():
        with torch.no_grad():
            attend()
        sync()

    def train():
        attend().sum().backward()
        sync()

    n = B * H * T * T
    return {"attention": n / max(1e-9, best_time(forward, warmup=True)),
            "attention_train": n / max(1e-9, best_time(train, warmup=True))}


SELECT_SHAPE = (8, 1 << 15)  # languages × neurons of the selection timed for the numpy rate


def _array_rate() -> float:
    """Float64 elements per second through numpy's passes, timed on what they are counted for: a selection of
    neurons by entropy over languages, counted as :func:`bench.ground.costs.selection_elements` counts it (the
    sum over K, the division, the masks, the log, the product and its sum, the negativity check, the partition
    for a bar, the comparison with it and its `any`, the masked entropies, and the argsort of the N entropies)."""
    import numpy as np

    k, n = SELECT_SHAPE
    x = np.random.default_rng(0).random((k, n))

    def select():
        total = x.sum(axis=0, keepdims=True)
        q = np.where(total > 0, x / total, 0.0)
        logq = np.where(q > 0, np.log(np.where(q > 0, q, 1.0)), 0.0)
        ent = -(q * logq).sum(axis=0)
        bool(np.any(x < 0))
        bar = np.partition(x.ravel(), x.size // 2)[x.size // 2]
        above = (x > bar).any(axis=0)
        np.argsort(np.where(above, ent, np.inf), kind="stable")

    return selection_elements(k, n) / max(1e-9, best_time(select, warmup=True))


def _bytes(folder: str, keep) -> int:
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if keep(f))


def _words(n: int, seed: int) -> list[str]:
    """`n` made-up lower-case words of 2–9 letters (seeded)."""
    import random

    r = random.Random(seed)
    return ["".join(r.choice("etaoinshrdlucmfw") for _ in range(r.randint(2, 9))) for _ in range(n)]


def _tokenizer(tf, n_merges: int):
    """A byte-pair tokenizer of `n_merges` merges over 26 letters (each merge joins two earlier tokens)."""
    import random

    from tokenizers import Tokenizer, models, pre_tokenizers

    r = random.Random(n_merges)
    vocab = {chr(c): c - ord("a") for c in range(ord("a"), ord("z") + 1)}
    merges, pieces = [], list(vocab)
    while len(merges) < n_merges:
        a, b = r.choice(pieces), r.choice(pieces)
        if a + b in vocab or len(a + b) > 10:
            continue
        vocab[a + b] = len(vocab)
        merges.append((a, b))
        pieces.append(a + b)
    vocab["<unk>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def _hash_bps() -> float:
    """Bytes per second of :func:`bench.corpora.parallel.digest_files` (a corpus's fingerprint) on 32 files."""
    from pathlib import Path

    from bench.corpora import parallel

    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"part{i}" for i in range(32)]
        for i, f in enumerate(files):
            f.write_bytes(bytes([i]) * (1 << 20))
        def cold() -> str:  # every file read and hashed, as the first fingerprint of a process does
            parallel._FILE_DIGESTS.clear()
            return parallel.digest_files(files)

        return 32 * (1 << 20) / max(1e-9, best_time(cold))


def _word_s() -> float:
    """Seconds per word of :func:`bench.corpora.tagged.detokenize`, which the corpora join words into text with."""
    from bench.corpora import tagged

    words = _words(ITEMS, seed=2)
    classes = ["other"] * len(words)
    return best_time(lambda: tagged.detokenize(words, classes)) / ITEMS
