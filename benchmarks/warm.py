"""Cold vs warm `bench verify`, PDF report included: the second run with nothing changed must be ≥ 50× faster.

Runs the same command twice in one go, in a fresh frame cache that reuses the already converted embedded
models (so "cold" means: every frame measured and the report rendered, no model conversion), and prints wall
and CPU times of both runs and their ratios.  On a shared machine the CPU-time ratio is the steadier figure.

    .venv/bin/python benchmarks/warm.py [--keep DIR] [PATHS…] [-- extra bench verify options]
                                                                        (default: specs/circuits)

With ``--keep DIR`` the runs, reports and frame cache stay in DIR (to compare the records with ``bench diff``);
without it they go to a temporary folder that is removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.ground.store import cache_root


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    keep = None
    if args[:1] == ["--keep"]:
        keep, args = Path(args[1]), args[2:]
    paths = args or ["specs/circuits"]
    models = cache_root() / "models"
    if not models.is_dir():
        sys.exit("no converted models: run `make setup` first")
    with contextlib.ExitStack() as stack:
        tmp = str(keep) if keep else stack.enter_context(tempfile.TemporaryDirectory())
        cache = Path(tmp) / "cache"
        cache.mkdir(parents=True)
        for shared in ("models", "gguf", "data", "fingerprints.json"):
            if (cache_root() / shared).exists():
                (cache / shared).symlink_to((cache_root() / shared).resolve())
        env = {**os.environ, "BENCH_CACHE": str(cache)}
        cmd = [sys.executable, "-m", "bench.cli", "verify", *paths, "--runs-dir", f"{tmp}/runs",
               "--report-dir", f"{tmp}/reports", *extra]
        wall, cpu = [], []
        for label in ("cold", "warm"):
            t, c = time.perf_counter(), _cpu()
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            wall.append(time.perf_counter() - t)
            cpu.append(_cpu() - c)
            pdfs = [line for line in out.stdout.splitlines() if line.endswith("report.pdf")]
            print(f"{label}: wall {wall[-1]:.2f} s, cpu {cpu[-1]:.2f} s, exit {out.returncode}, "
                  f"pdf {'yes' if pdfs else 'no'}", flush=True)
            if keep:
                (Path(tmp) / f"{label}.out").write_text(out.stdout + out.stderr)
            if out.returncode not in (0, 1):
                sys.exit(out.stderr[-2000:])
    print(f"cold / warm: wall {wall[0] / wall[1]:.1f}x, cpu {cpu[0] / cpu[1]:.1f}x  (target ≥ 50x)")


if __name__ == "__main__":
    main()
