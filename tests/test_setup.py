"""The set-up's torch choice: a CUDA build when an NVIDIA driver answers, the CPU build otherwise; tested with
the driver check stubbed (a fake `nvidia-smi` first on PATH)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"
STUBS = {
    "gpu": 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"',
    "no_driver": 'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2; exit 9',
    "no_gpu": 'echo "No devices were found"',
}


def _choice(tmp_path: Path, stub: str | None, **env: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if stub is not None:
        fake = bin_dir / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\n{STUBS[stub]}\n")
        fake.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    clean = {k: v for k, v in os.environ.items() if k != "BENCH_TORCH"}
    return subprocess.run(["bash", str(SETUP), "--torch-choice"], capture_output=True, text=True,
                          env={**clean, "PATH": path, **env}, timeout=30)


@pytest.mark.parametrize("stub,expected", [("gpu", "cuda"), ("no_driver", "cpu"), ("no_gpu", "cpu"), (None, "cpu")])
def test_torch_choice_follows_the_driver(tmp_path, stub, expected):
    if stub is None and any((Path(d) / "nvidia-smi").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("this machine has a real nvidia-smi")
    r = _choice(tmp_path, stub)
    assert r.returncode == 0 and r.stdout.strip() == expected, r.stderr


def test_torch_choice_override(tmp_path):
    assert _choice(tmp_path, "gpu", BENCH_TORCH="cpu").stdout.strip() == "cpu"
    bad = _choice(tmp_path, None, BENCH_TORCH="rocm")
    assert bad.returncode == 2 and "BENCH_TORCH must be cpu or cuda" in bad.stderr
