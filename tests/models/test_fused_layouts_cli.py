"""Phi-3 (fused q|k|v and gate|up linears) and Bloom (per-head fused q|k|v, embedding LayerNorm, ALiBi, no sdpa):
a tiny random checkpoint folder of each runs the weight-reading circuits claims end to end through the CLI."""

from __future__ import annotations

import json
import shutil

FAMILIES = ["phi3", "bloom"]
SPECS = ("norm-folding-is-exact", "direct-path-bigrams")  # k-composition runs too, but scores heads first (+40 s)


def test_circuits_claims_measure_on_phi3_and_bloom(cli, specs_dir, tiny_tokenizer, tmp_path, chdir_tmp):
    from tests.conftest import tiny_folders

    dirs = tiny_folders(FAMILIES, tiny_tokenizer, tmp_path)
    d = chdir_tmp / "specs" / "circuits"
    d.mkdir(parents=True)
    for name in SPECS:
        shutil.copy(specs_dir / "circuits" / f"{name}.toml", d)
    bigrams = d / "direct-path-bigrams.toml"  # builtin text: no corpus on disk needed
    bigrams.write_text(bigrams.read_text().replace('corpus = "brown_text:all"', 'corpus = "builtin:english"'))
    r = cli("verify", d.parent, "--models", ",".join(map(str, dirs)), "--profile", "smoke", "--no-report", "--json")
    assert r.exit_code in (0, 1), r.output
    rows = {(row["claim"], row["model"]): row for row in json.loads(r.stdout)}
    assert len(rows) == len(SPECS) * len(FAMILIES)
    for (claim, model), row in rows.items():
        assert row["outcome"] not in ("ERROR", "SKIPPED"), (claim, model, row.get("reason"))
    for family in FAMILIES:
        fold = rows["circuits.norm-folding-is-exact", f"tiny-{family}"]
        assert fold["outcome"] == "SUPPORTED" and fold["estimate"] <= 1e-4, fold
