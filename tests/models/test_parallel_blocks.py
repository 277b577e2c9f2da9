"""Parallel attention/MLP blocks (Phi, GPT-J, Falcon): the norm-based probes run on a tiny random model of each,
end to end through the CLI, and the shared norm is folded once into both of its readers."""

from __future__ import annotations

import json
import shutil

import torch

from bench.models import arch, folding
from tests.conftest import build_tiny, tiny_folders

FAMILIES = ["phi", "gptj", "falcon", "falcon_new"]


def test_shared_norm_folded_once_into_attention_and_mlp():
    model = build_tiny("phi")
    a = arch.inspect(model)
    b0 = a.blocks[0]
    assert b0.attn_in_norm == b0.mlp_in_norm and b0.parallel_residual
    consumers = dict(a.norm_consumers)[b0.attn_in_norm]
    assert set(consumers) == {b0.q, b0.k, b0.v, *b0.ffn_in}
    before = arch.get(model, b0.ffn_in[0]).weight.detach().clone()
    gamma = folding.measure(arch.get(model, b0.attn_in_norm), a.d_model).gamma
    folded, _ = folding.folded_copy(model)
    after = arch.get(folded, b0.ffn_in[0]).weight
    torch.testing.assert_close(after, before * gamma[None, :])  # the MLP side got γ, not an identity fold


def test_norm_probes_run_on_parallel_blocks(cli, specs_dir, tiny_tokenizer, tmp_path, chdir_tmp):
    """One run, one tiny model per family (one CLI call keeps the test quick)."""
    dirs = tiny_folders(FAMILIES, tiny_tokenizer, tmp_path)
    d = chdir_tmp / "specs"
    (d / "circuits").mkdir(parents=True)
    (d / "microscope").mkdir()
    shutil.copy(specs_dir / "circuits" / "norm-folding-is-exact.toml", d / "circuits")
    layer = (specs_dir / "microscope" / "layers-nearly-linear.toml").read_text()
    (d / "microscope" / "layers-nearly-linear.toml").write_text(  # builtin text: no tagged corpus needed; a
        layer.replace('corpus = "brown:all"', 'corpus = "builtin:english"')  # 2-layer model keeps both pairs
             .replace("skip_first = 1", "skip_first = 0").replace("skip_last = 1", "skip_last = 0")
             .replace("data.n_texts = 64", "data.n_texts = 12").replace("data.max_tokens = 32", "data.max_tokens = 16"))
    r = cli("verify", d, "--models", ",".join(map(str, dirs)), "--no-report", "--json")
    assert r.exit_code == 0, r.output
    rows = {(row["claim"], row["model"]): row for row in json.loads(r.stdout)}
    assert len(rows) == 2 * len(FAMILIES)
    for family in FAMILIES:
        fold = rows["circuits.norm-folding-is-exact", f"tiny-{family}"]
        assert fold["outcome"] == "SUPPORTED", fold  # folding is exact on every layout bench reads
        assert fold["estimate"] is not None and fold["estimate"] <= 1e-4
        layer = rows["microscope.layers-nearly-linear", f"tiny-{family}"]
        # it measured (12 texts of a random model: the held-out CI may well straddle the threshold)
        assert layer["outcome"] in ("SUPPORTED", "REFUTED", "INCONCLUSIVE"), (layer["reason"], layer)
        assert layer["estimate"] is not None and 0.0 <= layer["estimate"] <= 1.0, layer
