"""Cost models of the circuits probes (:mod:`bench.ground.costs`), each mirroring its probe's loops."""

from __future__ import annotations

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


@cost_def("k_composition")
def k_composition_cost(m: Planned, p: CompositionParams) -> Cost:
    """The shared head scores, then (worst case: the top induction head in the last layer) a composition score
    for every head of every earlier layer and `n_baseline` draws of each baseline; each score is a few
    d × d_head products in float64."""
    s = m.shape
    dh, d = s.head_dim, s.d_model
    per_score = 6.0 * d * dh * dh
    scores = (s.n_layers - 1) * s.n_heads + 2 * p.n_baseline
    draws = p.n_baseline * 4 * d * dh  # Gaussian factors drawn for the random baseline
    return Cost((repeats_work(m, p.repeats.seq_len, p.repeats.batch),
                 (None, Work(flops=scores * per_score + draws, extra_bytes=4 * d * dh * 8 * s.n_heads))),
                units=p.n_baseline, unit="baseline draws",
                notes=("worst case: the top induction head in the last layer",))


def _toy_flops(vocab: int, width: int, heads: int, layers: int, T: int) -> float:
    """Forward FLOPs of one sequence of T tokens through the attention-only toy."""
    return T * (layers * (8.0 * width * width + 4.0 * width * T) + 2.0 * width * vocab)


@cost_def("toy_composition")
def toy_composition_cost(m: Planned, p: ToyParams) -> Cost:
    """Per training run (cached per seed): a 1-layer and a 2-layer toy trained `toy_steps` steps of `toy_batch`
    sequences (forward and backward: 3 × the forward FLOPs), then scored on `toy_eval` sequences; and the
    model's own head scores on the shared repeated sequences."""
    T = 2 * p.toy_period
    parts = []
    for r in range(p.toy_runs):
        flops = 0.0
        for layers in (1, 2):
            flops += 3 * p.toy_steps * p.toy_batch * _toy_flops(p.toy_vocab, p.toy_width, p.toy_heads, layers, T - 1)
            flops += p.toy_eval * _toy_flops(p.toy_vocab, p.toy_width, p.toy_heads, layers, T)
        trainable = 2 * (p.toy_vocab + T) * p.toy_width + 2 * 4 * p.toy_width ** 2
        key = (f"global|toy|{m.seed + r}|{p.toy_vocab}|{p.toy_width}|{p.toy_heads}|{p.toy_period}|{p.toy_steps}|"
               f"{p.toy_batch}|{p.toy_eval}")
        parts.append((key, Work(flops=flops, steps=2 * p.toy_steps, trainable=trainable // 2,
                                extra_bytes=p.toy_batch * T * (p.toy_vocab + 2 * p.toy_heads * T) * 4 * 3)))
    parts.append(repeats_work(m, p.repeats.seq_len, p.repeats.batch))
    return Cost(tuple(parts), units=p.toy_runs, unit="training runs")


@cost_def("norm_folding")
def norm_folding_cost(m: Planned, *, corpus: str, n_texts: int, max_tokens: int) -> Cost:
    """A folded float32 copy of the model; each of the first `n_texts` texts (cut at `max_tokens`) runs once
    through the original and once through the copy, logits at every position."""
    texts = corpora.load(corpus)[:n_texts]
    w = Work(extra_bytes=m.shape.n_params * 4 * (1 if m.dtype_bytes == 4 else 2))
    for t in texts:
        T = len(m.tokenizer(t, truncation=True, max_length=max_tokens)["input_ids"])
        w = w + Work(forward=2 * T, head=2 * T, calls=2, context=T, batch_tokens=T, logit_rows=2 * T)
    return Cost(((None, w),), units=len(texts), unit="texts")


@cost_def("direct_path_bigrams")
def direct_path_cost(m: Planned, *, corpus: str, n_texts: int, n_first: int, top_k: int) -> Cost:
    """No block runs: the embedding, the final norm and the head of at most `n_first` tokens (the bigram count
    over the texts is tokenizer work, not counted)."""
    n = min(n_first, m.shape.vocab)
    return Cost(((None, Work(head=n, logit_rows=n)),), units=n, unit="first tokens",
                notes=("at most n_first first tokens (fewer when fewer have top_k distinct followers)",))
