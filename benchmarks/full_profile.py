"""The `full` profile, executed: every spec of each family on one model, one family at a time, with a wall-time cap.

    python benchmarks/full_profile.py [FAMILY | FAMILY/CLAIM …] [--model smollm2-135m] [--cap-min 30]
                                      [--out docs/scale.md] [--records build/full-profile] [--cut KEY=VALUE …]

Per family: `bench verify specs/<family> --profile full` in its own process (cold: a fresh results cache in a
temporary folder; converted weights and corpora come from the usual cache), its wall time and peak resident
memory (GNU time), and per cell the measured seconds and outcome from the run record beside the plan's
prediction and the counted tokens (forward, backward, generated; :mod:`bench.spine.costs`).  ``FAMILY/CLAIM``
(a spec file's stem, e.g. ``microscope/logit-lens-converges``) runs only the claims named of that family, together
in one process, so a family whose other cells are sized for a GPU can be executed in part.  A family that
passes its cap is stopped and reported as such, with the cells it finished.  Prints a markdown table (and
writes it with ``--out``) headed by the machine it ran on, then each cell's verdict reason; each family's run
record is kept under ``--records`` (the temporary cache and runs folder are removed with the family).

``--cut steps=4 seeds=1`` runs copies of the specs with those ``[measure]`` values replaced (a key no selected
spec has is an error): every shape of the full profile (texts, tokens, batches, prompts, vocabulary, model) with
fewer repetitions, for a cell sized for a GPU.  It shows that the full size runs here without a crash or running
out of memory, and checks the plan's time and memory on it; the verdicts of a cut run are not the claim's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def spec_paths(family: str, claims: list[str]) -> list[Path]:
    """The family's folder, or the spec files of the `claims` named (file stems) when there are any."""
    folder = ROOT / "specs" / family
    return [folder / f"{c}.toml" for c in claims] if claims else [folder]


def cut_specs(paths: list[Path], cuts: dict[str, str], dest: Path) -> list[Path]:
    """Copies of the spec files under `paths` in `dest`, each `[measure]` key of `cuts` set to its value (the text
    edited line by line, so comments stay).  A key that no spec's `[measure]` holds is an error."""
    import tomllib

    files = [f for p in paths for f in (sorted(p.glob("*.toml")) if p.is_dir() else [p])]
    seen, out = set(), []
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        lines, table = f.read_text().splitlines(keepends=True), None
        for i, line in enumerate(lines):
            head = re.match(r"\s*\[+([^\]]+)\]+", line)
            table = head.group(1).strip() if head else table
            key = re.match(r"([A-Za-z_][\w-]*)\s*=\s*([^#\n]*?)(\s*#.*)?$", line.rstrip("\n"))
            if table == "measure" and key and key.group(1) in cuts:
                lines[i] = f"{key.group(1)} = {cuts[key.group(1)]}{key.group(3) or ''}\n"
                seen.add(key.group(1))
        (dest / f.name).write_text("".join(lines))
        measure = tomllib.loads("".join(lines)).get("measure", {})  # the copy parses and holds the cut values
        for k, v in cuts.items():
            if k in measure and measure[k] != tomllib.loads(f"v = {v}")["v"]:
                raise ValueError(f"{f.name}: [measure] {k} did not take the value {v}")
        out.append(dest / f.name)
    if missing := set(cuts) - seen:
        raise ValueError(f"no [measure] of {', '.join(map(str, paths))} holds {', '.join(sorted(missing))}")
    return out


def planned(paths: list[Path], model: str) -> dict[str, dict]:
    """claim → the plan's row (predicted seconds and counted work) for `model` under the full profile."""
    from bench.ground import spec
    from bench.spine import costs, run

    opts = run.Options(models=(model,), profile="full", device="cpu")
    rows = costs.for_run(spec.load_specs(paths), opts, strict=False)
    out = {}
    for r in rows:
        work = r.work[1] if r.work else None
        out[r.claim] = {"predicted_s": r.predicted_s, "peak_host": r.peak_host_bytes,
                        "forward": getattr(work, "forward", None), "backward": getattr(work, "backward", None),
                        "generated": getattr(work, "generated", None)}
    return out


def run_family(family: str, paths: list[Path], model: str, cap_s: float, cache: Path, runs: Path) -> dict:
    """Run one family (or its `claims`) cold under `cap_s` seconds; wall time, peak RSS (KiB) and the exit status."""
    env = {**os.environ, "BENCH_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "bench", "verify", *map(str, paths), "--models", model,
           "--profile", "full", "--runs-dir", str(runs), "--no-report"]
    timer = Path("/usr/bin/time").is_file()  # GNU time writes the child's peak RSS; without it, none is shown
    stats = runs / f"{family}.time"
    if timer:
        cmd = ["/usr/bin/time", "-f", "%M", "-o", str(stats), *cmd]
    t = time.perf_counter()
    # Its own process group: at the cap the whole group is stopped (GNU time and bench under it), not only the
    # first process (stopping GNU time alone left bench running, orphaned, past the cap).  SIGINT first, so bench
    # writes its record as "interrupted" with the cells it finished; SIGKILL if it has not ended a minute later.
    # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited "ignore": the child gets
    # the default back, so the interrupt at the cap reaches bench as KeyboardInterrupt.
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        status = proc.wait(timeout=cap_s)
    except subprocess.TimeoutExpired:
        status = "cap"
        _stop_group(proc)
    wall = time.perf_counter() - t
    peak = int(stats.read_text().split()[-1]) if timer and stats.exists() and stats.read_text().strip() else None
    return {"wall_s": wall, "peak_kib": peak, "status": status}


def _stop_group(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """Interrupt `proc`'s process group, then kill it if it is still there after `grace_s`."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def cells(runs: Path) -> dict[str, dict]:
    """claim → measured seconds and outcome, from the newest record under `runs` (a capped run may have none)."""
    records = sorted(runs.glob("*/record.json"))
    if not records:
        return {}
    rec = json.loads(records[-1].read_text())
    return {c["spec"]["id"]: {"s": c["timings"].get("total_s", 0.0), "outcome": c["verdict"]["outcome"],
                              "reason": c["verdict"].get("reason") or ""} for c in rec["cells"]}


def keep_record(runs: Path, dest: Path) -> Path | None:
    """Copy the newest run record under `runs` to `dest` (the temporary cache and runs go with the family)."""
    records = sorted(runs.glob("*/record.json"))
    if not records:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(records[-1], dest)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", help="families, or FAMILY/CLAIM to run only the claims named")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--cap-min", type=float, default=30.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--records", type=Path, default=ROOT / "build" / "full-profile",
                    help="each family's run record is copied here as MODEL-FAMILY.json (its verdicts' reasons)")
    ap.add_argument("--cut", nargs="+", default=[], metavar="KEY=VALUE",
                    help="run copies of the specs with these [measure] values (a TOML value: steps=4 seeds=1)")
    a = ap.parse_args()
    cuts = dict(c.split("=", 1) for c in a.cut)
    if any("=" not in c for c in a.cut):
        ap.error("--cut takes KEY=VALUE pairs")
    wanted: dict[str, list[str]] = {}
    for name in a.families or sorted(p.name for p in (ROOT / "specs").iterdir() if p.is_dir()):
        fam, _, claim = name.partition("/")
        if not (ROOT / "specs" / fam / (f"{claim}.toml" if claim else "")).exists():
            ap.error(f"no such family or claim: {name} (looked under {ROOT / 'specs'})")
        wanted.setdefault(fam, []).extend([claim] if claim else [])
    base = Path(os.environ.get("BENCH_CACHE", Path.home() / ".cache" / "bench"))
    lines = [f"Full profile on {a.model}, CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} "
             f"cores, {time.strftime('%Y-%m-%d')}; cap {a.cap_min:g} min per family"
             + (f"; cut: {', '.join(f'{k} = {v}' for k, v in cuts.items())} (the full profile's shapes, fewer "
                "repetitions: the verdicts are not the claims')." if cuts else "."), "",
             "| family | claim | predicted s | measured s | ratio | forward | backward | generated | outcome |",
             "|---|---|---|---|---|---|---|---|---|"]
    summary = []
    for fam, claims in wanted.items():
        with tempfile.TemporaryDirectory() as tmp:
            cache, runs = Path(tmp) / "cache", Path(tmp) / "runs"
            cache.mkdir()
            runs.mkdir()
            for shared in ("data", "gguf", "models"):  # weights and corpora are not what is measured
                if (base / shared).exists():
                    (cache / shared).symlink_to(base / shared)
            try:
                paths = spec_paths(fam, claims)
                paths = cut_specs(paths, cuts, Path(tmp) / "specs" / fam) if cuts else paths
                plan = planned(paths, a.model)
            except Exception as exc:  # noqa: BLE001 - one family's bad plan must not lose the others' rows
                summary.append(f"- {fam}: not run, its plan failed: {exc}")
                print(summary[-1], flush=True)
                continue
            got = run_family(fam, paths, a.model, a.cap_min * 60, cache, runs)
            measured = cells(runs)
            kept = keep_record(runs, a.records / f"{a.model}-{fam}.json")
        for claim, p in plan.items():
            m = measured.get(claim)
            ratio = f"{p['predicted_s'] / m['s']:.2f}" if m and m["s"] > 0.5 else "—"
            lines.append(f"| {fam} | {claim.split('.', 1)[1]} | {p['predicted_s']:.0f} | "
                         f"{m['s']:.0f} | {ratio} | {p['forward']} | {p['backward']} | {p['generated']} | "
                         f"{m['outcome']} |" if m else
                         f"| {fam} | {claim.split('.', 1)[1]} | {p['predicted_s']:.0f} | — | — | {p['forward']} | "
                         f"{p['backward']} | {p['generated']} | not reached ({got['status']}) |")
        peak = f"{got['peak_kib'] / 2**20:.2f} GiB" if got["peak_kib"] else "?"
        planned_peak = max((p["peak_host"] or 0 for p in plan.values()), default=0) / 2**30
        summary.append(f"- {fam}: wall {got['wall_s'] / 60:.1f} min, peak RSS {peak} (planned {planned_peak:.2f} GiB), "
                       f"exit {got['status']}"
                       + (f"; record kept as {kept}" if kept else ""))
        summary += [f"  - {claim.split('.', 1)[1]}: {m['outcome']}: {m['reason'][:300]}" for claim, m in measured.items()]
        print(summary[-1], flush=True)
        if a.out:  # after every family: a later family's crash or a killed script keeps what ran
            a.out.write_text("\n".join(lines + [""] + summary) + "\n")
    text = "\n".join(lines + [""] + summary) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
