"""Claims as regression tests: a baseline written from a run, and a later run checked against it.

A baseline (TOML, meant to be committed) holds per (claim, model): the outcome, the estimate and its interval,
the spec's digest, the model's fingerprint, the profile and seed, and the sha256 of the cell's frame, a copy of
which goes into a folder beside the file (``<name>.frames/``) so that a check can pair units.

:func:`check` compares a run with a baseline, cell by cell:

* a cell whose spec digest changed is not compared ("spec changed since the baseline": the lock on what was
  pre-registered), nor is one whose profile or seed changed; both fail the check until a new baseline is
  written on purpose;
* a cell whose model fingerprint changed is compared on its outcome only ("model changed"): the estimate of
  another model is no regression of this one;
* an outcome that differs fails;
* an estimate moves when the paired test of the metric's values over the units both frames share (as
  ``bench compare``: a bootstrap over whole samples, BH-adjusted over the cells tested) rejects no change at
  `alpha` *and* the estimate moved by more than `margin` times the baseline interval's half-width (a convention:
  consistent sub-noise drift, such as a library's rounding, is reported but does not fail); without frames to
  pair, it moves when the new estimate leaves the baseline's interval;
* a cell without an interval (an exact check) is compared on its outcome only;
* a cell in the baseline but not in the run fails ("missing"); a cell only in the run is listed ("new").
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.ground import integrity
from bench.spine.compare import decision_metric, paired_difference
from bench.ground.errors import UsageError
from bench.ground.numbers import fmt
from bench.ground.store import atomic_write_bytes, now, read_frame

FORMAT = 1
FAILS = ("outcome flipped", "estimate moved", "spec changed", "setup changed", "missing")
FIELDS = ("outcome", "metric", "threshold", "estimate", "ci_low", "ci_high", "n")


@dataclass
class CheckRow:
    claim: str
    model: str
    status: str  # holds · outcome flipped · estimate moved · spec changed · setup changed · model changed · missing · new
    baseline: str  # "OUTCOME estimate [low, high]"
    run: str
    why: str
    fails: bool
    p_adjusted: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def frames_dir(path: Path) -> Path:
    return Path(path).with_name(Path(path).stem + ".frames")


def write(record: dict[str, Any], run_dir: Path, path: Path, *, frames: bool = True) -> int:
    """Write the baseline of a (verified) run to `path`; copy its frames beside it.  Returns the cell count."""
    path = Path(path)
    fdir = frames_dir(path)
    lines = ["# bench baseline: `bench check RUN --baseline <this file>` fails when a cell stops matching it.",
             "# Written from a run; change it by writing a new one (bench baseline), not by hand.",
             f"format = {FORMAT}", f"run_id = {_str(record['run_id'])}", f"written = {_str(now())}",
             f"profile = {_str(record.get('profile') or '')}", f"seed = {int(record.get('seed') or 0)}",
             f"device = {_str((record.get('device') or {}).get('type') or '')}",
             f"dtype = {_str(record.get('dtype') or '')}",
             f"frames = {_str(fdir.name if frames else '')}", "", "[packages]"]
    lines += [f"{_key(k)} = {_str(v)}" for k, v in sorted((record.get("packages") or {}).items()) if v]
    if frames and fdir.is_dir():  # an earlier baseline's copies: replaced, nothing else in the folder touched
        for stale in fdir.rglob("*.parquet"):
            stale.unlink()
    for cell in record["cells"]:
        v = cell.get("verdict") or {}
        lines += ["", "[[cell]]", f"claim = {_str(cell['spec']['id'])}", f"model = {_str(cell['model'])}",
                  f"seed = {int(cell.get('seed') or 0)}"]
        lines += [f"{k} = {_val(v[k])}" for k in FIELDS if v.get(k) is not None]
        lines += [f"spec_hash = {_str(cell['spec'].get('hash') or '')}",
                  f"profile = {_str(cell['spec'].get('profile') or record.get('profile') or '')}",
                  f"fingerprint = {_str(cell.get('fingerprint') or '')}"]
        if frames and cell.get("frame"):
            rel = f"{cell['spec']['id']}/{Path(cell['frame']).name}"
            atomic_write_bytes(fdir / rel, (Path(run_dir) / cell["frame"]).read_bytes())
            lines += [f"frame = {_str(rel)}", f"frame_sha256 = {_str(cell[integrity.FRAME_KEY])}"]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return len(record["cells"])


def read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read baseline {path}: {exc}") from None
    if data.get("format") != FORMAT or not isinstance(data.get("cell", []), list):
        raise UsageError(f"{path} is not a bench baseline (format {data.get('format')!r})")
    for i, c in enumerate(data.get("cell", [])):
        if not (isinstance(c, dict) and isinstance(c.get("claim"), str) and isinstance(c.get("model"), str)
                and isinstance(c.get("outcome"), str)):
            raise UsageError(f"baseline {path}: cell {i + 1} needs claim, model and outcome")
    return data


def baseline_frame(path: Path, base: dict[str, Any], cell: dict[str, Any]):
    """The baseline's copy of a cell's frame, its hash checked; None when the baseline kept no frames."""
    if not base.get("frames") or not cell.get("frame"):
        return None
    f = Path(path).parent / base["frames"] / cell["frame"]
    if not f.is_file():
        return None
    data = f.read_bytes()
    if integrity.sha256_hex(data) != cell.get("frame_sha256"):
        raise integrity.TamperedError(f"baseline frame {f} was edited after the baseline was written "
                                      f"({cell['claim']} × {cell['model']})")
    return read_frame(data)


def check(path: Path, base: dict[str, Any], record: dict[str, Any], run_dir: Path, *, alpha: float = 0.05,
          margin: float = 0.5, seed: int = 0) -> list[CheckRow]:
    from scipy import stats

    from bench.ground.store import load_cell_frame

    cells = {(c["spec"]["id"], c["model"]): c for c in record["cells"]}
    base_frames = {(b["claim"], b["model"]): baseline_frame(path, base, b) for b in base.get("cell", [])}  # all hashed
    rows: list[CheckRow] = []
    tested: list[tuple[CheckRow, float, float, float | None]] = []  # row, p, |Δ estimate|, allowed move
    for b in base.get("cell", []):
        key = (b["claim"], b["model"])
        c = cells.pop(key, None)
        was = _text(b)
        if c is None:
            rows.append(CheckRow(*key, "missing", was, "—", "the run has no such cell", True))
            continue
        v = c.get("verdict") or {}
        now_ = _text(v)
        row = CheckRow(*key, "holds", was, now_, "", False)
        rows.append(row)
        gate = _gate(b, c, record)
        if gate:
            row.status, row.why = gate
            row.fails = row.status in FAILS
            if row.status == "model changed" and v.get("outcome") != b["outcome"]:
                row.why += f"; outcome {b['outcome']} → {v.get('outcome')}"
                row.fails = True
            continue
        if v.get("outcome") != b["outcome"]:
            row.status, row.why, row.fails = "outcome flipped", f"{b['outcome']} → {v.get('outcome')}", True
            continue
        est, b_est = v.get("estimate"), b.get("estimate")
        if b.get("ci_low") is None or est is None or b_est is None:
            row.why = "no interval (exact check): outcome compared only"
            continue
        if est == b_est:
            row.why = "same estimate"
            continue
        half = (b["ci_high"] - b["ci_low"]) / 2
        fb, fr = base_frames[key], load_cell_frame(run_dir, c)
        metric = decision_metric(c["spec"].get("verdict") or {})
        test = paired_difference(fr, fb, metric, seed=seed) if fb is not None and fr is not None and metric else None
        if test is None or test["p_value"] is None:
            inside = b["ci_low"] <= est <= b["ci_high"]
            row.why = (f"estimate {'inside' if inside else 'outside'} the baseline's interval (unpaired: "
                       f"{'no baseline frames' if fb is None else test['note'] if test else 'no metric'})")
            if not inside:
                row.status, row.fails = "estimate moved", True
            continue
        row.why = (f"Δ {est - b_est:+.4g}; paired Δ {test['difference']:+.4g} [{test['ci_low']:.4g}, "
                   f"{test['ci_high']:.4g}] over {test['n_units']} {test['unit']}s")
        tested.append((row, test["p_value"], abs(est - b_est), margin * half))
    adjusted = stats.false_discovery_control([t[1] for t in tested], method="bh") if tested else []
    for (row, _, moved, allowed), p_adj in zip(tested, adjusted):
        row.p_adjusted = float(p_adj)
        row.why += f", p (BH) {p_adj:.3g}"
        if p_adj < alpha and moved > allowed:
            row.status, row.fails = "estimate moved", True
        elif p_adj < alpha:
            row.why += f": significant but within the margin ({margin:g} × the baseline half-width)"
    for key, c in cells.items():
        rows.append(CheckRow(*key, "new", "—", _text(c.get("verdict") or {}), "not in the baseline", False))
    return rows


def _gate(b: dict[str, Any], c: dict[str, Any], record: dict[str, Any]) -> tuple[str, str] | None:
    """Why a cell cannot be compared with its baseline as it stands, or None."""
    if b.get("spec_hash") and b["spec_hash"] != c["spec"].get("hash"):
        return "spec changed", (f"spec changed since the baseline ({b['spec_hash'][:10]} → "
                                f"{str(c['spec'].get('hash'))[:10]}): write a new baseline if the change is meant")
    profile = c["spec"].get("profile") or record.get("profile") or ""
    if b.get("profile") and b["profile"] != profile:
        return "setup changed", f"profile {b['profile']} → {profile}"
    if int(b.get("seed") or 0) != int(c.get("seed") or 0):
        return "setup changed", f"seed {b.get('seed')} → {c.get('seed')}"
    if b.get("fingerprint") and b["fingerprint"] != (c.get("fingerprint") or ""):
        return "model changed", (f"model changed ({b['fingerprint'][-12:]} → {str(c.get('fingerprint'))[-12:]}): "
                                 f"outcome compared only")
    return None


def library_changes(base: dict[str, Any], record: dict[str, Any]) -> list[str]:
    old, new = base.get("packages") or {}, record.get("packages") or {}
    return [f"{k} {old.get(k) or '—'} → {new.get(k) or '—'}" for k in sorted(set(old) | set(new))
            if (old.get(k) or None) != (new.get(k) or None)]


def _text(v: dict[str, Any]) -> str:
    est = v.get("estimate")
    ci = f" [{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]" if v.get("ci_low") is not None else ""
    return f"{v.get('outcome', '—')} {fmt(est) if est is not None else '—'}{ci}"


def _str(s: Any) -> str:
    return json.dumps(str(s), ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _key(k: str) -> str:
    return k if k.replace("-", "").replace("_", "").isalnum() and k.isascii() else _str(k)


def _val(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf") if math.isinf(x) else repr(x)
    return _str(x)
