"""A probe that reads a second model gets it from the run, and that model's fingerprint is in the cell's key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

TINY = """
[profiles.smoke]
data.n_texts = 6
data.max_tokens = 16
measure.n_eval = 3
measure.n_train = 3
measure.prefix = 3
measure.decoder_layers = 1
measure.lora_rank = 2
measure.steps = 3
measure.batch = 8
measure.vocab = "corpus"
"""


@pytest.fixture
def pair_spec(specs_dir, tmp_path, tiny_model_dir) -> tuple[Path, Path]:
    """The base/instruct spec with a tiny base model and a second tiny folder (other weights) as its variant."""
    variant = tmp_path / "tiny-variant"
    shutil.copytree(tiny_model_dir, variant)
    _perturb(variant)
    text = (specs_dir / "notes" / "correlation-unstable-base-vs-instruct.toml").read_text()
    text = text.replace('instruct_of = { "meta-llama/Meta-Llama-3-8B" = "meta-llama/Meta-Llama-3-8B-Instruct" }',
                        f'instruct_of = {{ "{tiny_model_dir}" = "{variant}" }}')
    text = text[:text.index("[profiles.smoke]")] + TINY
    d = tmp_path / "specs" / "notes"
    d.mkdir(parents=True)
    (d / "correlation-unstable-base-vs-instruct.toml").write_text(text)
    return d, variant


def _perturb(folder: Path, scale: float = 1.01) -> None:
    from safetensors.torch import load_file, save_file

    path = next(folder.glob("*.safetensors"))
    weights = load_file(path)
    name = next(k for k in weights if k.endswith("embed_tokens.weight"))
    weights[name] = weights[name] * scale
    save_file(weights, path, metadata={"format": "pt"})


def _cell(tmp_path) -> dict:
    runs = sorted((tmp_path / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return json.loads((runs[-1] / "record.json").read_text())["cells"][0]


def test_companion_is_loaded_by_the_run_and_keyed_by_its_fingerprint(cli, pair_spec, tiny_model_dir, chdir_tmp,
                                                                       monkeypatch):
    specs, variant = pair_spec
    monkeypatch.setenv("BENCH_NO_REPLAY", "1")
    r = cli("verify", specs, "--models", str(tiny_model_dir), "--no-report")
    assert r.exit_code in (0, 1), r.output
    first = _cell(chdir_tmp)
    assert first["verdict"]["outcome"] != "ERROR", first["verdict"]["reason"]
    assert any(n.startswith("instruct (") for n in first["notes"])  # the variant was measured too
    from bench import models

    fp = models.resolve(str(variant)).fingerprint()
    cli("verify", specs, "--models", str(tiny_model_dir), "--no-report")
    assert _cell(chdir_tmp)["cache_hit"] is True  # unchanged companion: served from the cache

    _perturb(variant, 1.02)  # the variant's weights change, its name does not
    assert models.resolve(str(variant)).fingerprint() != fp
    r = cli("verify", specs, "--models", str(tiny_model_dir), "--no-report")
    again = _cell(chdir_tmp)
    assert again["cache_hit"] is False and again["cache_key"] != first["cache_key"]


def test_an_undeclared_companion_is_refused():
    from bench.ground.context import ProbeContext
    from bench.ground.errors import BenchError, ModelError

    with pytest.raises(ModelError, match="no companion models"):
        ProbeContext(model=None, seed=0).companion("other")
    from bench.spine.cells import ModelCells

    cells = ModelCells.__new__(ModelCells)
    cells.companion_models = {}
    with pytest.raises(BenchError, match="do not declare"):
        cells._load_companion("other", ["declared"])
