"""Cold vs warm `bench verify`: the second identical run must come from the cache, ≥ 10× faster.

Runs the command twice in one go, in a fresh frame cache that reuses the already converted embedded models (so
"cold" means: every frame is measured, no model conversion), and prints both wall times and their ratio.

    .venv/bin/python benchmarks/cold_warm.py [PATHS…]      (default: specs/circuits)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.core.store import cache_root


def main() -> None:
    paths = sys.argv[1:] or ["specs/circuits"]
    models = cache_root() / "models"
    if not models.is_dir():
        sys.exit("no converted models: run `make setup` first")
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        cache.mkdir()
        (cache / "models").symlink_to(models)
        if (cache_root() / "gguf").is_dir():
            (cache / "gguf").symlink_to(cache_root() / "gguf")
        env = {**os.environ, "BENCH_CACHE": str(cache)}
        cmd = [sys.executable, "-m", "bench.cli", "verify", *paths, "--no-report", "--runs-dir", f"{tmp}/runs"]
        times = []
        for label in ("cold", "warm"):
            t = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
            print(f"{label}: {times[-1]:.1f} s")
    print(f"cold / warm = {times[0] / times[1]:.1f}x  (target ≥ 10x)")


if __name__ == "__main__":
    main()
