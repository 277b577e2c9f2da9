"""The direct path: a hand-built model whose W_U·W_E is a known bigram table gives ρ = 1 (and a broken one
does not), and the direct-path logits equal a plain transformers forward pass of the same model without blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.circuits import direct_path as dp
from bench.models import arch as arch_mod
from tests.conftest import build_tiny

V = 24


def _counts(seed: int = 0) -> np.ndarray:
    """A bigram count table with distinct counts in every row (so ranks are exact)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(V) + 1 for _ in range(V)]).astype(np.int64)  # (V, V), C[a, b]


def _corpus(C: np.ndarray) -> list[list[int]]:
    """Sequences whose adjacent pairs are exactly C[a, b] copies of (a, b)."""
    return [[a, b] for a in range(V) for b in range(V) for _ in range(int(C[a, b]))]


def _bigram_model(C: np.ndarray):
    """A Llama whose direct path is log P(b | a) up to a positive scale per row: W_E = I (d = V), γ = 1,
    W_U = log P (rows: next token)."""
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=V, hidden_size=V, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=8, tie_word_embeddings=False)
    model = tf.LlamaForCausalLM(cfg).eval()
    logp = np.log(C / C.sum(1, keepdims=True))  # (a, b)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(V))
        model.model.norm.weight.fill_(1.0)
        model.lm_head.weight.copy_(torch.tensor(logp.T, dtype=torch.float32))  # logits_b = Σ_a W[b, a] x_a
    return model


def _rhos(model, C: np.ndarray, top_k: int = 10) -> np.ndarray:
    chosen = dp.top_bigrams(*dp.bigram_counts(_corpus(C), V), n_first=V, top_k=top_k)
    ids = torch.tensor([a for a, *_ in chosen])
    arch = arch_mod.inspect(model)
    logp = torch.log_softmax(dp.direct_logits(model, arch, ids), -1).numpy()
    rows = dp.spearman_rows(logp, chosen)
    return np.array([r[4] for r in rows if r[3] == "spearman"])


def test_bigram_counts_pair_each_token_with_the_next_within_each_sequence_only():
    """Known answer: (1, 3) three times, (3, 1) twice; a one-token sequence adds nothing, and no pair spans two
    sequences ((1, 2) and (2, 1) would)."""
    first, nxt, counts = dp.bigram_counts([[3, 1, 3, 1], [2], [1, 3], [1, 3]], 4)
    assert first.tolist() == [1, 3] and nxt.tolist() == [3, 1] and counts.tolist() == [3, 2]
    for seqs in ([], [[5]], [[5], [6]]):  # no pair at all: three empty integer arrays
        out = dp.bigram_counts(seqs, 8)
        assert [(a.shape, a.dtype) for a in out] == [((0,), np.int64)] * 3


def test_a_first_token_needs_at_least_top_k_distinct_followers():
    """Known answer: token 1 has exactly 2 followers (eligible at top_k = 2), token 0 one (not), token 2 three;
    by total count 2 (4) before 1 (3); next tokens most frequent first, ties by id."""
    first, nxt, counts = np.array([0, 1, 1, 2, 2, 2]), np.array([1, 0, 2, 0, 1, 3]), np.array([9, 2, 1, 1, 2, 1])
    chosen = dp.top_bigrams(first, nxt, counts, n_first=5, top_k=2)
    assert [(a, total, list(b)) for a, total, b, _ in chosen] == [(2, 4, [1, 0]), (1, 3, [0, 2])]
    np.testing.assert_allclose(chosen[1][3], np.log([2 / 3, 1 / 3]))


def test_counts_and_top_bigrams_are_exact():
    C = _counts()
    chosen = dp.top_bigrams(*dp.bigram_counts(_corpus(C), V), n_first=5, top_k=4)
    totals = C.sum(1)
    assert [a for a, *_ in chosen] == list(np.argsort(-totals, kind="stable")[:5])
    a, total, nxt, emp = chosen[0]
    assert total == totals[a] and list(nxt) == list(np.argsort(-C[a])[:4])
    np.testing.assert_allclose(emp, np.log(C[a, nxt] / totals[a]))


def test_known_bigram_model_gives_rho_one_and_a_broken_one_does_not(one_thread):
    C = _counts()
    model = _bigram_model(C)
    rho = _rhos(model, C)
    assert len(rho) == V and np.allclose(rho, 1.0)
    with torch.no_grad():  # break the path: the head's rows no longer belong to their tokens
        model.lm_head.weight.copy_(model.lm_head.weight[torch.randperm(V, generator=torch.Generator().manual_seed(1))])
    assert _rhos(model, C).mean() < 0.5


@pytest.mark.parametrize("family", ["llama", "gemma3", "phi3", "bloom"])
def test_direct_logits_equal_a_plain_forward_without_blocks(family, one_thread):
    model = build_tiny(family, vocab=64)
    arch = arch_mod.inspect(model)
    ids = torch.arange(0, 64, 3)
    got = dp.direct_logits(model, arch, ids)
    parent, _, name = arch.blocks[0].path.rpartition(".")[0].rpartition(".")
    setattr(arch_mod.get(model, parent), name, torch.nn.ModuleList())  # nothing but embedding (its scale, its
    #                                                                    norm), final norm and head
    model.config.num_hidden_layers = 0
    if hasattr(model.config, "layer_types"):
        model.config.layer_types = []
    with torch.no_grad():
        want = model(input_ids=ids[:, None]).logits[:, 0].float()  # each token alone: no position effects
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if family == "gemma3":  # the √d embedding scale is part of the path: dropping it changes the logits
        raw = model.lm_head(model.model.norm(model.model.embed_tokens.weight[ids][None]))[0]
        assert not torch.allclose(raw, want, atol=1e-3)


def test_bloom_direct_path_starts_from_the_normed_embedding_the_blocks_read(one_thread):
    """Bloom normalises its embeddings before the first block: the direct path must start where transformers'
    hidden_states[0] does, and leaving the embedding norm out would give other logits."""
    model = build_tiny("bloom", vocab=64)
    arch = arch_mod.inspect(model)
    assert arch.embed_norm == "transformer.word_embeddings_layernorm"
    ids = torch.arange(1, 64, 5)
    with torch.no_grad():
        h0 = model(input_ids=ids[:, None], output_hidden_states=True).hidden_states[0][:, 0]  # (N, d)
        want = model.lm_head(model.transformer.ln_f(h0))
        skipped = model.lm_head(model.transformer.ln_f(model.transformer.word_embeddings(ids)))
    torch.testing.assert_close(dp.direct_logits(model, arch, ids), want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(skipped, want, atol=1e-3)  # the norm matters on this model


def test_direct_logits_are_soft_capped_when_the_config_caps_the_models_logits():
    """A config with final_logit_softcapping c (Gemma 2): the direct path ends as the model's own logits do,
    c·tanh(z / c), so no logit exceeds c in size (tanh reaches 1 in float32 for the largest)."""
    C = _counts()
    model = _bigram_model(C)
    arch = arch_mod.inspect(model)
    ids = torch.arange(V)
    raw = dp.direct_logits(model, arch, ids)
    model.config.final_logit_softcapping = 0.5
    capped = dp.direct_logits(model, arch, ids)
    torch.testing.assert_close(capped, 0.5 * torch.tanh(raw / 0.5))
    assert capped.abs().max() <= 0.5 < raw.abs().max()
