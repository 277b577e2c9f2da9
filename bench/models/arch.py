"""Where each part of a decoder-only ``*ForCausalLM`` lives, as dotted module paths.

:func:`inspect` reads the transformers config and the module tree and returns a frozen :class:`Arch`.  Every
decision is made from the structure (which children a module has); ``config.model_type`` is only quoted in
error messages.  The layouts understood are

* norms per block: ``input_layernorm``/``post_attention_layernorm`` (pre-attention / pre-MLP: Llama, Mistral,
  Qwen2, GPT-NeoX), the same plus ``pre_feedforward_layernorm``/``post_feedforward_layernorm`` (Gemma 2/3, where
  ``post_attention_layernorm`` normalises the attention *output*), ``ln_1``/``ln_2`` (GPT-2) and
  ``self_attn_layer_norm``/``final_layer_norm`` (OPT, pre- or post-norm);
* parallel blocks, where attention and MLP both read the block input: one norm feeding both (``input_layernorm``:
  Phi, Falcon-7B; ``ln_1``: GPT-J) or one norm each (``ln_attn``/``ln_mlp``: Falcon's new decoder);
* attention: separate ``q_proj``/``k_proj``/``v_proj``, GPT-2's fused Conv1D ``c_attn`` (q|k|v along the
  output), Phi-3's fused ``qkv_proj`` (``concat``: H query heads, then n_kv key, then n_kv value heads) or a
  fused ``query_key_value`` grouped per key/value head (per group: its query heads, then k, then v; GPT-NeoX
  and Bloom are the case of one query head per group, Falcon's multi-query the case of one group), whose
  number of key/value heads is read from its width, not from the config;
* FFN: gated ``gate_proj``/``up_proj``/``act_fn``/``down_proj``, Phi-3's fused ``gate_up_proj`` (output
  [gate | up]; ``activation_fn`` of the gate half is the (…, d_ffn) per-neuron activation), or a plain
  linear → activation → linear (Bloom's activation is ``gelu_impl``);
* a norm on the token embeddings before the first block (Bloom's ``word_embeddings_layernorm``):
  ``Arch.embed_norm``, which whoever rebuilds the residual stream from the embedding applies.

Refused, saying why: a residual taken from the norm's output (``apply_residual_connection_post_layernorm``),
an FFN applied by weight slices (``pretraining_tp`` > 1 with ``slow_but_exact``), norms only on the sublayer
outputs (OLMo 2); anything else raises :class:`ArchError` naming the model type and what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bench.ground.errors import ArchError
from bench.models import linear

_ATTN_CHILDREN = ("self_attn", "attn", "attention", "self_attention")
_FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm")

# (layout, projection children that read the attention input, output projection candidates)
_QKV_LAYOUTS = (
    ("separate", ("q_proj", "k_proj", "v_proj"), ("o_proj", "out_proj", "dense")),
    ("gpt2", ("c_attn",), ("c_proj",)),
    ("concat", ("qkv_proj",), ("o_proj", "dense")),
    ("neox", ("query_key_value",), ("dense",)),
)

# block-level norm children (exact set) -> the role of each one
_NORM_LAYOUTS = {
    "gemma": {"attn_in": "input_layernorm", "attn_out": "post_attention_layernorm",
              "mlp_in": "pre_feedforward_layernorm", "mlp_out": "post_feedforward_layernorm"},
    "llama": {"attn_in": "input_layernorm", "mlp_in": "post_attention_layernorm"},
    "gpt2": {"attn_in": "ln_1", "mlp_in": "ln_2"},
    "opt": {"attn_in": "self_attn_layer_norm", "mlp_in": "final_layer_norm"},
    "parallel": {"attn_in": "input_layernorm", "mlp_in": "input_layernorm"},
    "parallel_ln1": {"attn_in": "ln_1", "mlp_in": "ln_1"},
    "parallel_two": {"attn_in": "ln_attn", "mlp_in": "ln_mlp"},
}
_PARALLEL_NORMS = ("parallel", "parallel_ln1", "parallel_two")  # no norm between attention and the MLP input

_REFUSED_NORMS = {  # norm sets recognised only to be refused, with the reason
    frozenset({"post_attention_layernorm", "post_feedforward_layernorm"}):
        "norms only on the attention and FFN outputs (OLMo 2: no norm before q/k/v or the FFN, q_norm/k_norm over "
        "the whole projection, not per head) are not supported: the composition weights assume per-head q/k norms",
}
_EMBED_NORMS = ("word_embeddings_layernorm", "embed_layer_norm", "embedding_layernorm")

# (container child or None for the block itself, input linears, activation, output linear, gated)
# gated with one input linear: that linear's output is [gate | up] (Phi-3's gate_up_proj)
_FFN_LAYOUTS = (
    ("mlp", ("gate_proj", "up_proj"), "act_fn", "down_proj", True),
    ("mlp", ("gate_up_proj",), "activation_fn", "down_proj", True),
    ("mlp", ("c_fc",), "act", "c_proj", False),
    ("mlp", ("dense_h_to_4h",), "act", "dense_4h_to_h", False),
    ("mlp", ("dense_h_to_4h",), "gelu_impl", "dense_4h_to_h", False),
    ("mlp", ("fc1",), "activation_fn", "fc2", False),
    ("mlp", ("fc_in",), "act", "fc_out", False),
    (None, ("fc1",), "activation_fn", "fc2", False),
)


@dataclass(frozen=True)
class Block:
    index: int
    path: str                    # e.g. "model.layers.3"
    attn: str                    # attention module
    q: str | None                # separate projections (None when fused)
    k: str | None
    v: str | None
    qkv: str | None              # fused projection (GPT-2 c_attn, Phi-3 qkv_proj, NeoX query_key_value), else None
    qkv_layout: str              # "separate" | "gpt2" | "concat" ([q | k | v]) | "neox" (grouped per kv head)
    o: str                       # attention output projection
    q_norm: str | None           # per-head norms on q/k (Gemma3), else None
    k_norm: str | None
    attn_in_norm: str | None     # norm whose output feeds q/k/v (None for post-norm OPT)
    attn_out_norm: str | None    # norm on the attention output before the residual add (Gemma), else None
    mlp: str                     # MLP module (the block itself for OPT, which has no MLP child)
    mlp_in_norm: str | None      # norm whose output feeds ffn_in (None for post-norm OPT)
    mlp_out_norm: str | None     # norm on the FFN output before the residual add (Gemma), else None
    ffn_in: tuple[str, ...]      # (gate, up) when gated, (gate_up,) when gated and fused, (fc_in,) otherwise
    ffn_act: str                 # activation module; its output (..., d_ffn) is the per-neuron activation
    ffn_gated: bool
    ffn_out: str                 # down projection, reads the (..., d_ffn) activations
    parallel_residual: bool = False  # attention and MLP both read the block input (GPT-NeoX option, Phi, GPT-J,
    #                                  Falcon)
    ffn_fused: bool = False      # gated, one input linear whose output is [gate (d_ffn) | up (d_ffn)] (Phi-3)


@dataclass(frozen=True)
class Arch:
    family: str                  # "llama" | "gemma" | "gpt2" | "concat" | "neox" | "opt" | … (layout, not name)
    model_type: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ffn: int
    vocab_size: int
    embed: str                   # input token embedding
    final_norm: str | None
    lm_head: str
    blocks: tuple[Block, ...]
    embed_proj: str | None = None  # linear after the embedding (OPT project_in), else None
    final_proj: str | None = None  # linear between final_norm and lm_head (OPT project_out), else None
    embed_norm: str | None = None  # norm applied to the token embeddings before the first block (Bloom), else None

    @property
    def norm_consumers(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Every (norm, linears that read that norm's output directly); a norm shared by attention and MLP (a
        parallel block) appears once, with the consumers of both."""
        pairs: dict[str, tuple[str, ...]] = {}
        for b in self.blocks:
            if b.attn_in_norm is not None:
                pairs[b.attn_in_norm] = pairs.get(b.attn_in_norm, ()) + ((b.qkv,) if b.qkv else (b.q, b.k, b.v))
            if b.mlp_in_norm is not None:
                pairs[b.mlp_in_norm] = pairs.get(b.mlp_in_norm, ()) + b.ffn_in
        if self.final_norm is not None:
            pairs[self.final_norm] = (self.final_proj or self.lm_head,)
        return tuple(pairs.items())


# --------------------------------------------------------------------------------------------- helpers


def get(model: nn.Module, path: str) -> nn.Module:
    """``model.get_submodule(path)``, raising :class:`ArchError` when the path does not resolve."""
    try:
        return model.get_submodule(path)
    except AttributeError as exc:
        raise ArchError(f"{_model_type(model)}: no module at path {path!r} ({exc})") from None


def _model_type(model: nn.Module) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "model_type", None) or type(model).__name__)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _child(module: nn.Module, name: str) -> nn.Module | None:
    """The submodule registered under ``name`` (None when absent or not a module, e.g. a None slot)."""
    return module._modules.get(name)


def _first_child(module: nn.Module, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if _child(module, n) is not None), None)


def _path_of(model: nn.Module, target: nn.Module | None) -> str | None:
    if target is None:
        return None
    return next((name for name, m in model.named_modules() if m is target), None)


def _in_out(module: nn.Module, mt: str = "model") -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight as an (in, out) matrix (so y = x @ W + b) and the bias (:func:`bench.models.linear.in_out`)."""
    try:
        return linear.in_out(module)
    except TypeError:
        raise ArchError(f"{mt}: projection {type(module).__name__} is neither nn.Linear nor Conv1D; "
                        f"cannot read its weight") from None


def _hf_module(model: nn.Module, method: str) -> nn.Module | None:
    """``model.<method>()`` of a transformers model (input/output embeddings), None when it has none."""
    try:
        found = getattr(model, method)()
    except (AttributeError, NotImplementedError):
        return None
    return found if isinstance(found, nn.Module) else None


def _text_config(model: nn.Module):
    config = getattr(model, "config", None)
    if config is None:
        raise ArchError(f"{_model_type(model)}: model has no `config` attribute (need a transformers model)")
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _cfg(config, mt: str, *names: str, required: bool = True):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    if required:
        raise ArchError(f"{mt}: config has none of {', '.join(names)}")
    return None


# --------------------------------------------------------------------------------------------- layout


def _find_layers(model: nn.Module, n_layers: int, mt: str) -> str:
    """Path of the one ModuleList holding ``n_layers`` blocks that each have an attention child."""
    found = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n_layers and n_layers > 0:
            if all(_first_child(blk, _ATTN_CHILDREN) for blk in mod):
                found.append(name)
    if not found:
        raise ArchError(f"{mt}: no ModuleList of {n_layers} blocks each with a child named "
                        f"{'/'.join(_ATTN_CHILDREN)}")
    if len(found) > 1:
        raise ArchError(f"{mt}: several candidate layer lists ({', '.join(found)}); not a decoder-only layout")
    return found[0]


def _attention(attn: nn.Module, apath: str, mt: str) -> dict:
    for layout, ins, outs in _QKV_LAYOUTS:
        o = _first_child(attn, outs)
        if all(_child(attn, n) is not None for n in ins) and o is not None:
            sep = layout == "separate"
            return {
                "qkv_layout": layout, "o": _join(apath, o),
                "q": _join(apath, ins[0]) if sep else None,
                "k": _join(apath, ins[1]) if sep else None,
                "v": _join(apath, ins[2]) if sep else None,
                "qkv": None if sep else _join(apath, ins[0]),
                "q_norm": _join(apath, "q_norm") if _child(attn, "q_norm") is not None else None,
                "k_norm": _join(apath, "k_norm") if _child(attn, "k_norm") is not None else None,
            }
    wanted = "; ".join(f"{'+'.join(ins)} with {'/'.join(outs)}" for _, ins, outs in _QKV_LAYOUTS)
    raise ArchError(f"{mt}: attention module {apath!r} has none of the projection layouts ({wanted}); "
                    f"its children are {', '.join(attn._modules) or 'none'}")


def _norms(block: nn.Module, bpath: str, mt: str) -> tuple[str, dict]:
    present = {n for n, m in block.named_children() if "norm" in type(m).__name__.lower()}
    for name, roles in _NORM_LAYOUTS.items():
        if present == set(roles.values()):
            paths = {role: _join(bpath, child) for role, child in roles.items()}
            if getattr(block, "do_layer_norm_before", True) is False:  # post-norm: norms sit after the adds
                paths.pop("attn_in"), paths.pop("mlp_in")
            return name, paths
    if frozenset(present) in _REFUSED_NORMS:
        raise ArchError(f"{mt}: block {bpath!r} has norm children {{{', '.join(sorted(present))}}}: "
                        f"{_REFUSED_NORMS[frozenset(present)]}")
    known = "; ".join("{" + ", ".join(sorted(r.values())) + "}" for r in _NORM_LAYOUTS.values())
    raise ArchError(f"{mt}: block {bpath!r} has norm children {{{', '.join(sorted(present))}}}, "
                    f"which match none of the known sets: {known}")


def _ffn(block: nn.Module, bpath: str, mt: str) -> dict:
    for container, ins, act, out, gated in _FFN_LAYOUTS:
        mod = block if container is None else _child(block, container)
        if mod is None:
            continue
        if all(_child(mod, n) is not None for n in (*ins, act, out)):
            mpath = bpath if container is None else _join(bpath, container)
            if getattr(mod, "slow_but_exact", False) and getattr(mod, "pretraining_tp", 1) > 1:
                raise ArchError(f"{mt}: {mpath!r} applies {out!r} by weight slices (pretraining_tp > 1 with "
                                f"slow_but_exact), so hooks on it never fire; load with slow_but_exact = False")
            return {"mlp": mpath, "ffn_in": tuple(_join(mpath, n) for n in ins), "ffn_act": _join(mpath, act),
                    "ffn_out": _join(mpath, out), "ffn_gated": gated, "ffn_fused": gated and len(ins) == 1}
    wanted = "; ".join(f"{c or '<block>'}.{{{', '.join((*i, a, o))}}}" for c, i, a, o, _ in _FFN_LAYOUTS)
    raise ArchError(f"{mt}: block {bpath!r} has no known feed-forward layout (looked for {wanted}; "
                    f"activation must be a module child)")


def _block(model: nn.Module, index: int, bpath: str, mt: str) -> tuple[str, Block]:
    block = get(model, bpath)
    aname = _first_child(block, _ATTN_CHILDREN)
    apath = _join(bpath, aname)
    att = _attention(get(model, apath), apath, mt)
    norm_layout, norms = _norms(block, bpath, mt)
    if getattr(block, "apply_residual_connection_post_layernorm", False):
        raise ArchError(f"{mt}: block {bpath!r} adds its sublayers to the norm's output, not its input (apply_"
                        f"residual_connection_post_layernorm): folding the norm's scale would change the stream")
    family = norm_layout if att["qkv_layout"] == "separate" else att["qkv_layout"]
    return family, Block(
        index=index, path=bpath, attn=apath, **att, **_ffn(block, bpath, mt),
        attn_in_norm=norms.get("attn_in"), attn_out_norm=norms.get("attn_out"),
        mlp_in_norm=norms.get("mlp_in"), mlp_out_norm=norms.get("mlp_out"),
        parallel_residual=norm_layout in _PARALLEL_NORMS or bool(getattr(block, "use_parallel_residual", False)),
    )


def _check_blocks(model: nn.Module, blocks: tuple[Block, ...], families: set[str], mt: str,
                  n_heads: int, n_kv: int, d_head: int) -> int:
    """Consistency checks; returns d_ffn."""
    if len(families) != 1:
        raise ArchError(f"{mt}: blocks have different layouts ({', '.join(sorted(families))})")
    if n_heads % n_kv:
        raise ArchError(f"{mt}: {n_heads} query heads cannot be grouped over {n_kv} key/value heads")
    acts: dict[int, str] = {}
    for b in blocks:
        act = get(model, b.ffn_act)
        if id(act) in acts:
            raise ArchError(f"{mt}: activation module {b.ffn_act!r} is the same instance as {acts[id(act)]!r}; "
                            f"hooks on it could not tell the layers apart")
        acts[id(act)] = b.ffn_act
    if blocks[0].qkv_layout == "separate":
        expect = {blocks[0].q: n_heads * d_head, blocks[0].k: n_kv * d_head, blocks[0].v: n_kv * d_head}
    elif blocks[0].qkv_layout == "gpt2":
        if n_kv != n_heads:
            raise ArchError(f"{mt}: fused c_attn with {n_kv} kv heads != {n_heads} query heads is not understood")
        expect = {blocks[0].qkv: 3 * n_heads * d_head}
    else:
        expect = {b.qkv: (n_heads + 2 * n_kv) * d_head for b in blocks}
    d_ffns = {_in_out(get(model, b.ffn_out), mt)[0].shape[0] for b in blocks}
    if len(d_ffns) != 1:
        raise ArchError(f"{mt}: blocks have different FFN widths {sorted(d_ffns)}")
    expect.update({b.ffn_in[0]: 2 * min(d_ffns) for b in blocks if b.ffn_fused})  # [gate | up]
    for path, width in expect.items():
        if (got := _in_out(get(model, path), mt)[0].shape[1]) != width:
            raise ArchError(f"{mt}: {path!r} has {got} outputs; the config's heads (or d_ffn) imply {width}")
    return d_ffns.pop()


def _fused_kv_heads(model: nn.Module, path: str, n_heads: int, d_head: int, mt: str) -> int:
    """Key/value heads of a grouped fused projection, from its width (H + 2·n_kv)·d_head."""
    width = _in_out(get(model, path), mt)[0].shape[1]
    n_kv, rest = divmod(width // d_head - n_heads, 2) if width % d_head == 0 else (0, 1)
    if rest or n_kv < 1 or n_heads % n_kv:
        raise ArchError(f"{mt}: fused projection {path!r} has {width} outputs, which is not (H + 2·n_kv)·d_head "
                        f"for H = {n_heads}, d_head = {d_head} and any n_kv dividing H")
    return n_kv


# --------------------------------------------------------------------------------------------- API


def inspect(model: nn.Module) -> Arch:
    """Locate every part of ``model``; raises :class:`ArchError` on a layout this module does not know."""
    config = _text_config(model)
    mt = _model_type(model)
    n_layers = int(_cfg(config, mt, "num_hidden_layers", "n_layer"))
    d_model = int(_cfg(config, mt, "hidden_size", "n_embd", "d_model"))
    n_heads = int(_cfg(config, mt, "num_attention_heads", "n_head"))
    n_kv = int(_cfg(config, mt, "num_key_value_heads", required=False) or n_heads)
    d_head = int(_cfg(config, mt, "head_dim", required=False) or d_model // n_heads)
    vocab = int(_cfg(config, mt, "vocab_size"))

    layers = _find_layers(model, n_layers, mt)
    built = [_block(model, i, _join(layers, str(i)), mt) for i in range(n_layers)]
    blocks = tuple(b for _, b in built)
    if blocks[0].qkv_layout == "neox":
        n_kv = _fused_kv_heads(model, blocks[0].qkv, n_heads, d_head, mt)
    d_ffn = _check_blocks(model, blocks, {f for f, _ in built}, mt, n_heads, n_kv, d_head)

    parent_path = layers.rpartition(".")[0]
    parent = get(model, parent_path)
    final = _first_child(parent, _FINAL_NORMS)
    embed_norm = _embed_norm(parent, final, mt)
    embed = _path_of(model, _hf_module(model, "get_input_embeddings"))
    lm_head = _path_of(model, _hf_module(model, "get_output_embeddings"))
    lm_head = lm_head or ("lm_head" if _child(model, "lm_head") is not None else None)
    if embed is None:
        raise ArchError(f"{mt}: no input embedding module (get_input_embeddings) inside the model")
    if lm_head is None:
        raise ArchError(f"{mt}: no output head (get_output_embeddings or a child named lm_head)")
    family = built[0][0]
    if final is None and family != "opt":  # only OPT configs may drop the final norm
        raise ArchError(f"{mt}: no final norm named {'/'.join(_FINAL_NORMS)} next to {layers!r}")
    return Arch(
        family=family, model_type=mt, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
        n_kv_heads=n_kv, d_head=d_head, d_ffn=d_ffn, vocab_size=vocab, embed=embed,
        final_norm=_join(parent_path, final) if final else None, lm_head=lm_head, blocks=blocks,
        embed_proj=_join(parent_path, "project_in") if _child(parent, "project_in") is not None else None,
        final_proj=_join(parent_path, "project_out") if _child(parent, "project_out") is not None else None,
        embed_norm=_join(parent_path, embed_norm) if embed_norm else None,
    )


def _embed_norm(parent: nn.Module, final: str | None, mt: str) -> str | None:
    """The norm beside the blocks that acts on the embeddings (Bloom), or None; any other norm there but the final
    one is refused: where it acts on the stream cannot be told from the tree."""
    others = [n for n, m in parent.named_children() if n != final and "norm" in type(m).__name__.lower()]
    if len(others) > 1 or any(n not in _EMBED_NORMS for n in others):
        raise ArchError(f"{mt}: norm module(s) {', '.join(others)} next to the blocks are neither the final norm nor "
                        f"one embedding norm named {'/'.join(_EMBED_NORMS)}; where they act is not known")
    return others[0] if others else None


__all__ = ["Arch", "ArchError", "Block", "get", "inspect"]
