"""Which cells of the full profile fit one GPU, for models of 7–8B parameters, from their configs alone.

    python benchmarks/gpu_fit.py [--configs llama3-8b gemma-7b] [--gpu-memory 80] [--save DIR] [--load DIR]

For each config folder of ``benchmarks/configs/`` (config.json only) and each family, runs
``bench plan specs/<family> --models FOLDER --profile full --device cuda --gpu-memory GiB --json`` (no GPU and no
weights needed: memory is planned against the given size, time is left unknown) and prints per cell the
predicted peak device memory, whether it fits, and the two largest holders of that peak (weights, optimizer
state, activations kept for the backward pass, logits, Gram matrices and other stated extras, KV cache…).
``--save DIR`` keeps each plan's JSON lines (``<config>_<family>.jsonl``); ``--load DIR`` prints the table from
them without planning again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = 2 ** 30
HOLDERS = {"weights": "weights", "activations": "activations", "logits": "logits",
           "attention_maps": "attention maps", "kv_cache": "KV cache", "optimizer": "optimizer state",
           "gradients": "gradients", "trained_copy": "trained float32 copy", "extra": "stated extras"}


def plan(config: str, family: str, gib: float) -> list[dict]:
    cmd = [sys.executable, "-m", "bench", "plan", str(ROOT / "specs" / family), "--models",
           str(ROOT / "benchmarks" / "configs" / config), "--profile", "full", "--device", "cuda", "--gpu-memory",
           str(gib), "--json"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ}, check=True).stdout
    return [json.loads(x) for x in out.splitlines() if x.startswith("{") and '"claim"' in x]


def line(config: str, r: dict) -> str:
    top = sorted(r.get("memory", {}).items(), key=lambda kv: -kv[1])[:2]
    why = ", ".join(f"{HOLDERS.get(k, k)} {v / GIB:.1f}" for k, v in top)
    model = config + ("+random-init" if r["model"].endswith("+random-init") else "")  # a control the claim runs beside
    return (f"| {model} | {r['claim']} | {r['peak_device_bytes'] / GIB:.1f} | {'yes' if r['fits'] else '**no**'} "
            f"| {why} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="*", default=["llama3-8b", "gemma-7b"])
    ap.add_argument("--families", nargs="*",
                    default=sorted(p.name for p in (ROOT / "specs").iterdir() if p.is_dir()))
    ap.add_argument("--gpu-memory", type=float, default=80.0)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--load", type=Path)
    a = ap.parse_args()
    lines = [f"Full profile against one {a.gpu_memory:g} GiB GPU, bfloat16, planned from config.json alone.", "",
             "| model | claim | peak device GiB | fits | largest holders (GiB) |", "|---|---|---|---|---|"]
    for config in a.configs:
        for fam in a.families:
            path = (a.load or a.save or Path(".")) / f"{config}_{fam}.jsonl"
            if a.load:
                if not path.is_file():
                    lines.append(f"| {config} | {fam} (not planned) | | | |")
                    continue
                rows = [json.loads(x) for x in path.read_text().splitlines() if '"claim"' in x]
            else:
                rows = plan(config, fam, a.gpu_memory)
                if a.save:
                    a.save.mkdir(parents=True, exist_ok=True)
                    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            lines += [line(config, r) for r in rows]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
