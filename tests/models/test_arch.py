"""bench.models.arch on tiny random-weight models of every supported family: paths, FFN site, head weights, norms."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
import torch
import torch.nn.functional as F
import transformers as tf
from torch import nn

from bench.ground.errors import ArchError
from bench.models import arch as A
from bench.models.heads import head_weights

D, L, H, V = 32, 2, 4, 100


def _variants():
    """name -> (config factory, model class, activation reference)."""
    gelu_tanh = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    llama_like = dict(hidden_size=D, intermediate_size=64, num_hidden_layers=L, num_attention_heads=H,
                      num_key_value_heads=2, vocab_size=V)
    gemma_like = dict(llama_like, head_dim=8)
    opt = dict(hidden_size=D, ffn_dim=64, num_hidden_layers=L, num_attention_heads=H, vocab_size=V,
               max_position_embeddings=64, word_embed_proj_dim=D)
    neox = dict(hidden_size=D, intermediate_size=64, num_hidden_layers=L, num_attention_heads=H, vocab_size=V)
    falcon = dict(hidden_size=D, num_hidden_layers=L, num_attention_heads=H, vocab_size=V, bias=True)
    return {
        # parallel blocks: attention and MLP both read the block input
        "phi": (lambda: tf.PhiConfig(hidden_size=D, intermediate_size=64, num_hidden_layers=L, num_attention_heads=H,
                                     vocab_size=V, max_position_embeddings=64), tf.PhiForCausalLM, gelu_tanh),
        "gptj": (lambda: tf.GPTJConfig(n_embd=D, n_layer=L, n_head=H, rotary_dim=4, n_positions=64, vocab_size=V),
                 tf.GPTJForCausalLM, gelu_tanh),
        "falcon": (lambda: tf.FalconConfig(**falcon), tf.FalconForCausalLM, F.gelu),  # multi-query: one kv head
        "falcon_mha": (lambda: tf.FalconConfig(**falcon, multi_query=False), tf.FalconForCausalLM, F.gelu),
        "falcon_new": (lambda: tf.FalconConfig(**falcon, new_decoder_architecture=True, num_kv_heads=2),
                       tf.FalconForCausalLM, F.gelu),
        "llama": (lambda: tf.LlamaConfig(**llama_like), tf.LlamaForCausalLM, F.silu),
        "mistral": (lambda: tf.MistralConfig(**llama_like), tf.MistralForCausalLM, F.silu),
        "qwen2": (lambda: tf.Qwen2Config(**llama_like), tf.Qwen2ForCausalLM, F.silu),
        "gemma2": (lambda: tf.Gemma2Config(**gemma_like), tf.Gemma2ForCausalLM, gelu_tanh),
        "gemma3": (lambda: tf.Gemma3TextConfig(**gemma_like), tf.Gemma3ForCausalLM, gelu_tanh),
        "gpt2": (lambda: tf.GPT2Config(n_embd=D, n_layer=L, n_head=H, n_positions=64, vocab_size=V),
                 tf.GPT2LMHeadModel, gelu_tanh),
        "neox": (lambda: tf.GPTNeoXConfig(**neox), tf.GPTNeoXForCausalLM, F.gelu),
        "neox_seq": (lambda: tf.GPTNeoXConfig(**neox, use_parallel_residual=False), tf.GPTNeoXForCausalLM, F.gelu),
        "opt": (lambda: tf.OPTConfig(**opt), tf.OPTForCausalLM, F.relu),
        "opt_proj": (lambda: tf.OPTConfig(**dict(opt, word_embed_proj_dim=16)), tf.OPTForCausalLM, F.relu),
        "opt_post": (lambda: tf.OPTConfig(**opt, do_layer_norm_before=False), tf.OPTForCausalLM, F.relu),
        # fused [q | k | v] linear with grouped kv, fused [gate | up] FFN
        "phi3": (lambda: tf.Phi3Config(**llama_like, pad_token_id=0, bos_token_id=1, eos_token_id=2),
                 tf.Phi3ForCausalLM, F.silu),
        # per-head fused q|k|v, a LayerNorm on the embeddings, ALiBi; attention and MLP add the residual inside
        "bloom": (lambda: tf.BloomConfig(hidden_size=D, n_layer=L, n_head=H, vocab_size=V), tf.BloomForCausalLM,
                  gelu_tanh),
    }


pytestmark = pytest.mark.usefixtures("one_thread")


VARIANTS = _variants()
NAMES = list(VARIANTS)
_CACHE: dict[str, nn.Module] = {}


def build(name: str, fresh: bool = False, **overrides) -> nn.Module:
    """A seeded tiny model with every parameter redrawn (so norms and biases are not identity / zero)."""
    if name in _CACHE and not fresh and not overrides:
        return _CACHE[name]
    make_config, cls, _ = VARIANTS[name]
    config = make_config()
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = cls(config).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    if not fresh and not overrides:
        _CACHE[name] = model
    return model


def ids(batch: int = 2, seq: int = 5) -> torch.Tensor:
    return torch.randint(3, V, (batch, seq), generator=torch.Generator().manual_seed(2))


class Taps:
    """Forward hooks that record a module's input (pre=True) or output, keyed by path."""

    def __init__(self, model: nn.Module):
        self.model, self.got, self.handles = model, {}, []

    def output(self, path: str, key: str | None = None):
        def hook(_m, _i, out):
            self.got[key or path] = (out[0] if isinstance(out, tuple) else out).detach()
        self.handles.append(A.get(self.model, path).register_forward_hook(hook))

    def input(self, path: str, key: str | None = None):
        def hook(_m, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            self.got[key or path] = x.detach()
        self.handles.append(A.get(self.model, path).register_forward_pre_hook(hook, with_kwargs=True))

    def run(self, input_ids: torch.Tensor) -> dict:
        try:
            with torch.no_grad():
                self.model(input_ids=input_ids)
        finally:
            for h in self.handles:
                h.remove()
        return self.got


def _apply(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A linear or Conv1D written out by hand (independent of bench.models.arch's transposes)."""
    if isinstance(module, nn.Linear):
        return x @ module.weight.T + (0 if module.bias is None else module.bias)
    return x @ module.weight + module.bias  # transformers Conv1D stores (in, out)


def _all_paths(obj) -> list[str]:
    paths = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, str) and f.name not in ("family", "model_type", "qkv_layout"):
            paths.append(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
            paths.extend(value)
    return paths


# ------------------------------------------------------------------------------------ 1. paths and FFN site

@pytest.mark.parametrize("name", NAMES)
def test_inspect_resolves_every_path_and_ffn_activation(name):
    model = build(name)
    arch = A.inspect(model)
    assert arch.n_layers == L == len(arch.blocks)
    assert [b.index for b in arch.blocks] == list(range(L))
    for path in _all_paths(arch) + [p for b in arch.blocks for p in _all_paths(b)]:
        assert isinstance(A.get(model, path), nn.Module), path

    b0 = arch.blocks[0]
    taps = Taps(model)
    taps.input(b0.ffn_in[0], "x")
    taps.output(b0.ffn_act, "act")
    taps.input(b0.ffn_out, "down_in")
    if b0.ffn_gated and not b0.ffn_fused:
        taps.output(b0.ffn_in[1], "up")
    got = taps.run(ids())

    assert got["act"].shape[-1] == arch.d_ffn
    ref_act = VARIANTS[name][2]
    pre = _apply(A.get(model, b0.ffn_in[0]), got["x"])
    if b0.ffn_fused:  # one linear, output [gate | up]: the activation reads the gate half, by hand here
        assert pre.shape[-1] == 2 * arch.d_ffn
        pre, got["up"] = pre[..., :arch.d_ffn], pre[..., arch.d_ffn:]
    expected = ref_act(pre)
    torch.testing.assert_close(got["act"], expected, atol=1e-5, rtol=1e-5)
    feeds = got["act"] * got["up"] if b0.ffn_gated else got["act"]
    torch.testing.assert_close(got["down_in"], feeds, atol=1e-6, rtol=1e-6)


EXPECTED = {  # name -> (family, fields of block 0 that pin the layout down)
    "llama": ("llama", dict(attn_in_norm="model.layers.0.input_layernorm",
                            mlp_in_norm="model.layers.0.post_attention_layernorm", attn_out_norm=None,
                            mlp_out_norm=None, ffn_act="model.layers.0.mlp.act_fn", ffn_gated=True)),
    "gemma2": ("gemma", dict(attn_out_norm="model.layers.0.post_attention_layernorm",
                             mlp_in_norm="model.layers.0.pre_feedforward_layernorm",
                             mlp_out_norm="model.layers.0.post_feedforward_layernorm", q_norm=None)),
    "gemma3": ("gemma", dict(attn_out_norm="model.layers.0.post_attention_layernorm",
                             q_norm="model.layers.0.self_attn.q_norm", k_norm="model.layers.0.self_attn.k_norm")),
    "gpt2": ("gpt2", dict(qkv="transformer.h.0.attn.c_attn", qkv_layout="gpt2", q=None,
                          o="transformer.h.0.attn.c_proj", ffn_in=("transformer.h.0.mlp.c_fc",))),
    "neox": ("neox", dict(qkv_layout="neox", parallel_residual=True,
                          mlp_in_norm="gpt_neox.layers.0.post_attention_layernorm")),
    "neox_seq": ("neox", dict(parallel_residual=False)),
    "opt": ("opt", dict(mlp="model.decoder.layers.0", ffn_act="model.decoder.layers.0.activation_fn",
                        mlp_in_norm="model.decoder.layers.0.final_layer_norm",
                        o="model.decoder.layers.0.self_attn.out_proj")),
    "opt_post": ("opt", dict(attn_in_norm=None, mlp_in_norm=None)),
    "phi": ("parallel", dict(attn_in_norm="model.layers.0.input_layernorm", o="model.layers.0.self_attn.dense",
                             mlp_in_norm="model.layers.0.input_layernorm", ffn_in=("model.layers.0.mlp.fc1",),
                             parallel_residual=True)),
    "gptj": ("parallel_ln1", dict(attn_in_norm="transformer.h.0.ln_1", mlp_in_norm="transformer.h.0.ln_1",
                                  ffn_out="transformer.h.0.mlp.fc_out", parallel_residual=True)),
    "falcon": ("neox", dict(qkv="transformer.h.0.self_attention.query_key_value", parallel_residual=True,
                            mlp_in_norm="transformer.h.0.input_layernorm")),
    "falcon_new": ("neox", dict(attn_in_norm="transformer.h.0.ln_attn", mlp_in_norm="transformer.h.0.ln_mlp",
                                parallel_residual=True)),
    "phi3": ("concat", dict(qkv="model.layers.0.self_attn.qkv_proj", qkv_layout="concat", q=None,
                            o="model.layers.0.self_attn.o_proj", ffn_in=("model.layers.0.mlp.gate_up_proj",),
                            ffn_act="model.layers.0.mlp.activation_fn", ffn_gated=True, ffn_fused=True,
                            mlp_in_norm="model.layers.0.post_attention_layernorm", parallel_residual=False)),
    "bloom": ("neox", dict(qkv="transformer.h.0.self_attention.query_key_value", qkv_layout="neox",
                           o="transformer.h.0.self_attention.dense", ffn_act="transformer.h.0.mlp.gelu_impl",
                           ffn_in=("transformer.h.0.mlp.dense_h_to_4h",), ffn_fused=False,
                           attn_in_norm="transformer.h.0.input_layernorm", parallel_residual=False)),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_layout_fields(name):
    arch = A.inspect(build(name))
    family, fields = EXPECTED[name]
    assert arch.family == family
    for key, value in fields.items():
        assert getattr(arch.blocks[0], key) == value, key


def test_dims_and_final_parts():
    gpt2 = A.inspect(build("gpt2"))
    assert (gpt2.d_model, gpt2.n_heads, gpt2.n_kv_heads, gpt2.d_head, gpt2.d_ffn) == (D, H, H, 8, 4 * D)
    assert (gpt2.embed, gpt2.final_norm, gpt2.lm_head) == ("transformer.wte", "transformer.ln_f", "lm_head")
    gemma = A.inspect(build("gemma3"))
    assert (gemma.d_head, gemma.n_kv_heads, gemma.d_ffn, gemma.vocab_size) == (8, 2, 64, V)
    assert gemma.model_type == "gemma3_text"
    proj = A.inspect(build("opt_proj"))
    assert (proj.embed_proj, proj.final_proj) == ("model.decoder.project_in", "model.decoder.project_out")
    assert A.inspect(build("opt")).final_proj is None
    assert A.inspect(build("opt_post")).final_norm is None
    phi3, bloom = A.inspect(build("phi3")), A.inspect(build("bloom"))
    assert (phi3.n_kv_heads, phi3.d_ffn, phi3.embed_norm) == (2, 64, None)
    assert (bloom.n_kv_heads, bloom.d_ffn, bloom.d_head) == (H, 4 * D, 8)  # n_kv from the fused width
    assert bloom.embed_norm == "transformer.word_embeddings_layernorm" and bloom.final_norm == "transformer.ln_f"
    assert A.inspect(build("llama")).embed_norm is None


# ------------------------------------------------------------------------------------ 2. head weights

def _per_head(t: torch.Tensor, d_head: int) -> torch.Tensor:
    return t.reshape(*t.shape[:-1], -1, d_head)  # (..., n_heads, d_head)


def _project(x, W, b):  # x (..., d_model), W (n, d_model, d_head) -> (..., n, d_head)
    out = torch.einsum("...m,nmd->...nd", x, W)
    return out if b is None else out + b


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layer", range(L))
def test_head_weights_match_projections(name, layer):
    model = build(name)
    arch = A.inspect(model)
    blk, dh = arch.blocks[layer], arch.d_head
    hw = head_weights(model, arch, layer)
    assert hw.W_Q.shape == (arch.n_heads, arch.d_model, dh) and hw.W_Q.dtype == torch.float32
    assert hw.W_K.shape == hw.W_V.shape == (arch.n_kv_heads, arch.d_model, dh)
    assert hw.W_O.shape == (arch.n_heads, dh, arch.d_model)

    taps = Taps(model)
    taps.input(blk.qkv or blk.q, "x")
    taps.input(blk.o, "z")
    taps.output(blk.o, "o_out")
    if blk.qkv is None:
        for part in ("q", "k", "v"):
            taps.output(getattr(blk, part), part)
    got = taps.run(ids())
    x = got["x"]
    if blk.qkv is None:  # raw projections, before any q_norm / k_norm
        for part, W, b in (("q", hw.W_Q, hw.b_Q), ("k", hw.W_K, hw.b_K), ("v", hw.W_V, hw.b_V)):
            torch.testing.assert_close(_project(x, W, b), _per_head(got[part], dh), atol=1e-5, rtol=1e-5)
    z = _per_head(got["z"], dh)
    out = torch.einsum("...hd,hdm->...m", z, hw.W_O) + (0 if hw.b_O is None else hw.b_O)
    torch.testing.assert_close(out, got["o_out"], atol=1e-5, rtol=1e-5)


def _record_attention(monkeypatch, model, blk):
    """Run the model with eager attention and record (query, key, value, scaling) handed to it in ``blk``."""
    attn = A.get(model, blk.attn)
    family_module = sys.modules[type(attn).__module__]
    original, seen = family_module.eager_attention_forward, {}

    def recorder(module, query, key, value, attention_mask, **kwargs):
        if module is attn:
            seen.update(q=query, k=key, v=value, scaling=kwargs.get("scaling"))
        return original(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setattr(family_module, "eager_attention_forward", recorder)
    model.set_attn_implementation("eager")
    return attn, seen


@pytest.mark.parametrize("name", NAMES)
def test_head_weights_match_attention_inputs(name, monkeypatch):
    """One-token sequences: rotary embedding at position 0 is the identity, and each head's output is its value.

    This checks the per-head split of fused projections (GPT-2, NeoX), q_norm/k_norm and kv_head_of against what
    the real attention code receives."""
    model = build(name, fresh=True)
    arch = A.inspect(model)
    blk, dh = arch.blocks[0], arch.d_head
    hw = head_weights(model, arch, 0)
    if not hasattr(sys.modules[type(A.get(model, blk.attn)).__module__], "eager_attention_forward"):
        pytest.skip("this family computes attention inline; see test_fused_split_matches_the_model_own_split")
    attn, seen = _record_attention(monkeypatch, model, blk)
    taps = Taps(model)
    taps.input(blk.qkv or blk.q, "x")
    taps.input(blk.o, "z")
    got = taps.run(ids(batch=4, seq=1))
    x = got["x"][:, 0]  # (B, d_model)

    q, k, v = (_project(x, W, b) for W, b in ((hw.W_Q, hw.b_Q), (hw.W_K, hw.b_K), (hw.W_V, hw.b_V)))
    if blk.q_norm:
        q, k = A.get(model, blk.q_norm)(q), A.get(model, blk.k_norm)(k)
    scaling = seen["scaling"] if seen["scaling"] is not None else dh ** -0.5
    # OPT scales q before attention and passes scaling=1; everyone else scales inside it. Compare the product.
    torch.testing.assert_close(seen["q"][:, :, 0] * scaling, q * attn.scaling, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(seen["k"][:, :, 0], k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(seen["v"][:, :, 0], v, atol=1e-5, rtol=1e-5)
    z = _per_head(got["z"][:, 0], dh)  # (B, H, d_head): with one key, head h returns its value exactly
    torch.testing.assert_close(z, v[:, list(hw.kv_head_of)], atol=1e-5, rtol=1e-5)


def _falcon_split_seen_by_attention(attn, x):
    """q, k, v (B, T, heads, dh) as Falcon's own forward hands them to its attention function (rotary off)."""
    from transformers.models.falcon import modeling_falcon as mf

    seen = {}

    def capture(module, q, k, v, *args, **kwargs):
        seen.update(q=q, k=k, v=v)
        return mf.eager_attention_forward(module, q, k, v, *args, **kwargs)

    tf.AttentionInterface.register("capture_qkv", capture)
    before, mf_rotary = attn.config._attn_implementation, mf.apply_rotary_pos_emb
    attn.config._attn_implementation = "capture_qkv"
    mf.apply_rotary_pos_emb = lambda q, k, *a, **kw: (q, k)
    try:
        attn(x, None, position_embeddings=(None, None))
    finally:
        attn.config._attn_implementation, mf.apply_rotary_pos_emb = before, mf_rotary
    return tuple(seen[n].transpose(1, 2) for n in "qkv")


@pytest.mark.parametrize("name", ["falcon", "falcon_mha", "falcon_new", "neox", "bloom"])
def test_fused_split_matches_the_model_own_split(name):
    """The grouped q|k|v split of a fused projection equals the one the model's attention code makes."""
    model = build(name)
    arch = A.inspect(model)
    blk, dh = arch.blocks[0], arch.d_head
    hw = head_weights(model, arch, 0)
    attn = A.get(model, blk.attn)
    x = torch.randn(2, 3, arch.d_model, generator=torch.Generator().manual_seed(3))
    fused = A.get(model, blk.qkv)(x)  # (B, T, (H + 2·n_kv)·dh)
    q, k, v = (_project(x, W, b) for W, b in ((hw.W_Q, hw.b_Q), (hw.W_K, hw.b_K), (hw.W_V, hw.b_V)))
    if hasattr(attn, "_reshape"):  # Bloom: (B, T, H, 3, dh), then (B, H, T, dh) each
        mq, mk, mv = (t.transpose(1, 2) for t in attn._reshape(fused))
    elif hasattr(attn, "_split_heads"):  # Falcon before 5.25: (B, T, heads, dh); new decoder broadcasts k/v per query
        mq, mk, mv = (t.reshape(2, 3, -1, dh) for t in attn._split_heads(fused))
    elif "falcon" in type(attn).__module__:  # later Falcon splits inline: read q, k, v where its attention gets them
        mq, mk, mv = _falcon_split_seen_by_attention(attn, x)
    else:  # GPT-NeoX reshapes to (B, T, H, 3·dh) and chunks
        per = fused.view(2, 3, arch.n_heads, 3 * dh)
        mq, mk, mv = per[..., :dh], per[..., dh:2 * dh], per[..., 2 * dh:]
    torch.testing.assert_close(q, mq, atol=1e-5, rtol=1e-5)
    kv = list(hw.kv_head_of) if mk.shape[2] == arch.n_heads else slice(None)
    torch.testing.assert_close(k[:, :, kv], mk, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v[:, :, kv], mv, atol=1e-5, rtol=1e-5)
    expected_kv = {"falcon": 1, "falcon_mha": H, "falcon_new": 2, "neox": H, "bloom": H}[name]
    assert arch.n_kv_heads == expected_kv  # read from the projection's width


def test_head_weights_are_detached_float32_copies():
    model = build("qwen2", fresh=True).to(torch.bfloat16)
    arch = A.inspect(model)
    hw = head_weights(model, arch, 1)
    assert all(t.dtype == torch.float32 and not t.requires_grad for t in (hw.W_Q, hw.W_O, hw.b_Q))
    assert hw.b_O is None  # Qwen2: biases on q/k/v only
    hw.W_Q.zero_()
    assert A.get(model, arch.blocks[1].q).weight.abs().sum() > 0


# ------------------------------------------------------------------------------------ 3. norms

@pytest.mark.parametrize("name", NAMES)
def test_norm_consumers_read_the_norm_output(name):
    model = build(name)
    arch = A.inspect(model)
    pairs = arch.norm_consumers
    norms = {n for b in arch.blocks for n in (b.attn_in_norm, b.mlp_in_norm) if n is not None}
    assert len(pairs) == len(norms) + (arch.final_norm is not None)  # a shared (parallel) norm is listed once
    for b in arch.blocks:  # ... with the consumers of attention and MLP both
        if b.attn_in_norm is not None and b.attn_in_norm == b.mlp_in_norm:
            assert set(b.ffn_in) <= set(dict(pairs)[b.attn_in_norm])
    taps = Taps(model)
    for norm, consumers in pairs:
        taps.output(norm, norm)
        for c in consumers:
            taps.input(c, c)
    got = taps.run(ids())
    for norm, consumers in pairs:
        for c in consumers:
            assert torch.equal(got[norm].reshape(-1, arch.d_model), got[c].reshape(-1, arch.d_model)), (norm, c)


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_gemma_output_norms_wrap_attention_and_mlp_outputs(name):
    model = build(name)
    arch = A.inspect(model)
    taps = Taps(model)
    for b in arch.blocks:
        taps.output(b.o, b.o)
        taps.input(b.attn_out_norm, b.attn_out_norm)
        taps.output(b.ffn_out, b.ffn_out)
        taps.input(b.mlp_out_norm, b.mlp_out_norm)
    got = taps.run(ids())
    for b in arch.blocks:
        assert torch.equal(got[b.o], got[b.attn_out_norm])
        assert torch.equal(got[b.ffn_out], got[b.mlp_out_norm])


@pytest.mark.parametrize("name", ["neox", "neox_seq", "llama", "falcon_new"])
def test_parallel_residual_flag_matches_what_the_norms_read(name):
    model = build(name)
    b0 = A.inspect(model).blocks[0]
    taps = Taps(model)
    taps.input(b0.attn_in_norm, "attn_in")
    taps.input(b0.mlp_in_norm, "mlp_in")
    got = taps.run(ids())
    assert torch.equal(got["attn_in"], got["mlp_in"]) == b0.parallel_residual


# ------------------------------------------------------------------------------------ 4-6. GQA, errors, ties

def test_gqa_kv_head_of():
    model = build("llama")
    arch = A.inspect(model)
    assert (arch.n_heads, arch.n_kv_heads) == (4, 2)
    assert head_weights(model, arch, 0).kv_head_of == (0, 0, 1, 1)
    gpt2 = build("gpt2")
    assert head_weights(gpt2, A.inspect(gpt2), 0).kv_head_of == (0, 1, 2, 3)


def test_config_less_module_raises():
    with pytest.raises(ArchError, match="config"):
        A.inspect(nn.Sequential(nn.Linear(4, 4)))


def test_bert_layout_raises_naming_the_missing_projections():
    config = tf.BertConfig(hidden_size=D, num_hidden_layers=L, num_attention_heads=H, intermediate_size=64,
                           vocab_size=V)
    with pytest.raises(ArchError, match=r"bert: attention module 'bert\.encoder\.layer\.0\.attention'.*q_proj"):
        A.inspect(tf.BertForMaskedLM(config))


def test_missing_final_norm_and_unknown_norm_set_raise():
    model = build("llama", fresh=True)
    model.model.norm = None
    with pytest.raises(ArchError, match=r"llama: no final norm named norm/ln_f/final_layer_norm"):
        A.inspect(model)
    model = build("mistral", fresh=True)
    model.model.layers[1].extra_norm = nn.LayerNorm(D)
    with pytest.raises(ArchError, match=r"mistral: block 'model.layers.1' has norm children .*extra_norm"):
        A.inspect(model)


def test_shared_activation_instance_raises():
    model = build("gemma2", fresh=True)
    model.model.layers[1].mlp.act_fn = model.model.layers[0].mlp.act_fn
    with pytest.raises(ArchError, match="same instance"):
        A.inspect(model)


def test_get_raises_arch_error():
    with pytest.raises(ArchError, match="no module at path 'model.nope'"):
        A.get(build("llama"), "model.nope")


@pytest.mark.parametrize("tie", [True, False])
def test_tied_embeddings_still_resolve_lm_head(tie):
    model = build("llama", fresh=True, tie_word_embeddings=tie)
    arch = A.inspect(model)
    assert arch.lm_head == "lm_head" and arch.embed == "model.embed_tokens"
    shared = A.get(model, arch.lm_head).weight is A.get(model, arch.embed).weight
    assert shared == tie
    assert math.prod(A.get(model, arch.lm_head).weight.shape) == V * D


# ------------------------------------------------------------------------------------ 7. layouts refused, saying why

def test_olmo2_output_only_norms_raise_naming_what_is_unsupported():
    config = tf.Olmo2Config(hidden_size=16, intermediate_size=32, num_hidden_layers=L, num_attention_heads=H,
                            num_key_value_heads=2, vocab_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    with pytest.raises(ArchError, match=r"olmo2: block 'model.layers.0' .*norms only on the attention and FFN "
                                        r"outputs.*q_norm/k_norm over the whole projection"):
        A.inspect(tf.Olmo2ForCausalLM(config))


def test_bloom_residual_from_the_norm_output_raises():
    with pytest.raises(ArchError, match="apply_residual_connection_post_layernorm"):
        A.inspect(build("bloom", fresh=True, apply_residual_connection_post_layernorm=True))


def test_bloom_sliced_down_projection_raises():
    model = build("bloom", fresh=True)
    for block in model.transformer.h:  # what pretraining_tp = 2 with slow_but_exact builds
        block.mlp.pretraining_tp, block.mlp.slow_but_exact = 2, True
    with pytest.raises(ArchError, match=r"bloom: 'transformer.h.0.mlp' applies 'dense_4h_to_h' by weight slices"):
        A.inspect(model)


def test_unknown_norm_beside_the_blocks_raises():
    model = build("llama", fresh=True)
    model.model.extra_layernorm = nn.LayerNorm(D)
    with pytest.raises(ArchError, match=r"llama: norm module\(s\) extra_layernorm next to the blocks"):
        A.inspect(model)


# ------------------------------------------------------------------------------------ 8. the plan's shape agrees

@pytest.mark.parametrize("name", NAMES)
def test_plan_shape_counts_the_block_matrices_arch_finds(name):
    """`bench plan` sizes a model from its config alone; its block parameters must be the matrices arch locates
    (a gated count for Bloom's two-matrix FFN overstated them by a third; Falcon's shared key/value heads, named
    `multi_query` / `num_kv_heads` in its config, were counted as one per query head)."""
    from bench.ground.costs import Shape

    model = build(name)
    arch = A.inspect(model)
    found = sum(A.get(model, p).weight.numel() for b in arch.blocks
                for p in (b.q, b.k, b.v, b.qkv, b.o, *b.ffn_in, b.ffn_out) if p)
    assert Shape.from_config(model.config).block_params == found


@pytest.mark.parametrize("make,kv", [
    (lambda: tf.GPTBigCodeConfig(n_embd=D, n_layer=L, n_head=H, vocab_size=V), 1),  # multi-query by default
    (lambda: tf.GPTBigCodeConfig(n_embd=D, n_layer=L, n_head=H, vocab_size=V, multi_query=False), H),
    (lambda: tf.LlamaConfig(hidden_size=D, num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=2,
                            intermediate_size=2 * D, vocab_size=V), 2),
])
def test_the_plan_reads_shared_key_value_heads_from_each_configs_own_names(make, kv):
    from bench.ground.costs import Shape

    assert Shape.from_config(make()).n_kv_heads == kv
