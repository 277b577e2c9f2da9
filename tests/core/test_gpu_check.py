"""scripts/gpu-check.sh --dry-run on a CPU machine: it lists one verify per family, each with the seconds that
`bench plan` predicts for it, or says why there is no prediction (no `bench plan` in this version; a plan for
CUDA that a machine without CUDA cannot make)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_lists_each_family_with_its_prediction(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--dry-run"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=540)
    assert r.returncode == 0, r.stdout + r.stderr
    families = sorted(p.parent.name for p in (ROOT / "specs").glob("*/*.toml"))
    listed = [line for line in r.stdout.splitlines() if line.startswith("+ ") and " verify " in line]
    assert sorted(line.split("verify specs/")[1].split()[0] for line in listed) == sorted(set(families))
    for line in listed:
        predicted = line.rsplit("(predicted: ", 1)[1].rstrip(")")
        assert predicted in ("n/a", "failed") or (predicted.endswith(" s") and float(predicted[:-2]) >= 0), line
    has_plan = subprocess.run([sys.executable, "-m", "bench.cli", "plan", "--help"], capture_output=True,
                              cwd=ROOT).returncode == 0
    if not has_plan:
        assert "bench plan: not available in this version" in r.stdout
        assert all(line.endswith("(predicted: n/a)") for line in listed)
