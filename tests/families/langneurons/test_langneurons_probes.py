"""Every probe of the family end to end on tiny gated (Llama) and non-gated (GPT-2) models, schemas and charts
included; and, marked embedded, the real multilingual model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.models import arch as arch_mod
from tests.conftest import build_tiny
from tests.corpora.test_corpora_parallel import fake_locales

CORPUS = "gettext:en,de,fr,ru"
SMALL = {"corpus": CORPUS, "eval_texts": 4, "selection_tokens": 64, "doc_tokens": 16, "pv_tokens": 16,
         "top_rate": 0.05}
RUNS = [
    ("activation_stats", {"methods": ["lape", "lap", "lave", "pv", "rs", "plnd", "rs-plnd"]}),
    ("layer_distribution", {"methods": ["lape", "plnd"]}),
    ("deactivation", {"full": ["lape", "plnd"], "diagonal": ["lap", "lave", "pv", "rs", "rs-plnd"]}),
    ("deactivation", {"full": [], "diagonal": ["plnd"], "band": "understanding"}),
    ("steering", {"n_prompts": 2, "max_new_tokens": 4, "targets": ["de", "ru"]}),
]


@pytest.fixture
def tiny_ctx(request, tmp_path, monkeypatch, tiny_tokenizer, one_thread):
    monkeypatch.setenv("BENCH_LOCALE_DIR", str(fake_locales(tmp_path / "locale")))
    hf = build_tiny(request.param, vocab=len(tiny_tokenizer))
    model = SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), tokenizer=tiny_tokenizer, device=torch.device("cpu"),
                            dtype=torch.float32, fingerprint=f"tiny-{request.param}")
    yield ProbeContext(model=model, seed=0, cache=Cache(tmp_path / "cache"))


def run(ctx, name, params):
    info = registry.probe(name)
    assert not info.check(params), info.check(params)
    frame = schemas.validate(info.call(ctx, **params), info.schema, info.metrics)
    return frame


@pytest.mark.parametrize("tiny_ctx", ["llama", "gpt2"], indirect=True)
def test_every_probe_runs_validates_and_charts(tiny_ctx):
    import vl_convert

    from bench.ground.charts import chart_for

    for name, extra in RUNS:
        f = run(tiny_ctx, name, {**SMALL, **extra})
        assert len(f) > 0
        chart = chart_for(name)(f)
        if chart is not None:
            assert vl_convert.vegalite_to_svg(chart.to_json()).startswith("<svg")
        if name == "deactivation" and extra["full"]:
            d = f[f["metric"] == "delta_bpb"]
            assert set(d[d["method"] == "lape"]["language"]) == {"en", "de", "fr", "ru"}
            assert len(d[d["method"] == "lape"]) == 16 and len(d[d["method"] == "rs"]) == 4
            bits = f[(f["metric"] == "bits") & (f["method"] == "none")]
            assert len(bits) == 16  # 4 texts × 4 languages
    f = run(tiny_ctx, "deactivation", {**SMALL, "full": ["lape"], "diagonal": ["lap", "lave", "pv", "rs"],
                                       "sized_like": "lape"})
    n = f[f["metric"] == "n_ablated"].pivot_table(index="set_lang", columns="method", values="value")
    assert all((n[m] == n["lape"]).all() for m in ("lap", "lave", "pv", "rs")), n  # every set LAPE's size
    unsized = run(tiny_ctx, "deactivation", {**SMALL, "full": ["lape"], "diagonal": ["lap"]})
    u = unsized[unsized["metric"] == "n_ablated"].pivot_table(index="set_lang", columns="method", values="value")
    assert (u["lap"] != u["lape"]).any(), u  # left to its own rule, LAP's sizes differ
    f = run(tiny_ctx, "crosslingual_similarity", {"corpus": CORPUS, "eval_texts": 4, "n_texts": 4})
    assert set(f["layer"].dropna()) == {0, 1}
    assert chart_for("crosslingual_similarity")(f) is not None


@pytest.mark.parametrize("tiny_ctx", ["llama"], indirect=True)
def test_deactivation_rows_agree_with_an_unmemoised_computation(tiny_ctx):
    from bench.families.langneurons import edit, shared

    f = run(tiny_ctx, "deactivation", {**SMALL, "full": ["lape"], "diagonal": []})
    setup = shared.Setup(corpus=CORPUS, languages=(), eval_texts=4, selection_tokens=64, doc_tokens=16,
                         top_rate=0.05, pv_tokens=16)
    sp = shared.split(setup, 0)
    sel = shared.selections(tiny_ctx, setup, sp, ["lape"])["lape"]
    m = tiny_ctx.model
    for x in ("de", "ru"):
        texts = sp.evaluation.side("fr")
        base, nbytes = edit.text_bits(m, texts)
        bits, _ = edit.text_bits(m, texts, edits=edit.neuron_edits(m.arch, sel[x]) if len(sel[x]) else None)
        want = (bits - base).sum() / nbytes.sum()
        got = f[(f["metric"] == "delta_bpb") & (f["set_lang"] == x) & (f["language"] == "fr")]["value"].item()
        assert got == pytest.approx(want, abs=1e-9)


@pytest.mark.embedded
def test_family_on_the_embedded_multilingual_model():
    """LAPE on gemma3-270m with a small budget: selection, a deactivation diagonal and a random baseline."""
    from bench import models

    m = models.load(models.resolve("gemma3-270m"))
    ctx = ProbeContext(model=m, seed=0, cache=None)
    params = {"corpus": "gettext:en,de,fr,es,ru,ja,zh_CN", "languages": ["en", "de", "ru", "zh_CN"],
              "eval_texts": 8, "selection_tokens": 512, "doc_tokens": 128}
    stats = run(ctx, "activation_stats", {**params, "methods": ["lape"]})
    counts = stats[stats["metric"] == "n_selected"].set_index("set_lang")["value"]
    assert counts.sum() > 0
    f = run(ctx, "deactivation", {**params, "full": [], "diagonal": ["lape", "rs"]})
    d = f[f["metric"] == "delta_bpb"].pivot_table(index="set_lang", columns="method", values="value")
    assert np.isfinite(d.to_numpy()).all()
    assert d["lape"].mean() > d["rs"].mean()  # zeroing language neurons costs more than random ones
