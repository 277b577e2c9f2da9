"""Cost models of the LLM-Microscope probes (:mod:`bench.ground.costs`), on the same tagged and tokenised
texts the probes read (:func:`.layerpass.prepare_items`) and their micro-batches."""

from __future__ import annotations

from bench.ground.costs import Cost, Planned, Work, cost_def
from bench.corpora.tagged import questions
from bench.families.microscope.context_probe import ContextParams, PairParams, full_prefix_examples
from bench.families.microscope.layerpass import KEEP_BYTES, Sample, prepare_items
from bench.families.microscope.probes import IntrinsicParams
from bench.families.microscope.qa import CONDITIONS, capital_facts, prompt, stop_words
from bench.models import costs as mc


_PREPARED: dict[tuple, list] = {}  # tagging and tokenising is most of a plan's time: once per tokenizer and text


def _items(m: Planned, s: Sample, n_texts: int | None = None):
    key = (id(m.tokenizer), s.corpus, s.n_texts if n_texts is None else n_texts, s.max_tokens)
    held = _PREPARED.get(key)
    if held is None or held[0] is not m.tokenizer:  # the tokenizer itself is kept, so its id is not reused
        if len(_PREPARED) > 32:
            _PREPARED.clear()
        held = _PREPARED[key] = (m.tokenizer, prepare_items(m.tokenizer, s.corpus, key[2], s.max_tokens))
    return held[1]


def _body(items, micro: int, *, logits: bool = False) -> list[Work]:
    """One :func:`.layerpass.block_states` per micro-batch of `items` (right-padded): the body alone, or the
    whole model with logits at every position."""
    out = []
    for i in range(0, len(items), micro):
        group = items[i: i + micro]
        T = max(len(it.ids) for it in group)
        n = len(group) * T
        out.append(Work(forward=n, head=n if logits else 0, calls=1, context=T, batch_tokens=n,
                        logit_rows=n if logits else 0))
    return out


def layer_pass_work(m: Planned, s: Sample) -> tuple[str, Work]:
    """:func:`.layerpass.layer_pass`: pass 1 over every batch (Gram sums), pass 2 again over the batches whose
    states pass 1 could not keep; float64 Gram and cross matrices per layer for all tokens and the odd half."""
    sh = s.checked()
    items = _items(m, sh)
    L, d = m.shape.n_layers, m.shape.d_model
    passes = _body(items, sh.micro_batch)
    w, kept = Work(), 0
    for k, b in enumerate(passes):
        group = items[k * sh.micro_batch: (k + 1) * sh.micro_batch]
        size = sum(int(it.usable.sum()) for it in group) * (L + 1) * d * 4
        w = w + b + (Work() if kept + size <= KEEP_BYTES else b)
        kept += size if kept + size <= KEEP_BYTES else 0
    n_tok = sum(int(it.usable.sum()) for it in items)
    grams = 2 * (2 * L + 1) * d * d * 8
    w = w + Work(flops=n_tok * (L + 1) * d * d * 12.0 + 4 * L * d ** 3, extra_bytes=grams + kept)
    return f"layer_pass|{s.corpus}|{s.n_texts}|{s.max_tokens}", w


@cost_def("nonlinearity")
def nonlinearity_cost(m: Planned, p: Sample) -> Cost:
    return Cost((layer_pass_work(m, p),), units=p.n_texts, unit="texts")


@cost_def("centrality")
def centrality_cost(m: Planned, p: Sample) -> Cost:
    return Cost((layer_pass_work(m, p),), units=p.n_texts, unit="texts")


@cost_def("intrinsic_dimension")
def intrinsic_cost(m: Planned, p: IntrinsicParams) -> Cost:
    """The shared pass, then the first batches again until `id_points` tokens, and TwoNN's neighbour search
    (n² distances per layer)."""
    s = p.sample
    items = _items(m, s)
    w, count = Work(), 0
    for k, b in enumerate(_body(items, s.micro_batch)):
        w = w + b
        count += sum(int(it.usable.sum()) for it in items[k * s.micro_batch: (k + 1) * s.micro_batch])
        if count >= p.id_points:
            break
    n, L, d = min(count, p.id_points), m.shape.n_layers, m.shape.d_model
    w = w + Work(flops=(L + 1) * 3.0 * n * n * d, extra_bytes=n * n * 8 + (L + 1) * n * d * 4)
    return Cost((layer_pass_work(m, s), (None, w)), units=None, unit="layers")


@cost_def("logit_lens")
def logit_lens_cost(m: Planned, p: Sample) -> Cost:
    """The whole model on every batch, then every layer's states of the scored positions through the head twice
    (the paper's lens and the authors' code's)."""
    items = _items(m, p.checked())
    w = sum(_body(items, p.micro_batch, logits=True), Work())
    scored = sum(len([q for q, ok in enumerate(it.usable) if ok and q + 1 < len(it.ids)]) for it in items)
    w = w + Work(head=2 * (m.shape.n_layers + 1) * scored)
    return Cost(((None, w),), units=len(items), unit="texts")


@cost_def("question_shift")
def question_shift_cost(m: Planned, *, corpus: str, n_texts: int, suffix: str, eps: float) -> Cost:
    w = Work()
    qs = questions(corpus, n_texts)
    for q in qs:
        for text in (q, q + suffix):
            T = len(m.tokenizer(text)["input_ids"])
            w = w + Work(forward=T, calls=1, context=T, batch_tokens=T)
    return Cost(((None, w),), units=len(qs), unit="questions")


@cost_def("token_removal")
def token_removal_cost(m: Planned, *, n_questions: int, n_demos: int, max_new_tokens: int, micro_batch: int) -> Cost:
    demos, facts = capital_facts(n_questions, n_demos)
    stops = stop_words()
    w = sum((mc.decode(m.tokenizer, [prompt(demos, f, c, stops) for f in facts], max_new_tokens,
                       micro_batch=micro_batch, window=m.shape.window) for c in CONDITIONS), Work())
    return Cost(((None, w),), units=len(facts), unit="questions",
                notes=("each answer counted at its whole token budget",))


def decoder_bytes(shape, frac: float, vocab: int, width: int) -> int:
    """One prefix decoder, the only one alive at a time (each is scored as its training ends, then let go): the LM
    copy's share `frac` of the blocks in the model's dtype (`width` bytes), and the head's rows for the softmax's
    `vocab` ids, with the float32 copy each product makes of them when the model is not float32."""
    return int(frac * shape.block_params * width) + vocab * shape.d_model * (width + (4 if width != 4 else 0))


def _measure(m: Planned, p: ContextParams, who: str) -> list[tuple[str | None, Work]]:
    """:func:`.context_probe.measure`: the shared pass, the states of the training and scored texts, and three
    decoders trained `steps` steps of `batch` examples (a LoRA copy of `decoder_layers` blocks reading
    prefix + 1 positions, or readouts through the head), each scored on the held-out examples."""
    s, cfg = p.sample, p.decoder
    items = _items(m, s, s.n_texts + p.n_train)
    train = [it for it in items if it.sample >= s.n_texts]
    evals = [it for it in items if it.sample < p.n_eval]
    k = cfg.prefix
    examples = {id(it): full_prefix_examples(it, k) for it in train + evals}
    n_test = sum(len(examples[id(it)]) for it in evals)
    vocab = (len({t for ex in examples.values() for _, pre in ex for t in pre}) if cfg.vocab == "corpus"
             else m.shape.vocab)  # the softmax's ids: those of the prefixes, as the probe takes them
    share = vocab / m.shape.vocab
    L = m.shape.n_layers
    frac = (cfg.decoder_layers or L) / L if cfg.reader == "lm" else 0.0
    rows = cfg.batch * (k + 1)
    heads = int(cfg.batch * k * share)  # head rows, in units of the whole vocabulary
    # the head is frozen: its backward pass is one more product of its size (no weight gradient), so a step
    # costs two head products, counted as head positions; the blocks of an LM copy run forward and back.  Only
    # the LM copy is a model call; the readouts are the encoder and a slice of the head (no block runs)
    lm = cfg.reader == "lm"
    d, hidden = m.shape.d_model, cfg.hidden or m.shape.d_model
    out = d if lm else k * d  # the encoder's output: one input embedding, or k vectors read through the head
    encoder = 2.0 * ((L + 1) * d * 3 + d * hidden + hidden * out)  # standardise and pool, then the MLP, per example
    step = Work(backward=int(rows * frac), head=2 * heads, calls=int(lm), steps=1, context=k + 1,
                flops=3 * cfg.batch * encoder, grad_tokens=int(rows * frac), logit_rows=heads,
                trainable=int(mc.lora_params(m.shape, "all", cfg.lora_rank) * frac if lm else 0)
                + (d + 1) * hidden + (hidden + 1) * out + L + 1)
    score = Work(forward=int(n_test * (k + 1) * frac), head=int(n_test * k * share), flops=n_test * encoder,
                 calls=-(-n_test // cfg.eval_batch) if lm else 0)
    states = sum(_body(train, s.micro_batch) + _body(evals, s.micro_batch), Work())
    pool = (sum(len(full_prefix_examples(it, k)) for it in train) + n_test) * (L + 1) * m.shape.d_model * 4
    trainings = (step.times(cfg.steps).times(3) + score.times(4)).times(p.decoder_runs)
    own = states + Work(extra_bytes=pool + decoder_bytes(m.shape, frac, vocab, m.dtype_bytes)) + trainings
    key, shared_pass = layer_pass_work(m, s)
    return [(key if who == "self" else f"{who}|{key}", shared_pass), (None, own)]


@cost_def("contextualization")
def contextualization_cost(m: Planned, p: ContextParams) -> Cost:
    return Cost(tuple(_measure(m, p, "self")), units=p.n_eval, unit="scored texts")


@cost_def("context_pair")
def context_pair_cost(m: Planned, p: PairParams) -> Cost:
    pair = any(m.name in (b, i) for b, i in (p.instruct_of or {}).items())
    if not pair:  # no counterpart: the probe returns an empty frame at once
        return Cost(((None, Work()),), units=None, unit="scored texts")
    return Cost(tuple(_measure(m, p, "self") + _measure(m, p, "counterpart")), units=p.n_eval, unit="scored texts",
                notes=("the counterpart is counted with this model's shape",))
