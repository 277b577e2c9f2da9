"""The real embedded models, end to end (marked `embedded`; needs `make setup`)."""

from __future__ import annotations

import json

import pytest

from bench import models

pytestmark = pytest.mark.embedded

ALIASES = ("smollm2-135m", "gemma3-270m")


@pytest.fixture(scope="module", autouse=True)
def _need_models():
    missing = [a for a in ALIASES if models.cache_state(a) == "not installed"]
    if missing:
        pytest.skip(f"embedded models not installed: {missing} (run make setup)")


def test_circuits_on_both_embedded_models(cli, specs_dir, tmp_path, monkeypatch):
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    r = cli("verify", specs_dir / "circuits", "--runs-dir", runs, "--report-dir", reports)
    assert r.exit_code == 0, r.output
    (run,) = runs.iterdir()
    record = json.loads((run / "record.json").read_text())
    cells = {(c["spec"]["id"], c["model"]): c for c in record["cells"]}
    assert len(cells) == 5 * 2 and {m for _, m in cells} == set(ALIASES)
    for cell in cells.values():
        v = cell["verdict"]
        assert v["outcome"] in ("SUPPORTED", "REFUTED", "INCONCLUSIVE"), (cell["spec"]["id"], v)
        assert (run / cell["frame"]).is_file()
        assert cell["fingerprint"].startswith("gguf-sha256:")
    # Facts about these models that the measurement must reproduce (see shared ASSETS: the repeat loss drops
    # from ~13 to ~2 nats on SmolLM2 and from ~17 to ~5.5 on Gemma), whatever the verdict rule decides.
    for model in ALIASES:
        ind = cells[("circuits.induction-heads-exist", model)]["verdict"]
        assert ind["parts"][1]["estimate"] > 5.0
    assert (reports / run.name / "index.html").is_file() and (reports / run.name / "report.pdf").is_file()
    assert f"report: {reports / run.name / 'index.html'}" in r.output

    def no_loading(*a, **kw):
        raise AssertionError("a cached re-run must not load a model")

    monkeypatch.setattr(models, "load", no_loading)
    r = cli("verify", specs_dir / "circuits", "--runs-dir", runs, "--no-report")
    assert r.exit_code == 0, r.output
    second = sorted(runs.iterdir())[-1]
    again = json.loads((second / "record.json").read_text())["cells"]
    assert all(c["cache_hit"] for c in again)
    assert [c["verdict"]["outcome"] for c in again] == [c["verdict"]["outcome"] for c in record["cells"]]
