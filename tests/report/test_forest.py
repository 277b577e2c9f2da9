"""The report of a run with two or more models shows a forest plot per claim; the PDF carries every row."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.core.synthetic_runs import make_run

MODELS = {"alpha-model": 0.6, "beta-model": 0.9, "gamma-model": 1.3, "alpha-model+random-init": 0.0}


@pytest.fixture
def run(tmp_path):
    rng = np.random.default_rng(0)
    return make_run(tmp_path / "runs", [{"claim": "fam.a", "model": m, "values": rng.normal(mu, 1.0, 30)}
                                        for m, mu in MODELS.items()])


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs pdftotext (poppler-utils)")
def test_forest_plot_rows_are_in_the_pdf(run, cli, tmp_path):
    out = tmp_path / "rep"
    r = cli("report", run, "--out", out)
    assert r.exit_code == 0, r.output
    text = subprocess.run(["pdftotext", "-layout", str(out / "report.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    section = text[text.index("Across models"):]
    chart = section[:section.index(" row ")]  # the plot's labels come before the table under it
    for label in [*MODELS, "pooled (random effects)", "new model (prediction)"]:
        assert label in chart, label
    assert "holds on 3 of 3 models" in section and "control, not pooled" in chart
    html = (out / "index.html").read_text()
    figure = html[html.index('<figure class="chart forest">'):]
    figure = figure[:figure.index("</figure>")]
    assert all(m in figure for m in MODELS)  # drawn in the SVG itself, not only in the table


def test_one_model_and_its_control_get_no_forest(tmp_path, cli):
    rng = np.random.default_rng(1)
    run = make_run(tmp_path / "runs", [{"claim": "fam.a", "model": m, "values": rng.normal(1, 1, 20)}
                                       for m in ("alpha-model", "alpha-model+random-init")])
    out = tmp_path / "rep"
    assert cli("report", run, "--out", out, "--no-pdf").exit_code == 0
    assert "Across models" not in (out / "index.html").read_text()
