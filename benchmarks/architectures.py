"""The plan's predicted ÷ measured seconds on architectures neither embedded model has.

A cold smoke run of every spec on a random-initialised model of each config, then the ratios per cell:

    python benchmarks/architectures.py [--configs gpt2-124m qwen2.5-0.5b] [--tokenizer smollm2-135m]
                                       [--cap-min 90] [--keep DIR] [--out OUT.md]

Each config of ``benchmarks/configs/`` becomes a folder holding it and the tokenizer's files, its vocabulary set
to the tokenizer's size and its special tokens to the tokenizer's ids (``scaling.rung(exact=True)``: a random
model never samples a row the tokenizer cannot decode).  ``bench verify specs/ --models FOLDER+random-init`` runs
it cold (a fresh results cache; corpora, converted weights and the calibration come from the usual cache) with
the executor's defaults, as the main command runs; ``benchmarks/plan_accuracy.py`` then plans the record again
and compares.  A random model is a fair test of the counts (cost does not depend on what the weights learned)
except where a probe's work depends on what the model does: a neuron set found empty is not evaluated, an RL
run that collapses to empty answers samples less.  The plan counts those at the worst case its notes state, so
such a cell can come in under it.  Run it on a quiet machine: the plan's rates were measured on one.
``--keep DIR`` keeps the folders, caches and run records there (by default they go with a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scaling

ROOT = Path(__file__).resolve().parent.parent


def run_one(config: str, alias: str, where: Path, cap_s: float) -> dict:
    folder, note = scaling.rung(alias, config, where, exact=True)
    run = scaling.cold_verify([str(ROOT / "specs"), "--models", f"{folder}+random-init"], where / f"{config}.run",
                              cap_s)
    out = {"config": config, "note": note, "status": run["status"], "wall_s": run["wall_s"],
           "summary": [run["last"].split("   record:")[0]] if run["last"] else []}
    if "peak_rss" in run:
        out["peak_rss"] = run["peak_rss"]
    if any(run["runs"].glob("*/record.json")):
        acc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plan_accuracy.py"), str(run["runs"]),
                              "--json"], env=run["env"], cwd=ROOT, capture_output=True, text=True, check=True)
        out["accuracy"] = json.loads(acc.stdout)
    return out


def table(results: list[dict]) -> str:
    names = [r["config"] for r in results]
    cells: dict[str, dict[str, dict]] = {}
    for r in results:
        for c in (r.get("accuracy") or {}).get("cells", []):
            cells.setdefault(c["claim"], {})[r["config"]] = c
    lines = ["| cell | " + " | ".join(f"{n}: planned s / measured s / ratio" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for claim in sorted(cells):
        row = []
        for n in names:
            c = cells[claim].get(n)
            if c is None or c.get("ratio") is None:
                row.append((c.get("note") or "—") if c else "—")
            else:
                flag = "" if 0.5 <= c["ratio"] <= 2 else " **outside**"
                row.append(f"{c['predicted_s']:.1f} / {c['measured_s']:.1f} / {c['ratio']:.2f}{flag}")
        lines.append(f"| {claim} | " + " | ".join(row) + " |")
    for r in results:
        acc = r.get("accuracy") or {}
        rated = [c for c in acc.get("cells", []) if c.get("ratio") is not None]
        inside = sum(0.5 <= c["ratio"] <= 2 for c in rated)
        total = f"{acc['ratio']:.2f}" if acc.get("ratio") else "—"
        rss = f"{r['peak_rss'] / 2**30:.2f} GiB" if "peak_rss" in r else "—"
        lines.append(f"\n- {r['config']} ({r['note'] or 'vocabulary as configured'}): exit {r['status']}, wall "
                     f"{r['wall_s'] / 60:.1f} min, peak RSS {rss}; {inside} of {len(rated)} measured cells within "
                     f"[0.5, 2], total {total}. {' '.join(r['summary'])}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="*", default=["gpt2-124m", "qwen2.5-0.5b"])
    ap.add_argument("--tokenizer", default="smollm2-135m", help="the embedded model whose tokenizer they use")
    ap.add_argument("--cap-min", type=float, default=90.0, help="wall-time cap of each config's run")
    ap.add_argument("--keep", type=Path, help="an empty or new folder to keep the models, caches and records in")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    results = []
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        where = a.keep or Path(tmp)
        for config in a.configs:
            results.append(run_one(config, a.tokenizer, where, a.cap_min * 60))
            print(json.dumps({k: v for k, v in results[-1].items() if k != "accuracy"}), flush=True)
    text = (f"Plan accuracy on random-init architectures, smoke profile, CPU: "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}."
            f"\n\n" + table(results))
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
