"""The built wheel is the tool: installed into a fresh venv, outside the checkout, it finds its specs and
templates, records a run and renders its report.

The venv reuses the test interpreter's packages (``--system-site-packages`` plus a path file naming this
environment's site-packages), so nothing is downloaded; only the wheel itself is installed into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
SKIP = shutil.ignore_patterns(".git", ".venv", "runs", "reports", "build", "dist", "*.egg-info", "__pycache__",
                              ".pytest_cache", "tests", "benchmarks_out")


def _run(cmd, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, environment) with the freshly built bench wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist, venv = tmp / "src", tmp / "dist", tmp / "venv"
    shutil.copytree(REPO, src, ignore=SKIP)  # build from a clean copy: no stale build/ of the checkout
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)  # the checkout must not be importable
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, src],
             tmp, env)
    assert r.returncode == 0, r.stderr
    (wheel,) = dist.glob("bench-*.whl")
    r = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], tmp, env)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).stdout.strip()
    here = sysconfig.get_paths()["purelib"]
    if Path(here).resolve() != Path(purelib).resolve():  # this environment's packages, behind the venv's own
        Path(purelib, "zz-test-deps.pth").write_text(here + "\n")
    r = _run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "-q", wheel], tmp,
             env)
    assert r.returncode == 0, r.stderr
    return py, env, wheel, tmp


def test_wheel_contents(installed):
    _, _, wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "bench/_data/templates/report.html.j2" in names and "bench/_data/templates/report.css" in names
    assert "bench/_data/specs/circuits/norm-folding-is-exact.toml" in names
    assert not any(n.startswith("benchmarks/") for n in names)  # the top-level scripts folder is not a package
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in names)


def test_installed_tool_outside_the_checkout(installed, tiny_model_dir):
    py, env, _, tmp = installed
    work = tmp / "work"
    work.mkdir()
    bench = py.parent / "bench"
    where = _run([py, "-c", "import bench, bench.ground.resources as r; print(bench.__file__); print(r.installed_specs())"],
                 work, env)
    module, specs = where.stdout.split()
    assert str(py.parent.parent) in module and str(py.parent.parent) in specs, where.stdout  # not the checkout

    r = _run([bench, "--version"], work, env)
    assert r.returncode == 0 and r.stdout.split()[-1] == _run([py, "-c", "import bench; print(bench.__version__)"],
                                                              work, env).stdout.strip()
    r = _run([py, "-m", "bench", "specs", "--path"], work, env)
    assert r.returncode == 0 and r.stdout.strip() == specs
    r = _run([bench, "validate"], work, env)  # no ./specs here: the installed ones
    assert r.returncode == 0 and r.stdout.strip().endswith("specs OK"), r.stdout + r.stderr

    spec = Path(specs) / "circuits" / "norm-folding-is-exact.toml"
    r = _run([bench, "verify", spec, "--models", tiny_model_dir, "--no-report", "-q"], work, env)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = (work / "runs").iterdir()
    record = json.loads((run_dir / "record.json").read_text())
    assert record["cells"][0]["spec"]["path"] == "circuits/norm-folding-is-exact.toml"  # no machine path
    assert (run_dir / "results.csv").is_file() and (run_dir / "results.json").is_file()

    r = _run([bench, "report", run_dir, "--no-pdf", "--out", work / "report"], work, env)
    assert r.returncode == 0, r.stdout + r.stderr
    html = (work / "report" / "index.html").read_text()
    assert "circuits.norm-folding-is-exact" in html and "<style>" in html
