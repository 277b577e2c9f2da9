"""Cost models of the language-neuron probes (:mod:`bench.ground.costs`).  They read the same split of the
same parallel corpus as the probes and batch its token counts with the probes' own batching
(:func:`.text.documents`, :func:`.text.batches`); shared statistics and bits are parts with the keys the
probes memoise them under, so a plan counts them once per model.  Every lookup of a shared result (its key holds
the corpus fingerprint, :meth:`.shared.Setup.data_parts`) and every split of the corpus fingerprints the corpus,
but its files are read and hashed once per process (:func:`bench.corpora.parallel.digest_files`): one shared
part per corpus (:func:`_fingerprint`)."""

from __future__ import annotations

import dataclasses

from bench import corpora
from bench.ground.costs import Cost, Planned, Work, cost_def, selection_elements
from bench.families.langneurons import shared
from bench.families.langneurons import text as tx
from bench.families.langneurons.probes import SELECTION, DeactivationParams, LayerParams, StatsParams
from bench.families.langneurons.steer_probes import SimilarityParams, SteerParams
from bench.models import costs as mc

WORST = "every neuron set counted as non-empty and distinct (an empty or repeated set is not run again)"


def _batched(seqs: list[list[int]], max_tokens: int, *, head: str = "none", backward: bool = False) -> Work:
    """Passes over the body in :func:`.text.batches`; `head`: "none", "real" (the next-token positions of real
    tokens, as :func:`.edit.token_nats`) or "all" (every position but the last, as PV's gradient)."""
    w = Work()
    for rows in tx.groups(seqs, max_tokens=max_tokens):
        T = max(len(seqs[r]) for r in rows)
        n = len(rows) * T
        h = sum(len(seqs[r]) - 1 for r in rows) if head == "real" else len(rows) * (T - 1) if head == "all" else 0
        if backward:
            w = w + Work(backward=n, backward_head=h, calls=1, context=T, grad_tokens=n, logit_rows=h)
        else:
            w = w + Work(forward=n, head=h, calls=1, context=T, batch_tokens=n, logit_rows=min(h, 256))
    return w


def _stats(m: Planned, setup: shared.Setup, sp, lang: str) -> tuple[str, Work]:
    docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=setup.doc_tokens,
                        budget=setup.selection_tokens)
    w = sum((_batched(docs[c::shared.CHUNKS], 2048) for c in range(shared.CHUNKS)), Work())
    return f"stats|{lang}|{setup}", w


def _pv(m: Planned, setup: shared.Setup, sp, lang: str) -> tuple[str, Work]:
    docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=min(setup.doc_tokens, setup.pv_tokens),
                        budget=setup.pv_tokens)
    # the gradient of every FFN weight is kept until the norms are read (no optimizer: nothing else per parameter)
    return f"pv|{lang}|{setup}", _batched(docs, 256, head="all", backward=True) + Work(
        grads=m.shape.n_layers * m.shape.ffn_params)


def _fingerprint(setup: shared.Setup) -> tuple[str, Work]:
    """The corpus's files read and hashed for its fingerprint: once per process, so one part per corpus (a plan
    of several models counts it once per model, a fraction of a second over)."""
    return f"fingerprint|{setup.corpus}", Work(hashed=corpora.fingerprint_bytes(setup.corpus))


def _arithmetic(m: Planned, sp, methods, split_halves: int = 0) -> Work:
    """Selecting from the cached statistics, which no cache holds, so every cell that selects does it: each
    language's CHUNKS chunks of three statistics read out of the cached frame and summed (L·F each), then one
    entropy selection per method (:func:`bench.ground.costs.selection_elements`; the other rules make fewer
    passes, each is counted so); each split of `split_halves` reads the chunks again (once per method), sums
    each half and selects on both halves."""
    n, k = m.shape.n_layers * m.shape.d_ff, len(sp.selection.languages)
    chunks = 2 * 3 * shared.CHUNKS * n * k
    select = selection_elements(k, n)
    halves = (chunks + split_halves * 2 * (3 * (shared.CHUNKS // 2) * n * k + select)) if split_halves else 0
    return Work(array=chunks + len(methods) * (select + halves))


def _selection(m: Planned, setup: shared.Setup, sp, methods, split_halves: int = 0) -> list[tuple[str, Work]]:
    langs = list(sp.selection.languages)
    parts = [_stats(m, setup, sp, lang) for lang in langs]
    if "pv" in methods:
        parts += [_pv(m, setup, sp, lang) for lang in langs]
    return parts + [(None, _arithmetic(m, sp, methods, split_halves))]


def _bits(m: Planned, setup: shared.Setup, sp, langs: list[str], label: str,
          micro_tokens: int) -> list[tuple[str, Work]]:
    """:func:`.shared.condition_bits`: cached per language and neuron set, so one part per language (the
    probe batches the languages it still needs together; counted apart, the padding differs a little)."""
    return [(f"bits|{label}|{lang}|{setup}",
             _batched([tx.encode(m.tokenizer, t) for t in sp.evaluation.side(lang)], micro_tokens, head="real"))
            for lang in langs]


@cost_def("activation_stats")
def activation_stats_cost(m: Planned, p: StatsParams) -> Cost:
    sp = shared.split(p.selection, m.seed)
    # without split halves, each language's selection is one exact row: the languages are the units
    return Cost((*_selection(m, p.selection, sp, p.methods, p.split_halves), _fingerprint(p.selection)),
                units=p.split_halves or len(sp.selection.languages),
                unit="split-half replicates" if p.split_halves else "languages")


@cost_def("layer_distribution")
def layer_distribution_cost(m: Planned, p: LayerParams) -> Cost:
    sp = shared.split(p.selection, m.seed)
    return Cost((*_selection(m, p.selection, sp, p.methods, p.split_halves), _fingerprint(p.selection)),
                units=p.split_halves or None, unit="split-half replicates")


@cost_def("deactivation")
def deactivation_cost(m: Planned, p: DeactivationParams) -> Cost:
    setup = p.selection
    sp = shared.split(setup, m.seed)
    langs = list(sp.evaluation.languages)
    methods = list(dict.fromkeys([*p.full, *p.diagonal]))
    parts = _selection(m, setup, sp, methods + ([p.sized_like] if p.sized_like else []))
    parts += _bits(m, setup, sp, langs, "none", p.micro_tokens)
    for meth in methods:
        sized = p.sized_like if meth in ("lap", "lave", "pv") else ""  # only these follow another set's sizes
        for x in langs:
            ys = langs if meth in p.full else [x]
            parts += _bits(m, setup, sp, ys, f"{meth}|{x}|{p.band}|{sized}", p.micro_tokens)
    parts.append(_fingerprint(setup))
    return Cost(tuple(parts), units=len(sp.evaluation.texts), unit="evaluation texts", notes=(WORST,))


@cost_def("steering")
def steering_cost(m: Planned, p: SteerParams) -> Cost:
    setup = p.selection
    sp = shared.split(setup, m.seed)
    langs = list(sp.evaluation.languages)
    targets = [t for t in (p.targets or langs) if t != p.source]
    prompts = [" ".join(t.split()[:p.prompt_words]) for t in sp.evaluation.side(p.source)[:p.n_prompts]] \
        if p.source in langs else []
    rows = [tx.encode(m.tokenizer, q) for q in prompts]
    W = max((len(r) for r in rows), default=1)
    one = mc._steps(len(rows), W, [p.max_new_tokens] * len(rows), 0) if rows else Work()
    parts = _selection(m, setup, sp, [p.method]) + [(None, one.times(1 + len(targets))),
                                                     _fingerprint(setup)]
    return Cost(tuple(parts), units=len(prompts), unit="prompts",
                notes=("every generation counted at its whole token budget", WORST))


@cost_def("crosslingual_similarity")
def similarity_cost(m: Planned, p: SimilarityParams) -> Cost:
    setup = dataclasses.replace(SELECTION, **dataclasses.asdict(p.texts), selection_tokens=8, doc_tokens=8,
                                pv_tokens=8)
    sp = shared.split(setup, m.seed)
    n = min(p.n_texts, len(sp.evaluation.texts))
    w = sum((_batched([tx.encode(m.tokenizer, t) for t in sp.evaluation.side(lang)[:n]], p.micro_tokens)
             for lang in sp.evaluation.languages), Work())
    return Cost(((None, w), _fingerprint(setup)), units=n, unit="parallel texts")
