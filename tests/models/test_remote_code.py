"""Code shipped inside a checkpoint never runs and never prompts; the fingerprint covers the tokenizer files."""

from __future__ import annotations

import builtins
import io
import json
import shutil
import sys

import pytest

from bench import models
from bench.ground.errors import ModelError

EVIL = '''
import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("custom tokenizer code ran")
from transformers import PreTrainedTokenizerFast
class EvilTokenizerFast(PreTrainedTokenizerFast):
    pass
'''


def _with_custom_tokenizer(src, dst):
    shutil.copytree(src, dst)
    (dst / "tokenization_evil.py").write_text(EVIL)
    cfg_path = dst / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "EvilTokenizerFast"
    cfg["auto_map"] = {"AutoTokenizer": [None, "tokenization_evil.EvilTokenizerFast"]}
    cfg_path.write_text(json.dumps(cfg))
    return dst


def test_tokenizer_with_custom_code_is_refused_without_a_prompt(tiny_model_dir, tmp_path, monkeypatch):
    folder = _with_custom_tokenizer(tiny_model_dir, tmp_path / "evil")
    asked = []
    monkeypatch.setattr(builtins, "input", lambda *a, **k: asked.append(a) or "y")  # a user who says yes
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\ny\n"))
    with pytest.raises(ModelError, match="custom code") as exc:
        models.load(models.resolve(str(folder)), "cpu")
    assert "\n" not in str(exc.value)
    assert not asked, "transformers asked whether to run the checkpoint's code"
    assert not (folder / "RAN").exists(), "the checkpoint's tokenizer code ran"


def test_fingerprint_covers_tokenizer_files(tiny_model_dir, tmp_path):
    a = tmp_path / "a"
    shutil.copytree(tiny_model_dir, a)
    b = tmp_path / "b"
    shutil.copytree(tiny_model_dir, b)
    fa = models.resolve(str(a)).fingerprint()
    assert models.resolve(str(b)).fingerprint() == fa  # same files, same identity, wherever they are
    tok = json.loads((b / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": 319, "content": "<extra>", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})
    (b / "tokenizer.json").write_text(json.dumps(tok))
    assert models.resolve(str(b)).fingerprint() != fa
    (a / "notes.md").write_text("not part of the model")
    assert models.resolve(str(a)).fingerprint() == fa


def test_over_long_model_name_is_a_model_error():
    with pytest.raises(ModelError):
        models.resolve("x" * 300)
    with pytest.raises(ModelError):
        models.resolve("/tmp/" + "y" * 300 + "/model")
