"""How well `bench plan` predicted a finished run: predicted ÷ measured seconds per cell and in total.

    python benchmarks/plan_accuracy.py RUN_DIR [--specs DIR] [--rates CALIBRATION.json] [--json]

RUN_DIR is a run folder (its record.json) or a runs folder holding one (the latest is taken).  The cells are
planned again from the record's own settings (models, profile, device, dtype, seed, control) on the specs it
ran, reading configs and tokenizers only, with this machine's measured rates; each is compared with the
record's ``timings.total_s`` (and, where training decides a cell's work, with its least and most), less the time it waited (``timings.wait_s``) for a shared piece that another
worker was computing (that work is booked to the cell computing it); a run is planned at the thread count its
processes had (the record's ``executor.threads_per_job``, or ``device.threads`` of a one-process run), a run of
worker processes with a load of its model in every work unit as the workers do, and in the order the cells
began (``timings.started_at``, where the record has it), so that work several cells share is booked to the cell
that did it.  Cells the run read from its cache are shown, and left out of the ratios (a plan predicts them as
free).  Target: every cell and the total within [0.5, 2].
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _record(path: Path) -> dict:
    if (path / "record.json").is_file():
        return json.loads((path / "record.json").read_text())
    found = sorted(path.glob("*/record.json"))
    if not found:
        raise SystemExit(f"no record.json in {path}")
    return json.loads(found[-1].read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--specs", type=Path, default=ROOT / "specs", help="the specs folder the run used")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rates", type=Path, default=None,
                    help="a calibration's JSON (bench cache folder, calibration/) to plan with instead of this "
                         "machine's cached one: to compare calibrations taken under different loads")
    args = ap.parse_args()

    from bench.ground import spec
    from bench.spine import costs, run

    record = _record(args.run_dir)
    s = record["settings"]
    ids = {c["spec"]["id"] for c in record["cells"]}
    specs = [x for x in spec.load_specs((args.specs,)) if x.id in ids]
    opts = run.Options(models=tuple(s["models"]), profile=s["profile"], device=s["device"], dtype=s["dtype"],
                       seed=s["seed"], control=s.get("control"), revision=s.get("revision"))
    from bench.ground.costs import Rates

    rates = Rates(**json.loads(args.rates.read_text())) if args.rates else None
    threads = ((record.get("executor") or {}).get("threads_per_job")  # worker processes', or the one process's
               or (record.get("device") or {}).get("threads"))
    if threads and rates is None:  # plan at the rates of the thread count the run computed with
        import torch

        torch.set_num_threads(int(threads))
        print(f"planned at the rates of {threads} thread(s), as the run's processes ran", file=sys.stderr)
    def name(c: dict) -> str:  # the model as the run was given it: a path's label in the record is shortened
        return (c.get("model_ref") or {}).get("name") or c["model"]

    began = {(c["spec"]["id"], name(c)): c["timings"]["started_at"] for c in record["cells"]
             if "started_at" in (c.get("timings") or {})}
    if began:  # booked in the order the cells began (a worker may run a later spec's cell first)
        print(f"planned in the order the run's {len(began)} cells began", file=sys.stderr)
    workers = int((record.get("executor") or {}).get("jobs") or 1) > 1  # each work unit loads its model
    rows = {(r.claim, r.model): r for r in costs.for_run(specs, opts, rates=rates, began=began or None,
                                                         workers=workers)}
    out, pred_total, meas_total = [], 0.0, 0.0
    for c in record["cells"]:
        r = rows.get((c["spec"]["id"], name(c)))
        t = c.get("timings") or {}
        waited = float(t.get("wait_s") or 0.0)  # blocked while another worker computed a shared piece
        measured = float(t.get("total_s") or 0.0) - waited
        if r is None:
            out.append({"claim": c["spec"]["id"], "model": c["model"], "measured_s": measured, "note": "not planned"})
            continue
        cached = bool(c.get("cache_hit")) or measured < 0.5
        ratio = r.predicted_s / measured if measured > 0 and not cached else None
        if not cached:
            pred_total += r.predicted_s
            meas_total += measured
        note = ("read from the cache" if cached else f"(waited {waited:.1f} s for another worker)" if waited >= 0.05
                else "")
        span = r.predicted_range_s
        if span and not cached:  # training decided the work: did it fall between the plan's bounds?
            note = (f"{note} training decides: {span[0]:.0f}–{span[1]:.0f} s, measured "
                    f"{'within' if span[0] <= measured <= span[1] else 'OUTSIDE'}").strip()
        out.append({"claim": r.claim, "model": r.model, "predicted_s": r.predicted_s, "measured_s": measured,
                    "waited_s": waited, "ratio": ratio, "range_s": span, "note": note})
    total = pred_total / meas_total if meas_total else None
    if args.json:
        print(json.dumps({"cells": out, "predicted_s": pred_total, "measured_s": meas_total, "ratio": total}))
        return
    for o in out:
        ratio = f"{o['ratio']:.2f}" if o.get("ratio") is not None else "—"
        flag = "" if o.get("ratio") is None or 0.5 <= o["ratio"] <= 2 else "  outside [0.5, 2]"
        print(f"{o['claim']:46.46s} {o['model']:26.26s} predicted {o.get('predicted_s', 0):8.1f} s  measured "
              f"{o['measured_s']:8.1f} s  ratio {ratio:>5s}{flag} {o['note']}")
    inside = [o for o in out if o.get("ratio") is not None]
    ok = sum(0.5 <= o["ratio"] <= 2 for o in inside)
    print(f"total: predicted {pred_total:.0f} s, measured {meas_total:.0f} s, ratio "
          f"{total:.2f}" if total else "total: nothing measured")
    print(f"cells within [0.5, 2]: {ok} of {len(inside)}")


if __name__ == "__main__":
    main()
