"""Cost models of the circuits probes (:mod:`bench.ground.costs`), each mirroring its probe's loops."""

from __future__ import annotations

import re

from bench import corpora
from bench.ground.costs import Cost, Planned, Work, cost_def
from bench.families.circuits.composition import CompositionParams
from bench.families.circuits.lm import Repeats, micro_batch
from bench.families.circuits.toy_composition import ToyParams


def repeats_work(m: Planned, seq_len: int, n_seq: int, micro: int = 8) -> tuple[str, Work]:
    """:func:`bench.families.circuits.lm.repeat_scores_memo`: `n_seq` sequences of 2·`seq_len` tokens in
    micro-batches capped by the logit budget, logits at every position, every layer's attention kept."""
    s = m.shape
    T = 2 * seq_len
    mb = micro_batch(T, s.vocab, micro)
    w = Work()
    for start in range(0, n_seq, mb):
        b = min(mb, n_seq - start)
        w = w + Work(forward=b * T, head=b * T, calls=1, context=T, batch_tokens=b * T, logit_rows=b * T,
                     attention_maps=b * s.n_layers * s.n_heads * T * T * 2)
    return f"repeat_head_scores|{seq_len}|{n_seq}", w


@cost_def("induction")
def induction_cost(m: Planned, p: Repeats) -> Cost:
    return Cost((repeats_work(m, p.seq_len, p.batch),), units=p.batch, unit="sequences")


def fro_flops(d: int, r: int, s: int) -> float:
    """FLOPs of :func:`.composition.lowrank_fro` on A (d, r), M (r, s), C (d, s): the Gram matrices AᵀA and CᵀC,
    then Mᵀ·G_A·M·G_C."""
    return 2.0 * d * r * r + 2.0 * d * s * s + 2.0 * (s * r * r + s * r * s + s * s * s)


def score_flops(d: int, dh: int) -> float:
    """FLOPs of one :func:`.composition.k_composition_score`: W_O·W_K, then three low-rank norms."""
    return 2.0 * dh * d * dh + 3 * fro_flops(d, dh, dh)


@cost_def("k_composition")
def k_composition_cost(m: Planned, p: CompositionParams) -> Cost:
    """The shared head scores, then (worst case: the top induction head in the last layer) the loops of
    :func:`.composition.k_composition`: a score for every head of every earlier layer; `n_baseline` Gaussian
    draws of four factor matrices, each scored; `n_baseline` permutations of the d residual coordinates, each
    one product and one low-rank norm (the two norms once).  Scores are float64 products (kernel FLOPs); the
    draws are random numbers at the generator's rate (a permutation draws d of them)."""
    s = m.shape
    dh, d = s.head_dim, s.d_model
    candidates = (s.n_layers - 1) * s.n_heads
    flops = (candidates + p.n_baseline) * score_flops(d, dh) \
        + 2 * fro_flops(d, dh, dh) + p.n_baseline * (2.0 * dh * d * dh + fro_flops(d, dh, dh))
    drawn = p.n_baseline * 4 * d * dh + p.n_baseline * d
    return Cost((repeats_work(m, p.repeats.seq_len, p.repeats.batch),
                 (None, Work(flops=flops, drawn=drawn, extra_bytes=4 * d * dh * 8 * s.n_heads))),
                units=p.n_baseline, unit="baseline draws",
                notes=("worst case: the top induction head in the last layer",))


def _toy_flops(vocab: int, width: int, heads: int, layers: int, T: int) -> float:
    """Forward FLOPs of one sequence of T tokens through the attention-only toy."""
    return T * (layers * (8.0 * width * width + 4.0 * width * T) + 2.0 * width * vocab)


@cost_def("toy_composition")
def toy_composition_cost(m: Planned, p: ToyParams) -> Cost:
    """Per training run (cached per seed): a 1-layer and a 2-layer toy trained `toy_steps` steps of `toy_batch`
    sequences (forward and backward: 3 × the forward FLOPs, and every head's attention probabilities formed and
    differentiated), then scored on `toy_eval` sequences; and the model's own head scores on the shared repeated
    sequences."""
    T = 2 * p.toy_period
    parts = []
    for r in range(p.toy_runs):
        flops, maps, trained = 0.0, 0, 0
        for layers in (1, 2):
            flops += 3 * p.toy_steps * p.toy_batch * _toy_flops(p.toy_vocab, p.toy_width, p.toy_heads, layers, T - 1)
            flops += p.toy_eval * _toy_flops(p.toy_vocab, p.toy_width, p.toy_heads, layers, T)
            # every layer's heads form (and keep, for the scores) T × T probabilities per sequence
            trained += p.toy_steps * p.toy_batch * layers * p.toy_heads * (T - 1) ** 2
            maps += p.toy_eval * layers * p.toy_heads * T * T
        trainable = 2 * (p.toy_vocab + T) * p.toy_width + 2 * 4 * p.toy_width ** 2
        key = (f"global|toy|{m.seed + r}|{p.toy_vocab}|{p.toy_width}|{p.toy_heads}|{p.toy_period}|{p.toy_steps}|"
               f"{p.toy_batch}|{p.toy_eval}")
        parts.append((key, Work(flops=flops, maps=maps, maps_trained=trained, steps=2 * p.toy_steps,
                                trainable=trainable // 2,
                                extra_bytes=p.toy_batch * T * (p.toy_vocab + 2 * p.toy_heads * T) * 4 * 3)))
    parts.append(repeats_work(m, p.repeats.seq_len, p.repeats.batch))
    return Cost(tuple(parts), units=p.toy_runs, unit="training runs")


@cost_def("norm_folding")
def norm_folding_cost(m: Planned, *, corpus: str, n_texts: int, max_tokens: int) -> Cost:
    """A folded float32 copy of the model (written into fresh memory: at 1 B parameters its 4.7 GB take longer to
    fault in than the texts take to run); each of the first `n_texts` texts (cut at `max_tokens`) runs once
    through the original and once through the copy, logits at every position."""
    texts = corpora.load(corpus)[:n_texts]
    # the float32 copy that is folded, its tied head untied into a matrix of its own (a run in another dtype also
    # makes a float32 copy of the original)
    copy = (m.shape.n_params + (m.shape.head_params if m.shape.tied else 0)) * 4
    copies = copy * (1 if m.dtype_bytes == 4 else 2)
    # the fold: every consumer's weight scaled in place (read and written) and read once more for its shift
    w = Work(extra_bytes=copies, fresh=copies, streamed=3 * copy)
    for t in texts:
        T = len(m.tokenizer(t, truncation=True, max_length=max_tokens)["input_ids"])
        w = w + Work(forward=2 * T, head=2 * T, calls=2, context=T, batch_tokens=T, logit_rows=2 * T)
    return Cost(((None, w),), units=len(texts), unit="texts")


WORD = re.compile(r"""[\w'"]+|[^\s\w'"]+""")
_WORDS: dict[str, tuple[tuple[int, ...], int]] = {}  # corpus → (its texts' lengths, its words), once a process


def corpus_words(corpus: str) -> tuple[tuple[int, ...], int]:
    """The characters of each text `corpus` loads and the words its loader joins into running text to make them
    (every text it returns, not only those a probe keeps: the loader builds them all); the counts alone are kept,
    not the texts.  A word is a run of letters, digits,
    apostrophes and quotes, or a run of other marks: punctuation is a word of its own, as the corpora's word lists
    have it (the Brown corpus: 1,161,034 counted so against the 1,158,967 its loader joins)."""
    if corpus not in _WORDS:
        texts = corpora.load(corpus)
        _WORDS[corpus] = (tuple(len(t) for t in texts), sum(len(WORD.findall(t)) for t in texts))
    return _WORDS[corpus]


@cost_def("direct_path_bigrams")
def direct_path_cost(m: Planned, *, corpus: str, n_texts: int, n_first: int, top_k: int) -> Cost:
    """No block runs: the embedding, the final norm and the head of at most `n_first` tokens.  Before it, the
    corpus is built (its loader joins every word of it into running text) and the first `n_texts` texts run
    through the tokenizer (their characters); the bigram count itself is numpy work on the ids, not counted."""
    n = min(n_first, m.shape.vocab)
    lengths, words = corpus_words(corpus)
    chars = sum(lengths[:n_texts])
    return Cost(((None, Work(head=n, logit_rows=n, chars=chars, words=words)),), units=n, unit="first tokens",
                notes=("at most n_first first tokens (fewer when fewer have top_k distinct followers)",))
