"""A family kept outside bench plugs in: ``examples/plugin-family`` installed into a fresh virtual environment
(``pip install -e``, nothing downloaded), then ``bench validate`` and ``bench verify`` on its spec and its own
tests, with no file of bench edited.

The venv reuses this environment's packages (``--system-site-packages`` plus a path file naming this
environment's site-packages, behind the checkout itself), so only the plugin is installed into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.embedded]


def _run(cmd, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_plugin_family_installs_validates_and_verifies(tmp_path):
    before = subprocess.run(["git", "status", "--porcelain", "bench"], cwd=REPO, capture_output=True, text=True).stdout
    plugin = tmp_path / "plugin-family"
    shutil.copytree(REPO / "examples" / "plugin-family", plugin,
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    venv = tmp_path / "venv"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    r = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], tmp_path, env)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env).stdout
    # this checkout's bench first, then this environment's packages (torch, transformers, setuptools …)
    Path(purelib.strip(), "zz-test-deps.pth").write_text(f"{REPO}\n{sysconfig.get_paths()['purelib']}\n")
    r = _run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-build-isolation",
              "--no-index", "-q", "-e", plugin], tmp_path, env)
    assert r.returncode == 0, r.stderr
    where = _run([py, "-c", "import bench, bench_embnorm; print(bench.__file__); print(bench_embnorm.__file__)"],
                 tmp_path, env).stdout.split()
    assert where == [str(REPO / "bench" / "__init__.py"), str(plugin / "bench_embnorm" / "__init__.py")]

    specs = plugin / "specs"
    r = _run([py, "-m", "bench", "validate", specs], tmp_path, env)
    assert r.returncode == 0 and "1 spec OK" in r.stdout, r.stdout + r.stderr
    r = _run([py, "-m", "bench", "verify", specs, "--no-report", "--json", "--runs-dir", tmp_path / "runs"],
             tmp_path, env)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [c for c in json.loads(r.stdout) if c["claim"] == "embnorm.first-token-norm-above-median"]
    assert row["model"] == "smollm2-135m" and row["outcome"] in ("SUPPORTED", "REFUTED", "INCONCLUSIVE"), row
    assert row["n"] == 16  # the smoke profile's texts, each one unit
    r = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", plugin / "tests"], plugin, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _run(["git", "status", "--porcelain", "bench"], REPO, env).stdout == before, "a file of bench was edited"
