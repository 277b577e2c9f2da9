"""Reports: rendered from run records alone, self-contained, escaped, deterministic, checked in a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.report import render
from bench.report.pdf import write_pdf

HOSTILE_TITLE = "<script>alert(1)</script>"
HOSTILE_CLAIM = '<img src="file:///etc/passwd">'


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, specs_dir_module, tiny_model_dir):
    """One real run of three circuits claims (one with hostile strings) on the tiny model folder."""
    from click.testing import CliRunner

    from bench.cli import main

    root = tmp_path_factory.mktemp("report-run")
    specs = root / "specs" / "circuits"
    specs.mkdir(parents=True)
    for name in ("induction-heads-exist.toml", "k-composition.toml"):
        shutil.copy(specs_dir_module / "circuits" / name, specs / name)
    text = (specs_dir_module / "circuits" / "norm-folding-is-exact.toml").read_text()
    text = re.sub(r'^title = ".*"$', f"title = '{HOSTILE_TITLE}'", text, flags=re.M)
    text = re.sub(r'claim = """.*?"""', f"claim = '''{HOSTILE_CLAIM}'''", text, flags=re.S)
    (specs / "norm-folding-is-exact.toml").write_text(text)
    env = {"BENCH_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        r = CliRunner().invoke(main, ["verify", str(specs), "--models", str(tiny_model_dir), "--runs-dir",
                                      str(root / "runs"), "--no-report"], catch_exceptions=False)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    assert r.exit_code == 0, r.output
    (run,) = (root / "runs").iterdir()
    return run


@pytest.fixture(scope="module")
def specs_dir_module() -> Path:
    return Path(__file__).resolve().parents[2] / "specs"


@pytest.fixture(scope="module")
def rendered(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    paths = render(run_dir, out, pdf=True)
    return out, paths


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "td" and "cell" in (a.get("class") or "").split():
            self.cells.append((a.get("data-claim"), a.get("data-model")))


def test_html_has_matrix_sections_and_charts(rendered, run_dir):
    out, paths = rendered
    assert [p.name for p in paths] == ["index.html", "report.pdf"]
    html = (out / "index.html").read_text()
    record = json.loads((run_dir / "record.json").read_text())
    claims = {c["spec"]["id"] for c in record["cells"]}
    models = {c["model"] for c in record["cells"]}
    parser = Cells()
    parser.feed(html)
    assert len(parser.cells) == len(claims) * len(models) == 3
    assert {c for c, _ in parser.cells} == claims
    assert html.count("<svg") >= 3  # a chart per claim, inline
    assert "<script" not in html.replace("&lt;script", "")  # no script at all, hostile or not
    external = re.sub(r"http://www\.w3\.org/[^\"'\s]*", "", html)  # XML namespaces are names, not fetches
    assert "http://" not in external and "https://" not in external


def test_hostile_strings_are_text(rendered):
    out, _ = rendered
    html = (out / "index.html").read_text()
    assert HOSTILE_TITLE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "&lt;img src=&#34;file:///etc/passwd&#34;&gt;" in html
    text = subprocess.run(["pdftotext", str(out / "report.pdf"), "-"], capture_output=True, text=True).stdout
    assert HOSTILE_TITLE in text and HOSTILE_CLAIM in text


def test_pdf_pages_text_and_raster(rendered, run_dir, tmp_path):
    out, _ = rendered
    pdf = out / "report.pdf"
    from pypdf import PdfReader

    assert len(PdfReader(pdf).pages) > 1
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    for cell in json.loads((run_dir / "record.json").read_text())["cells"]:
        assert cell["spec"]["id"] in text
    subprocess.run(["pdftoppm", "-png", "-r", "40", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "p")], check=True)
    page = next(tmp_path.glob("p*.png"))
    assert page.stat().st_size > 1000


def test_rendering_is_deterministic(run_dir, rendered, tmp_path):
    out, _ = rendered
    render(run_dir, tmp_path, pdf=False)
    strip = lambda s: re.sub(r"Rendered [0-9T:+\-]+", "", s)  # noqa: E731
    assert strip((tmp_path / "index.html").read_text()) == strip((out / "index.html").read_text())


def test_pdf_fetcher_serves_only_the_report_folder(tmp_path):
    (tmp_path / "inside.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')
    outside = tmp_path.parent / "outside-secret.css"
    outside.write_text("body { color: red }")
    html = (f'<link rel="stylesheet" href="{outside.as_uri()}">'
            '<img src="file:///etc/passwd"><img src="http://example.invalid/x.png"><img src="inside.svg"><p>hi</p>')
    data, refused = write_pdf(html, tmp_path)
    assert data.startswith(b"%PDF")
    assert outside.as_uri() in refused and "file:///etc/passwd" in refused
    assert "http://example.invalid/x.png" in refused
    assert not any("inside.svg" in u for u in refused)


def test_report_command_loads_no_model(cli, run_dir, tmp_path, monkeypatch):
    from bench import models

    monkeypatch.setattr(models, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded a model")))
    r = cli("report", run_dir, "--out", tmp_path / "again")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "again" / "index.html").is_file() and (tmp_path / "again" / "report.pdf").is_file()


def test_diff_html(cli, run_dir, tmp_path):
    r = cli("diff", run_dir, run_dir, "--html", tmp_path / "diff.html")
    assert r.exit_code == 0 and "no differences" in r.output
    assert "No cell changed" in (tmp_path / "diff.html").read_text()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (make setup installs it)")
def test_report_in_headless_chromium(rendered, tmp_path):
    from playwright.sync_api import sync_playwright

    out, _ = rendered
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: errors.append(f"request {r.url}") if not r.url.startswith("file:") else None)
            page.goto((out / "index.html").as_uri())
            assert page.locator("table.matrix td.cell").count() == 3
            assert page.locator(".chart svg").count() >= 3
            page.screenshot(path=str(tmp_path / "shot.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert (tmp_path / "shot.png").stat().st_size > 10_000


def test_latin_cyrillic_chinese_japanese_render_in_pdf(tmp_path):
    """The report font stack covers these scripts: the text survives into the PDF with a Noto font embedded."""
    from bench.ground.resources import templates_dir

    sample = "Grüße · Привет мир · 语言神经元 · 言語ニューロン"
    css = (templates_dir() / "report.css").read_text()
    data, _ = write_pdf(f"<html><head><style>{css}</style></head><body><p>{sample}</p></body></html>", tmp_path)
    pdf = tmp_path / "scripts.pdf"
    pdf.write_bytes(data)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert all(word in text for word in sample.split(" · "))
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert "Noto-Sans-CJK" in fonts and "+Noto-Sans " in fonts, fonts
