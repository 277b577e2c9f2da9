"""Cross-check of the circuits family's head scores against TransformerLens' head detector.

The model is a tiny random GPT-2 built here (no hub), saved as a checkpoint folder with a word-level tokenizer
(token ``i`` is the word ``w{i}``, so a sequence of ids and its text map onto each other exactly).  bench runs it
as the ``induction`` probe does (:func:`bench.families.circuits.lm.repeat_head_scores`); TransformerLens wraps the
same folder in a TransformerBridge with HookedTransformer-equivalent weight processing and runs
``transformer_lens.head_detector.detect_head``.  (TransformerLens 4 removed HookedTransformer and its GPT-2 weight
converters; a bridge in compatibility mode is what it offers instead, and it computes with weights of its own
processing, so equal patterns are a check, not a tautology.)  The peer runs in this interpreter or in
``$PYTHON_PEERS`` (see ``_peer.py``); without it the tests skip.

What the two scores are, on one sequence of ``T = 2L`` tokens (``L`` random tokens repeated once, no BOS) and one
head's attention pattern ``A`` (query i, key j; every row sums to 1):

* TransformerLens, error measure "mul", nothing excluded: ``Σ_ij A[i, j] · P[i, j] / Σ_ij A[i, j]`` for a 0/1
  detection pattern ``P``.  The denominator is the sum of the whole pattern, ``T``.
  - previous-token head: ``P[i, i-1] = 1`` for ``i ≥ 1``;
  - induction head: ``P[i, j] = 1`` where the token before key ``j`` equals the query's token and comes before it;
    when the ``L`` tokens of a copy are distinct, these are exactly the keys ``i - L + 1`` of the second-copy
    queries ``i ∈ [L, 2L)``;
  - duplicate-token head: keys holding the query's token, earlier.  bench has no such score: not compared.
* bench: the mean of the same entries over the queries that have one: previous-token over the ``T - 1`` queries
  ``i ≥ 1``, induction over the ``L`` second-copy queries.

So, for sequences whose copies have distinct tokens, ``TL_prev = bench_prev · (T - 1) / T`` and
``TL_induction = bench_induction · L / T = bench_induction / 2``: TransformerLens spreads the same attention over
all ``T`` rows, bench over the rows that can score.  The tests assert these identities.  (The detector's "abs"
measure, ``1 − mean |A − P| · T`` rounded to 3 decimals, has no bench counterpart and is not compared.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.families.circuits import attention_metrics as am
from bench.families.circuits.lm import candidate_ids, repeat_head_scores
from bench.models.hooks import attention_implementation

_spec = importlib.util.spec_from_file_location("bench_tests_peer", Path(__file__).with_name("_peer.py"))
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)

VOCAB, PERIOD, N_SEQ, SEED = 1000, 12, 4, 0
# Float32 attention computed along two paths (transformers' eager attention on the raw weights; the bridge with
# folded layer norms and centred weights) differs by up to ~2e-6 per entry here (the sharp heads have large
# logits), the log-probabilities by ~1e-5: PATTERN_TOL and LOGPROB_TOL allow for that rounding.  A score is a mean
# of pattern entries and agrees to ~1e-7; SCORE_TOL = 1e-5 leaves room for rounding and none for a different
# definition: an off-by-one key moves a score by ~1e-2 here.
PATTERN_TOL, LOGPROB_TOL, SCORE_TOL = 5e-5, 1e-4, 1e-5


def _word_tokenizer():
    """Token i is the word ``w{i}``, id 0 is ``<bos>`` (also eos and unk); whitespace separates words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, **{f"w{i}": i for i in range(1, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<bos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<bos>", unk_token="<bos>")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, one_thread) -> Path:
    """A 2-layer, 4-head, d_model 64 GPT-2 with random weights, saved with its tokenizer.

    initializer_range 0.2 (not GPT-2's 0.02) makes the random heads attend sharply and differently from each
    other (mean top attention ≈ 0.56 instead of ≈ 0.16), so the scores differ from head to head."""
    import transformers as tf

    torch.manual_seed(SEED)
    cfg = tf.GPT2Config(vocab_size=VOCAB, n_layer=2, n_head=4, n_embd=64, n_positions=64, initializer_range=0.2,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # layer-norm scales and biases away from 1 and 0, so folding them is exercised
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(0.3 * torch.randn_like(p))
    d = tmp_path_factory.mktemp("tiny-gpt2")
    model.save_pretrained(d)
    _word_tokenizer().save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def both(gpt2_dir):
    """bench's scores and TransformerLens' detector output on the same repeated random sequences."""
    from bench import models

    peer.require("transformer_lens")  # skip before building anything when the peer is nowhere
    loaded = models.load(models.resolve(str(gpt2_dir)), "cpu")
    # The ids repeat_head_scores draws from this seed (it draws them the same way, from a fresh generator).
    ids = am.repeated_random_tokens(candidate_ids(loaded.tokenizer, VOCAB), N_SEQ, PERIOD,
                                    torch.Generator().manual_seed(SEED))
    for row in ids:  # the identities in the module docstring need distinct tokens within a copy
        assert len(set(row[:PERIOD].tolist())) == PERIOD, "pick another SEED: a copy repeats a token"
    ours = repeat_head_scores(loaded, seq_len=PERIOD, n_seq=N_SEQ, batch=N_SEQ,
                              generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad(), attention_implementation(loaded.hf, "eager"):  # as the probe reads its patterns
        out = loaded.hf(input_ids=ids, output_attentions=True, use_cache=False)
    hf_patterns = torch.stack([a.float() for a in out.attentions], dim=1).numpy()  # (N, layers, H, T, T)
    hf_logprobs = torch.log_softmax(out.logits.float(), dim=-1).numpy()
    tl = peer.run("tl_head_scores", model_dir=str(gpt2_dir), ids=ids.numpy())
    return {"ids": ids.numpy(), "ours": ours, "hf_patterns": hf_patterns, "hf_logprobs": hf_logprobs, "tl": tl}


def _tl(both, head: str) -> np.ndarray:
    return both["tl"]["scores"][:, peer.HEAD_TYPES.index(head)]  # (N, layers, heads)


def test_the_bridge_runs_the_same_model(both):
    """Same tokens, same next-token distributions and the same attention patterns as plain transformers."""
    tl = both["tl"]
    np.testing.assert_array_equal(tl["tokens"], both["ids"])  # the text round trip kept every id, no BOS added
    np.testing.assert_allclose(tl["logprobs"], both["hf_logprobs"], atol=LOGPROB_TOL)
    np.testing.assert_allclose(tl["patterns"], both["hf_patterns"], atol=PATTERN_TOL)
    assert tl["patterns"].max() > 0.9  # sharp heads, not near-uniform ones


def test_bench_kernels_on_transformer_lens_patterns(both):
    """bench's two kernels, given the patterns TransformerLens cached, reproduce its detector's scores."""
    tl = both["tl"]
    pats = torch.from_numpy(tl["patterns"])  # (N, layers, H, T, T)
    N, Ly, H, T, _ = pats.shape
    flat = pats.reshape(N * Ly, H, T, T)
    prev = am.previous_token_scores(flat).reshape(N, Ly, H).numpy()
    ind = am.induction_scores(flat, PERIOD).reshape(N, Ly, H).numpy()
    total = tl["patterns"].sum(axis=(-2, -1))  # the detector's denominator, T up to rounding
    np.testing.assert_allclose(prev * (T - 1) / total, _tl(both, "previous_token_head"), atol=SCORE_TOL)
    np.testing.assert_allclose(ind * PERIOD / total, _tl(both, "induction_head"), atol=SCORE_TOL)


def test_bench_probe_scores_match_the_detector(both):
    """The induction probe's per-sequence scores (bench's own model pass) against the detector's, per head."""
    ours, T = both["ours"], 2 * PERIOD
    prev, ind = ours["prev_token"], ours["induction"]  # (N, layers, heads)
    assert prev.shape == _tl(both, "previous_token_head").shape == (N_SEQ, 2, 4)
    np.testing.assert_allclose(prev * (T - 1) / T, _tl(both, "previous_token_head"), atol=SCORE_TOL)
    np.testing.assert_allclose(ind * PERIOD / T, _tl(both, "induction_head"), atol=SCORE_TOL)
    assert np.ptp(prev) > 0.05 and np.ptp(ind) > 0.05  # the heads differ: the comparison is not of constants
