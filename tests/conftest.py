"""Shared fixtures: tiny random-weight models saved as checkpoint folders, a CLI runner, a --device option.

Every test gets its own empty ``$BENCH_CACHE`` unless it is marked ``embedded`` (those use the cache that
``make setup`` filled with the converted embedded models).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=["cpu", "cuda"], help="device for model tests")


@pytest.fixture(scope="session")
def device(request) -> str:
    dev = request.config.getoption("--device")
    if dev == "cuda" and not torch.cuda.is_available():
        pytest.skip("--device cuda but no CUDA device")
    return dev


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls on a shared 2-core machine run far faster on one intra-op thread; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def _session_calibration(tmp_path_factory) -> Path:
    """One folder of machine rates for the whole session: `bench verify` plans a run before it starts, and the
    plan measures this machine once per cache (seconds); isolated caches share these rates."""
    return tmp_path_factory.mktemp("calibration")


@pytest.fixture(autouse=True)
def _isolated_cache(request, tmp_path, monkeypatch, _session_calibration):
    if request.node.get_closest_marker("embedded") is None:
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "bench-cache"))
        (tmp_path / "bench-cache").mkdir(exist_ok=True)
        (tmp_path / "bench-cache" / "calibration").symlink_to(_session_calibration, target_is_directory=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def _tokenizer(vocab: int = 256):
    """A small byte-level BPE tokenizer trained on the builtin English text (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from bench.corpora.builtin import ENGLISH

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(ENGLISH) * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def build_tiny(family: str = "llama", seed: int = 0, vocab: int | None = None, **over):
    """A tiny random-weight causal LM of the given family, with norm weights away from their defaults."""
    import transformers as tf

    torch.manual_seed(seed)
    v = vocab or 320
    common = dict(vocab_size=v, num_hidden_layers=2, num_attention_heads=4, hidden_size=32)
    common.update({k: over.pop(k) for k in list(over) if k in common})  # e.g. num_hidden_layers=3
    if family == "llama":
        cfg = tf.LlamaConfig(**common, intermediate_size=64, num_key_value_heads=2, max_position_embeddings=256,
                             tie_word_embeddings=True, **over)
        model = tf.LlamaForCausalLM(cfg)
    elif family == "gemma3":
        cfg = tf.Gemma3TextConfig(**common, intermediate_size=64, num_key_value_heads=1, head_dim=8,
                                  max_position_embeddings=256, sliding_window=64, query_pre_attn_scalar=8, **over)
        model = tf.Gemma3ForCausalLM(cfg)
    elif family == "gpt2":
        cfg = tf.GPT2Config(vocab_size=v, n_layer=2, n_head=4, n_embd=32, n_positions=256, **over)
        model = tf.GPT2LMHeadModel(cfg)
    elif family == "phi":  # parallel block: one norm feeds attention and MLP
        cfg = tf.PhiConfig(**common, intermediate_size=64, max_position_embeddings=256, **over)
        model = tf.PhiForCausalLM(cfg)
    elif family == "gptj":
        cfg = tf.GPTJConfig(vocab_size=v, n_layer=2, n_head=4, n_embd=32, rotary_dim=4, n_positions=256, **over)
        model = tf.GPTJForCausalLM(cfg)
    elif family == "falcon":  # multi-query, parallel attention
        cfg = tf.FalconConfig(**common, bias=True, **over)
        model = tf.FalconForCausalLM(cfg)
    elif family == "falcon_new":  # new decoder: ln_attn / ln_mlp, grouped kv heads
        cfg = tf.FalconConfig(**common, new_decoder_architecture=True, num_kv_heads=2, **over)
        model = tf.FalconForCausalLM(cfg)
    elif family == "phi3":  # fused [q | k | v] and [gate | up] linears, grouped kv heads
        cfg = tf.Phi3Config(**common, intermediate_size=64, num_key_value_heads=2, max_position_embeddings=256,
                            **{"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, **over})
        model = tf.Phi3ForCausalLM(cfg)
    elif family == "bloom":  # per-head fused q|k|v, a LayerNorm on the embeddings, ALiBi
        cfg = tf.BloomConfig(vocab_size=v, n_layer=2, n_head=4, hidden_size=32, **over)
        model = tf.BloomForCausalLM(cfg)
    else:
        raise ValueError(family)
    with torch.no_grad():  # make norm scales and biases non-trivial, so folding them is a real test
        for name, p in model.named_parameters():
            if "norm" in name or ".ln_" in name or name.endswith(("ln_f.weight", "ln_f.bias")):  # ln_attn, ln_mlp too
                p.add_(0.3 * torch.randn_like(p))
    model.eval()
    return model


def tiny_folders(families, tokenizer, root) -> list:
    """One saved checkpoint folder per family (a tiny random model of :func:`build_tiny` and `tokenizer`), in
    `root`/tiny-<family>, for tests that run the CLI on them."""
    dirs = []
    for family in families:
        dirs.append(root / f"tiny-{family}")
        build_tiny(family, vocab=len(tokenizer)).save_pretrained(dirs[-1])
        tokenizer.save_pretrained(dirs[-1])
    return dirs


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return _tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """A saved tiny Llama-family checkpoint folder (safetensors + tokenizer)."""
    d = tmp_path_factory.mktemp("tiny-llama")
    model = build_tiny("llama", vocab=len(tiny_tokenizer))
    model.save_pretrained(d)
    tiny_tokenizer.save_pretrained(d)
    return d


@pytest.fixture
def loaded_tiny(tiny_model_dir, device):
    from bench import models

    return models.load(models.resolve(str(tiny_model_dir)), device)


@pytest.fixture(scope="module")
def smollm():
    """The embedded SmolLM2-135M, loaded once per test module (skips when `make setup` has not prepared it)."""
    from bench import models

    if models.cache_state("smollm2-135m") != "ready":
        pytest.skip("embedded model smollm2-135m is not prepared (make setup)")
    return models.load(models.resolve("smollm2-135m"))


@pytest.fixture
def cli():
    from click.testing import CliRunner

    from bench.cli import main

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def specs_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "specs"


@pytest.fixture
def chdir_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _quiet_machine(monkeypatch):
    """Every test sees an idle machine (load 0), so no output depends on what else runs: `bench verify` adds a
    busy-CPU note to its output when the load is high.  The tests of that note set the load themselves."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0), raising=False)
