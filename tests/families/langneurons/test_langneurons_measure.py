"""Streaming statistics, neuron edits and bits per byte: known answers and parity with plain transformers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench.families.langneurons import edit, stats, steer
from bench.families.langneurons import text as tx
from bench.models import arch as arch_mod
from bench.models import hooks
from tests.conftest import build_tiny

FAMILIES = ["llama", "gemma3", "gpt2", "phi3", "bloom"]  # phi3: fused [gate | up]; bloom: gelu_impl, ALiBi


pytestmark = pytest.mark.usefixtures("one_thread")


class _Tok:
    """Character-level tokenizer over a fixed alphabet; id 0 is BOS/EOS/pad."""

    bos_token_id = eos_token_id = pad_token_id = 0

    def __init__(self, vocab: int):
        self.vocab = vocab

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [1 + (ord(c) % (self.vocab - 1)) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(ord("a") + (i - 1) % 26) for i in ids if i)


def loaded(family: str, seed: int = 0, **over):
    hf = build_tiny(family, seed=seed, **over)
    return SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), tokenizer=_Tok(hf.config.vocab_size),
                           device=torch.device("cpu"), dtype=torch.float32, fingerprint=f"tiny-{family}-{seed}")


def random_docs(n: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = [length - (i % 3) for i in range(n)]  # uneven, so padding is exercised
    return [[0, *torch.randint(1, vocab, (m - 1,), generator=g).tolist()] for m in lengths]


@pytest.mark.parametrize("family", FAMILIES)
def test_streaming_stats_equal_counts_from_captured_activations(family):
    m = loaded(family)
    docs = random_docs(5, 12, m.hf.config.vocab_size)
    got = stats.record(m, docs, top_frac=0.25, max_tokens=30)  # several micro-batches
    a = m.arch
    F = a.d_ffn
    k = int(round(0.25 * F))
    w = stats.down_row_norms(m.hf, a)
    n_pos = np.zeros((a.n_layers, F))
    s_act = np.zeros((a.n_layers, F))
    n_top = np.zeros((a.n_layers, F))
    with torch.no_grad():
        for d in docs:  # one unpadded document at a time, plain forward with output capture
            ids = torch.tensor([d])
            with hooks.capture(m.hf, [b.ffn_act for b in a.blocks]) as acts, \
                    hooks.capture(m.hf, [b.ffn_out for b in a.blocks], inputs=True) as ins:
                m.hf(input_ids=ids)
            for l, b in enumerate(a.blocks):
                act = acts[b.ffn_act][0][0, 1:]  # (T-1, F): the start token is skipped
                n_pos[l] += (act > 0).sum(0).numpy()
                s_act[l] += act.sum(0).double().numpy()
                imp = ins[b.ffn_out][0][0, 1:].abs().sum(0) * w[l]
                n_top[l, imp.topk(k).indices.numpy()] += 1
    assert got.n_tokens == sum(len(d) - 1 for d in docs) and got.n_docs == 5
    np.testing.assert_array_equal(got.n_pos, n_pos)
    np.testing.assert_allclose(got.s_act, s_act, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got.n_top, n_top)
    if family == "gpt2":  # non-gated: the down projection reads the activation itself
        assert not a.blocks[0].ffn_gated


@pytest.mark.parametrize("family", FAMILIES)
def test_zeroing_a_neuron_by_hook_equals_zeroing_its_down_projection_row(family):
    m = loaded(family)
    a, hf = m.arch, m.hf
    F = a.d_ffn
    flat = np.array([3, F + 5, F + 17])  # neuron 3 of layer 0, neurons 5 and 17 of layer 1
    ids = torch.randint(1, hf.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        base = hf(input_ids=ids).logits
        with hooks.intervene(hf, edit.neuron_edits(a, flat)):
            hooked = hf(input_ids=ids).logits
        saved = {}
        for f in flat:
            layer, j = divmod(int(f), F)
            down = arch_mod.get(hf, a.blocks[layer].ffn_out)
            w_in_out = arch_mod._in_out(down)[0]  # (F, d) view of the weight
            saved[f] = w_in_out[j].clone()
            w_in_out[j] = 0
        edited = hf(input_ids=ids).logits
        for f, row in saved.items():
            layer, j = divmod(int(f), F)
            arch_mod._in_out(arch_mod.get(hf, a.blocks[layer].ffn_out))[0][j] = row
    torch.testing.assert_close(hooked, edited, rtol=1e-5, atol=1e-5)
    assert (hooked - base).abs().max() > 1e-4


@pytest.mark.parametrize("family", ["llama", "gpt2", "phi3"])
def test_setting_neurons_to_values_reaches_the_down_projection(family):
    m = loaded(family)
    a = m.arch
    F = a.d_ffn
    flat, values = np.array([2, F + 4]), np.array([1.5, -2.0])
    b0, b1 = a.blocks
    sites = [b0.ffn_out, b1.ffn_out]
    ups = [b.ffn_in[-1] for b in (b0, b1)] if a.blocks[0].ffn_gated else []
    with torch.no_grad(), hooks.intervene(m.hf, edit.neuron_edits(a, flat, values)):
        with hooks.capture(m.hf, sites, inputs=True) as down_in, hooks.capture(m.hf, ups) as up_out:
            m.hf(input_ids=torch.tensor([[0, 5, 6, 7]]))
    for (layer, j, v) in ((0, 2, 1.5), (1, 4, -2.0)):
        h = down_in[sites[layer]][0][0, :, j]  # (T,)
        up = F + j if a.blocks[0].ffn_fused else j  # a fused [gate | up] output holds neuron j's up at F + j
        want = torch.full_like(h, v) * (up_out[ups[layer]][0][0, :, up] if ups else 1.0)
        torch.testing.assert_close(h, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_chunked_head_bits_equal_log_softmax_of_plain_logits(family):
    over = {"final_logit_softcapping": 3.0} if family == "gemma3" else {}
    m = loaded(family, **over)
    seqs = random_docs(4, 11, m.hf.config.vocab_size, seed=2)
    nats = edit.token_nats(m, seqs, max_tokens=25, head_rows=7)
    with torch.no_grad():
        for s, got in zip(seqs, nats):
            ids = torch.tensor([s])
            lp = torch.log_softmax(m.hf(input_ids=ids).logits.float()[0, :-1], -1)
            want = -lp.gather(1, ids[0, 1:, None])[:, 0]
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_bits_per_byte_on_a_hand_computed_example():
    """A model whose logits are always equal over 4 tokens: every token costs exactly 2 bits."""
    d, V = 3, 4

    class Base(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, use_cache=False):
            return SimpleNamespace(last_hidden_state=torch.zeros(*input_ids.shape, d))

    head = torch.nn.Linear(d, V, bias=False)
    torch.nn.init.zeros_(head.weight)
    hf = SimpleNamespace(base_model=Base(), get_output_embeddings=lambda: head,
                         config=SimpleNamespace(get_text_config=lambda: SimpleNamespace()))
    model = SimpleNamespace(hf=hf, tokenizer=_Tok(V), device=torch.device("cpu"))
    bits, nbytes = edit.text_bits(model, ["abc", "é"])  # 3 tokens / 3 bytes; 1 token / 2 bytes
    np.testing.assert_allclose(bits, [6.0, 2.0])
    np.testing.assert_array_equal(nbytes, [3, 2])
    assert edit.bits_per_byte(np.array([math.log(2), 2 * math.log(2)]), 3) == pytest.approx(1.0)


def test_documents_and_batches():
    tok = _Tok(50)
    docs = tx.documents(tok, ["abcd", "efgh", "ijkl", "mnop"], doc_tokens=6, budget=100)
    assert [len(d) for d in docs] == [7, 7]  # two texts + newline (9 tokens) per document, cut to start + 6
    assert docs[0][0] == 0
    got = list(tx.batches([[0, 1], [0, 1, 2, 3], [0]], max_tokens=4, pad=9))
    rows = [b.rows for b in got]
    assert sorted(r for rr in rows for r in rr) == [0, 1, 2]
    for b in got:
        assert b.ids.shape[0] * b.ids.shape[1] <= 4 or b.ids.shape[0] == 1
        assert (b.ids[b.mask == 0] == 9).all()


def test_language_share_by_script_and_by_detector():
    assert steer.language_share("Привет мир", "ru") == 1.0
    assert steer.language_share("hello world", "ru") == 0.0
    assert steer.language_share("こんにちは世界", "ja") == 1.0
    assert steer.language_share("你好世界", "zh_CN") == 1.0
    assert steer.language_share("你好世界", "ja") == 0.0  # Han without kana is not Japanese
    de = "Die Katze sitzt auf der Matte und schläft den ganzen Tag in der warmen Sonne."
    assert steer.language_share(de, "de") > 0.9
    assert steer.language_share(de, "fr") < 0.1
    assert steer.language_share("12345 !!", "de") == 0.0


def test_generation_without_edits_is_plain_greedy_decoding():
    m = loaded("llama")
    m.tokenizer = _Tok(m.hf.config.vocab_size)
    prompts = ["abcde", "xy"]  # different lengths: the batch is left-padded
    got = steer.generate(m, prompts, max_new_tokens=5)
    with torch.no_grad():
        for p, text in zip(prompts, got):
            ids = torch.tensor([tx.encode(m.tokenizer, p)])
            for _ in range(5):
                nxt = m.hf(input_ids=ids).logits[0, -1].argmax()
                ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            new = [i for i in ids[0, -5:].tolist()]
            if 0 in new:
                new = new[: new.index(0)]
            assert text == m.tokenizer.decode(new)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_sentence_states_equal_mean_of_output_hidden_states(family):
    from bench.families.langneurons.steer_probes import sentence_states

    m = loaded(family)
    texts = ["hello there", "a longer sentence here", "a"]  # "a": the start token and one more, whose state is its mean
    got = sentence_states(m, texts, micro_tokens=64)  # (3, L, d)
    with torch.no_grad():
        for i, t in enumerate(texts):
            ids = torch.tensor([tx.encode(m.tokenizer, t)])
            hs = m.hf(input_ids=ids, output_hidden_states=True).hidden_states
            for l in range(m.arch.n_layers - 1):  # the last entry of hidden_states is after the final norm
                torch.testing.assert_close(got[i, l], hs[l + 1][0, 1:].mean(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_pv_gradient_norms_equal_autograd_by_hand(family):
    """PV's per-neuron gradient norm against a plain backward pass: neuron j's rows of the input projections
    and column j of the output projection (biases included where there are any)."""
    from bench.families.langneurons.stats import gradient_norms

    m = loaded(family, seed=2)
    docs = random_docs(3, 12, m.hf.config.vocab_size, seed=5)
    got = gradient_norms(m, docs)  # (L, F)
    hf = m.hf
    hf.zero_grad()
    total = 0.0
    for d in docs:
        ids = torch.tensor([d])
        out = hf(input_ids=ids, labels=ids)
        total = total + out.loss * (len(d) - 1)  # summed, not mean, next-token loss
    total.backward()
    for l, b in enumerate(m.arch.blocks):
        sq = torch.zeros(m.arch.d_ffn, dtype=torch.float64)
        F = m.arch.d_ffn
        for path in b.ffn_in:
            mod = arch_mod.get(hf, path)
            g = mod.weight.grad.double()
            rows = (g.T if g.shape[0] not in (F, 2 * F) else g).pow(2).sum(dim=1)  # one entry per output
            if b.ffn_fused:  # [gate | up] in one linear: neuron j owns output j (gate) and F + j (up)
                rows = rows[:F] + rows[F:]
            sq += rows
            if getattr(mod, "bias", None) is not None and mod.bias.grad is not None:
                bg = mod.bias.grad.double().pow(2)
                sq += bg[:F] + bg[F:] if b.ffn_fused else bg
        out_mod = arch_mod.get(hf, b.ffn_out)
        g = out_mod.weight.grad.double()
        sq += (g if g.shape[0] == m.arch.d_ffn else g.T).pow(2).sum(dim=1)
        np.testing.assert_allclose(got[l], sq.sqrt().numpy(), rtol=1e-3, atol=1e-6)
