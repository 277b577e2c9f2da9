"""How a cell's time and memory grow with the model, measured on random-initialised models of real shapes.

    python benchmarks/scaling.py [--cells circuits/induction-heads-exist …] [--ladders llama,gemma3]
                                 [--cap-min 20] [--json OUT.json] [--out OUT.md]

Cost does not depend on what the weights learned, so a ``+random-init`` control of a real config measures it
without the weights.  Each ladder starts at an embedded model's control and climbs through the config folders
of ``benchmarks/configs/`` (config.json only): each rung is a temporary folder holding that config and the
embedded model's tokenizer (the same tokenizer family; where the config's vocabulary is smaller than that
tokenizer, the vocabulary is widened to the tokenizer's and the table says so).  Every cell runs
``bench verify SPEC --models FOLDER+random-init --profile smoke`` in its own process, cold (a fresh results
cache; corpora and converted weights come from the usual cache), one at a time; its measured seconds (the
record's ``measure_s``: the probe's work, the random initialisation left out) and the peak resident memory of
the process (GNU time) are printed beside ``bench plan``'s prediction for the same model and spec: the
predicted seconds of the counted work (the weight-loading term left out, as the measurement leaves it out) and
the predicted peak host memory, and the 5-minute load average per CPU when it ended (other work on the
machine slows a cell; the plan's rates were measured on a quiet one).  Then, per cell and ladder, the growth
from the smallest model to the largest, measured against predicted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "benchmarks" / "configs"
sys.path.insert(0, str(ROOT))

LADDERS = {"llama": ("smollm2-135m", ["smollm2-360m", "tinyllama-1.1b"]),
           "gemma3": ("gemma3-270m", ["gemma3-1b"])}
CELLS = ["circuits/induction-heads-exist", "circuits/norm-folding-is-exact", "ecm/cot-helps-multistep",
         "microscope/logit-lens-converges"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json")


def rung(alias: str, config: str, into: Path, *, exact: bool = False) -> tuple[Path, str]:
    """A folder with `config`'s config.json and `alias`'s tokenizer (no weights); a note when the vocabulary
    had to be widened to the tokenizer's.  `exact`: the vocabulary is set to the tokenizer's size either way (a
    row the tokenizer cannot decode is never sampled) and the special tokens to the tokenizer's ids."""
    from transformers import AutoTokenizer

    from bench import models
    from bench.models import shapes

    where, _ = shapes.source(models.resolve(alias))
    folder = into / config
    folder.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (Path(where) / name).is_file():
            shutil.copy(Path(where) / name, folder / name)
    cfg = json.loads((CONFIGS / config / "config.json").read_text())
    tok = AutoTokenizer.from_pretrained(folder)
    size = len(tok)
    note = ""
    if size > cfg["vocab_size"] or (exact and size != cfg["vocab_size"]):
        how = "widened" if size > cfg["vocab_size"] else "narrowed"
        note = f"vocabulary {cfg['vocab_size']} {how} to {alias}'s tokenizer ({size})"
        cfg["vocab_size"] = size
    if exact:
        cfg.update({f"{k}_token_id": getattr(tok, f"{k}_token_id") for k in ("bos", "eos")
                    if getattr(tok, f"{k}_token_id") is not None})
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder, note


def predicted(spec_path: Path, model: str) -> dict:
    """bench plan's row for `model` on one spec: seconds of the counted work (no loading), peak host bytes."""
    from bench.ground import costs as gc
    from bench.ground import spec
    from bench.spine import calibrate, costs, run

    opts = run.Options(models=(model,), profile="smoke", device="cpu", dtype="float32")
    (row,) = costs.for_run(spec.load_specs([spec_path]), opts)
    shape, work, _, width, _ = row.work
    return {"predicted_s": gc.seconds(shape, work, calibrate.rates("cpu"), width), "params": shape.n_params,
            "predicted_host": row.peak_host_bytes}


def cold_verify(args: list[str], where: Path, cap_s: float) -> dict:
    """`bench -q verify ARGS` cold under `cap_s` seconds: a fresh results cache in `where/cache` that shares the
    usual cache's corpora, converted weights and calibration (not what is measured), records in `where/runs`.
    The exit status ("cap" at the cap), wall seconds, the last line printed, the peak RSS of the process (GNU
    time), and the runs folder with the environment that points bench at the cache."""
    base = Path(os.environ.get("BENCH_CACHE", Path.home() / ".cache" / "bench"))
    cache, runs, stats = where / "cache", where / "runs", where / "time"
    cache.mkdir(parents=True)
    for shared in ("data", "gguf", "models", "calibration"):
        if (base / shared).exists():
            (cache / shared).symlink_to(base / shared)
    env = {**os.environ, "BENCH_CACHE": str(cache)}
    cmd = ["/usr/bin/time", "-f", "%M", "-o", str(stats), sys.executable, "-m", "bench", "-q", "verify", *args,
           "--runs-dir", str(runs), "--no-report"]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, timeout=cap_s, capture_output=True, text=True)
        status, last = proc.returncode, (proc.stdout.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        status, last = "cap", ""
    out = {"status": status, "wall_s": time.perf_counter() - t, "last": last, "runs": runs, "env": env}
    if stats.is_file() and stats.read_text().strip():
        out["peak_rss"] = int(stats.read_text().split()[-1]) * 1024
    return out


def measure(spec_path: Path, model: str, cap_s: float) -> dict:
    """One cold `bench verify` of one cell: measure_s and load_s from its record, peak RSS of the process."""
    with tempfile.TemporaryDirectory() as tmp:
        run = cold_verify([str(spec_path), "--models", model, "--profile", "smoke", "--device", "cpu",
                           "--dtype", "float32"], Path(tmp), cap_s)
        runs = run["runs"]
        out = {"status": run["status"], "wall_s": run["wall_s"],
               "load": round(os.getloadavg()[1] / (os.cpu_count() or 1), 2)}
        if "peak_rss" in run:
            out["peak_rss"] = run["peak_rss"]
        records = sorted(runs.glob("*/record.json"))
        if records:
            (cell,) = json.loads(records[-1].read_text())["cells"]
            out.update(measured_s=cell["timings"].get("measure_s"), load_s=cell["timings"].get("load_s"),
                       outcome=cell["verdict"]["outcome"])
    return out


def table(results: list[dict]) -> str:
    gib = 2 ** 30
    lines = ["| cell | model | parameters | predicted s | measured s | ratio | predicted peak | measured peak RSS "
             "| load per CPU |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = r.get("measured_s")
        ratio = f"{r['predicted_s'] / m:.2f}" if m else "—"
        rss = f"{r['peak_rss'] / gib:.2f} GiB" if r.get("peak_rss") else "—"
        lines.append(f"| {r['cell']} | {r['model']}{' †' if r['note'] else ''} | {r['params'] / 1e9:.2f} B | "
                     f"{r['predicted_s']:.1f} | {f'{m:.1f}' if m else r['status']} | {ratio} | "
                     f"{r['predicted_host'] / gib:.2f} GiB | {rss} | {r.get('load', '—')} |")
    lines += ["", "| cell | ladder | time growth measured | predicted | measured ÷ predicted | memory growth measured "
              "| predicted |", "|---|---|---|---|---|---|---|"]
    for cell in dict.fromkeys(r["cell"] for r in results):
        for ladder in dict.fromkeys(r["ladder"] for r in results):
            rs = [r for r in results if r["cell"] == cell and r["ladder"] == ladder and r.get("measured_s")]
            if len(rs) < 2:
                continue
            a, b = rs[0], rs[-1]
            tm, tp = b["measured_s"] / a["measured_s"], b["predicted_s"] / a["predicted_s"]
            mm = b["peak_rss"] / a["peak_rss"] if a.get("peak_rss") and b.get("peak_rss") else None
            mp = b["predicted_host"] / a["predicted_host"]
            lines.append(f"| {cell} | {a['model']} → {b['model']} | {tm:.2f}× | {tp:.2f}× | {tm / tp:.2f} | "
                         f"{f'{mm:.2f}×' if mm else '—'} | {mp:.2f}× |")
    notes = sorted({f"† {r['model']}: {r['note']}" for r in results if r["note"]})
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=CELLS)
    ap.add_argument("--ladders", default=",".join(LADDERS))
    ap.add_argument("--cap-min", type=float, default=20.0)
    ap.add_argument("--json", type=Path, help="write every result here as it comes (a partial run keeps them)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, nargs="*", help="only print the table of earlier --json files")
    a = ap.parse_args()
    results: list[dict] = []
    head = (f"Random-init scaling, smoke profile, CPU: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, float32, {time.strftime('%Y-%m-%d')}.\n\n")
    if a.table:
        print(head + table([r for f in a.table for r in json.loads(f.read_text())]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for ladder in a.ladders.split(","):
            alias, configs = LADDERS[ladder]
            models = [(alias, f"{alias}+random-init", "")]
            for c in configs:
                folder, note = rung(alias, c, Path(tmp))
                models.append((c, f"{folder}+random-init", note))
            for cell in a.cells:
                path = ROOT / "specs" / f"{cell}.toml"
                for label, model, note in models:
                    r = {"cell": cell, "ladder": ladder, "model": label, "note": note, **predicted(path, model)}
                    r.update(measure(path, model, a.cap_min * 60))
                    results.append(r)
                    print(json.dumps(r), flush=True)
                    if a.json:
                        a.json.write_text(json.dumps(results, indent=1))
    text = head + table(results)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
