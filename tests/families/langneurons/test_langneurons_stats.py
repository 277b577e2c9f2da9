"""`bench.families.langneurons.stats` pinned where the streaming comparison in test_langneurons_measure.py cannot
see: the shares and means of hand-made counts, the down projection's row norms read from the weights themselves,
the top-k size rounded from `top_frac` (at least one neuron), the progress reported per micro-batch (statistics and
PV gradients), and `gradient_norms` leaving the model's gradient flags as it found them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.langneurons import stats
from bench.families.langneurons import text as tx
from tests.families.langneurons.test_langneurons_measure import loaded, random_docs

pytestmark = pytest.mark.usefixtures("one_thread")


def test_shares_and_means_divide_by_the_token_count():
    z = np.zeros((1, 2), np.int64)
    s = stats.Stats(n_tokens=4, n_docs=2, n_pos=np.array([[1, 4]]), s_act=np.array([[2.0, -1.0]]), n_top=z)
    assert s.p.tolist() == [[0.25, 1.0]] and s.mean.tolist() == [[0.5, -0.25]]
    one = stats.Stats(n_tokens=1, n_docs=1, n_pos=np.array([[1, 0]]), s_act=np.array([[3.0, 0.0]]), n_top=z)
    assert one.p.tolist() == [[1.0, 0.0]] and one.mean.tolist() == [[3.0, 0.0]]
    empty = stats.Stats(n_tokens=0, n_docs=0, n_pos=z, s_act=np.zeros((1, 2)), n_top=z)  # no text: 0, not NaN
    assert empty.p.tolist() == [[0.0, 0.0]] and empty.mean.tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_down_row_norms_are_each_neurons_row_of_the_down_projection(family):
    """llama's down_proj is an nn.Linear (d, F): neuron j is column j; gpt2's c_proj a Conv1D (F, d): row j."""
    m = loaded(family)
    got = stats.down_row_norms(m.hf, m.arch).numpy()
    for layer in range(m.arch.n_layers):
        if family == "llama":
            w = m.hf.model.layers[layer].mlp.down_proj.weight.detach().numpy()  # (32, 64)
            want = np.sqrt((w ** 2).sum(axis=0))
        else:
            w = m.hf.transformer.h[layer].mlp.c_proj.weight.detach().numpy()  # (128, 32)
            want = np.sqrt((w ** 2).sum(axis=1))
        assert got.shape == (m.arch.n_layers, m.arch.d_ffn)
        np.testing.assert_allclose(got[layer], want, rtol=1e-6)


def test_the_top_k_is_the_rounded_share_of_the_neurons_and_at_least_one():
    """64 neurons a layer: top_frac 0.15 → round(9.6) = 10 per document, 0.001 → 1, 1.0 → every neuron."""
    m = loaded("llama")
    docs = random_docs(4, 10, m.hf.config.vocab_size)
    for frac, k in [(0.15, 10), (0.001, 1), (1.0, 64)]:
        got = stats.record(m, docs, top_frac=frac)
        assert got.n_top.sum(axis=1).tolist() == [k * 4] * m.arch.n_layers, frac
        assert got.n_top.max() <= 4


def test_progress_is_the_share_of_documents_done_per_micro_batch():
    m = loaded("llama")
    docs = random_docs(5, 12, m.hf.config.vocab_size)
    seen = []
    got = stats.record(m, docs, top_frac=0.25, max_tokens=30, progress=lambda f, msg="": seen.append((f, msg)))
    sizes = [len(rows) for rows in tx.groups(docs, max_tokens=30)]
    assert len(sizes) > 1
    assert seen == [(float(x) / 5, "activation statistics") for x in np.cumsum(sizes)]
    assert got.n_docs == 5 and got.n_tokens == sum(len(d) - 1 for d in docs)
    seen.clear()
    stats.record(m, docs[:1], top_frac=0.25, progress=lambda f, msg="": seen.append((f, msg)))
    assert seen == [(1.0, "activation statistics")]  # one document: done once it is done


def test_gradient_norms_report_the_share_of_documents_done_per_micro_batch():
    m = loaded("llama")
    docs = random_docs(5, 12, m.hf.config.vocab_size)
    seen = []
    stats.gradient_norms(m, docs, max_tokens=30, progress=lambda f, msg="": seen.append((f, msg)))
    sizes = [len(rows) for rows in tx.groups(docs, max_tokens=30)]
    assert len(sizes) > 1
    assert seen == [(float(x) / 5, "PV gradients") for x in np.cumsum(sizes)]


def test_a_padded_batch_counts_no_padding_and_no_start_token():
    """The same documents in one micro-batch (padded) or one at a time: the same counts."""
    m = loaded("llama")
    docs = random_docs(3, 9, m.hf.config.vocab_size, seed=4)  # lengths 9, 8, 7
    together = stats.record(m, docs, top_frac=0.25, max_tokens=10_000)
    alone = [stats.record(m, [d], top_frac=0.25) for d in docs]
    assert together.n_tokens == 8 + 7 + 6 == sum(a.n_tokens for a in alone)
    np.testing.assert_array_equal(together.n_pos, sum(a.n_pos for a in alone))
    np.testing.assert_array_equal(together.n_top, sum(a.n_top for a in alone))
    np.testing.assert_allclose(together.s_act, sum(a.s_act for a in alone), rtol=1e-5, atol=1e-6)


def test_gradient_norms_leave_the_gradient_flags_as_they_were():
    m = loaded("llama", seed=2)
    frozen = m.hf.model.embed_tokens.weight
    frozen.requires_grad_(False)
    before = {name: p.requires_grad for name, p in m.hf.named_parameters()}
    assert not all(before.values())
    g = stats.gradient_norms(m, random_docs(2, 8, m.hf.config.vocab_size, seed=1))
    assert g.shape == (2, 64) and np.all(g > 0)
    assert {name: p.requires_grad for name, p in m.hf.named_parameters()} == before
    assert all(p.grad is None for p in m.hf.parameters())


def test_neuron_axis_of_linear_and_conv1d():
    """nn.Linear stores (out, in): gate/up neurons are rows (axis 0), down's are columns (axis 1); Conv1D the reverse."""
    lin = torch.nn.Linear(4, 6)
    assert stats._neuron_axis(lin, "in") == 0 and stats._neuron_axis(lin, "out") == 1
    gpt2 = loaded("gpt2").hf.transformer.h[0].mlp
    assert stats._neuron_axis(gpt2.c_fc, "in") == 1 and stats._neuron_axis(gpt2.c_proj, "out") == 0


def test_gradient_norms_of_a_soft_capped_head_follow_the_capped_loss():
    """gemma3 with final_logit_softcapping = 0.5: the loss is taken on 0.5·tanh(logits / 0.5), the logits the model
    itself returns; against the summed loss's gradient by hand, the norms in float64."""
    from bench.models import arch as arch_mod

    m = loaded("gemma3", seed=2, final_logit_softcapping=0.5)
    docs = random_docs(2, 8, m.hf.config.vocab_size, seed=3)
    got = stats.gradient_norms(m, docs)
    assert got.dtype == np.float64
    hf = m.hf
    hf.zero_grad()
    total = 0.0
    for d in docs:
        ids = torch.tensor([d])
        logits = hf(input_ids=ids).logits[0, :-1].float()  # the model caps its own logits
        assert logits.abs().max() <= 0.5
        total = total + torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum")
    total.backward()
    F = m.arch.d_ffn
    for layer, b in enumerate(m.arch.blocks):
        sq = torch.zeros(F, dtype=torch.float64)
        for path in b.ffn_in:  # gate and up: (F, d), neuron j is row j
            sq += arch_mod.get(hf, path).weight.grad.double().pow(2).sum(dim=1)
        sq += arch_mod.get(hf, b.ffn_out).weight.grad.double().pow(2).sum(dim=0)  # down: (d, F), column j
        np.testing.assert_allclose(got[layer], sq.sqrt().numpy(), rtol=1e-3, atol=1e-6)


def test_counts_are_integers_and_activation_sums_float64():
    """The dtypes `Stats` documents: n_pos and n_top int64 counts, s_act a float64 sum (no float32 rounding)."""
    m = loaded("llama")
    got = stats.record(m, random_docs(2, 6, m.hf.config.vocab_size), top_frac=0.25)
    assert (got.n_pos.dtype, got.n_top.dtype, got.s_act.dtype) == (np.int64, np.int64, np.float64)


def test_gradient_norms_of_a_fused_input_projection_with_a_bias():
    """phi3's [gate | up] in one linear, given a bias: neuron j owns bias entries j and F + j."""
    from bench.models import arch as arch_mod

    m = loaded("phi3", seed=1)
    block = m.arch.blocks[0]
    (path,) = block.ffn_in
    old = arch_mod.get(m.hf, path)
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        new.weight.copy_(old.weight)
        new.bias.normal_()
    parent, name = path.rsplit(".", 1)
    setattr(arch_mod.get(m.hf, parent), name, new)
    docs = random_docs(2, 8, m.hf.config.vocab_size, seed=6)
    got = stats.gradient_norms(m, docs)
    m.hf.zero_grad()
    for d in docs:
        ids = torch.tensor([d])
        (m.hf(input_ids=ids, labels=ids).loss * (len(d) - 1)).backward()
    F = m.arch.d_ffn
    sq = new.weight.grad.double().pow(2).sum(dim=1) + new.bias.grad.double().pow(2)  # (2F,)
    sq = sq[:F] + sq[F:]
    sq += arch_mod.get(m.hf, block.ffn_out).weight.grad.double().pow(2).sum(dim=0)
    np.testing.assert_allclose(got[0], sq.sqrt().numpy(), rtol=1e-3, atol=1e-6)


def test_an_activation_of_exactly_zero_is_not_counted_as_firing():
    """A ReLU llama: many activations are exactly 0, and LAPE's p counts only those > 0."""
    from bench.models import hooks

    m = loaded("llama", hidden_act="relu")
    docs = random_docs(2, 9, m.hf.config.vocab_size, seed=2)
    got = stats.record(m, docs, top_frac=0.25)
    want = np.zeros_like(got.n_pos)
    zeros = 0
    with torch.no_grad():
        for d in docs:
            with hooks.capture(m.hf, [b.ffn_act for b in m.arch.blocks]) as acts:
                m.hf(input_ids=torch.tensor([d]))
            for layer, b in enumerate(m.arch.blocks):
                act = acts[b.ffn_act][0][0, 1:]  # the start token is left out
                want[layer] += (act > 0).sum(0).numpy()
                zeros += int((act == 0).sum())
    assert zeros > 100
    np.testing.assert_array_equal(got.n_pos, want)
