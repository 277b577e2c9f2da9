"""An in-process fuzzer over the shipped specs: no mutant may raise anything but a one-line SpecError, none may
take more than 2 s, and none that is invalid by construction may be accepted.

Mutation classes: nesting, wrong types, ranges, unicode, huge values, binary, special files, long names,
profiles (unknown names, overrides in the wrong section), and deep (typos in nested verdict tables at any depth,
rules without their bounds or sub-rules, too few resamples, empty texts, references that are not tables).  A few hundred mutants run by default; the full count
runs with ``-m fuzz`` (``BENCH_FUZZ_N`` sets it, default 10,000).  Run this file as a script to print the figures.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import tomllib

from bench.ground import registry, validate
from bench.ground.errors import SpecError
from bench.ground.spec import load_specs
from bench.spine.checks import check_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
LIMIT_S = 10.0  # a hang, not a slow machine: the slowest mutant takes ~0.15 s alone, ~2.5 s on a loaded 2-core box
CLASSES = ("nesting", "wrong_types", "ranges", "unicode", "huge", "binary", "special_files", "long_names",
           "profiles", "deep")
PARAM_SECTIONS = ("data", "measure", "verdict")


# ── TOML out (inline tables throughout: always valid, whatever the shape) ──────────────────────────────────

def dump_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(dump_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {dump_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump(doc: dict) -> str:
    return "".join(f"{json.dumps(k, ensure_ascii=False)} = {dump_value(v)}\n" for k, v in doc.items())


# ── mutants ────────────────────────────────────────────────────────────────────────────────────────────────

class Mutant:
    """What to write (text or a special file) and whether it is invalid by construction."""

    def __init__(self, kind: str, text: str | bytes | None = None, special: str | None = None,
                 invalid: bool = False, what: str = "", paths: list[str] | None = None):
        self.kind, self.text, self.special, self.invalid, self.what, self.paths = kind, text, special, invalid, what, paths


def _params(doc: dict) -> list[tuple[dict, str, str]]:
    """(container, key, where) of every probe and rule parameter a spec sets, sub-rules included."""
    out = []
    for section in PARAM_SECTIONS:
        for k in doc.get(section, {}):
            if k not in ("probe", "rule", "of"):
                out.append((doc[section], k, section))
    for i, sub in enumerate(doc.get("verdict", {}).get("of", [])):
        for k in sub:
            if k != "rule":
                out.append((sub, k, f"verdict.of[{i}]"))
    return out


def _annotation(doc: dict, container: dict, key: str):
    """The annotation of parameter `key` in `container` (probe or rule), or None."""
    if container is doc.get("data") or container is doc.get("measure"):
        info = registry.probes().get(doc["measure"].get("probe"))
    else:
        info = registry.rules().get(container.get("rule"))
    p = info.params.get(key) if info else None
    return p.annotation if p else None


def _other_kind(rng: random.Random, value):
    choices = {bool: ["x", 3, [1], {"a": 1}], int: ["7", [1, 2], {"a": 1}], float: ["0.5", [0.5], {"a": 1.0}],
               str: [3, 2.5, [value], {"name": value}], list: ["x", 4, {"a": 1}], dict: ["x", 4, [1, 2]]}
    for kind, alts in choices.items():
        if type(value) is kind:
            return rng.choice(alts)
    return "x"


OUT_OF_RANGE = {
    registry.PROBABILITY: [0, 1, 0.0, 1.0, -0.5, 2, 95, 1.5],
    registry.FRACTION: [-0.01, 1.01, 2, -3],
    registry.COUNT: [0, -1, -100, 10**10],
    registry.NON_NEGATIVE: [-1, -7],
    registry.POSITIVE: [0, -0.1, -5],
}
WEIRD = ["\u202e\u202d", "é\u0301\u0301", "🙂" * 50, "\u200b", "ǅ", "\ufeff", "ß", "ﬁ", "\u0000"[:0] + "\x7f",
         "İ", "∞", "\\u0000", "a\u2028b", "\U0001F600\u200d\U0001F600"]


def _rule_tables(verdict: dict, where: str = "verdict") -> list[tuple[dict, str]]:
    """(table, where) of a verdict and of every sub-rule in it, at any depth."""
    out = [(verdict, where)]
    for i, sub in enumerate(verdict.get("of", []) if isinstance(verdict.get("of"), list) else []):
        if isinstance(sub, dict):
            out.extend(_rule_tables(sub, f"{where}.of[{i}]"))
    return out


def _selector_tables(verdict: dict) -> list[tuple[dict, str]]:
    """(table, where) of every table a rule takes as a parameter (selectors, baselines, flags, `given`), any depth."""
    out = []
    for rule, where in _rule_tables(verdict):
        for k, v in rule.items():
            if k == "of":
                continue
            if isinstance(v, dict):
                out.append((v, f"{where}.{k}"))
            elif isinstance(v, list):
                out.extend((x, f"{where}.{k}[{i}]") for i, x in enumerate(v) if isinstance(x, dict))
    return out


def _deep(rng: random.Random, doc: dict) -> Mutant:
    how = rng.choice(["typo", "typo", "no_bound", "no_subrules", "resamples", "empty_text", "reference"])
    tables = _selector_tables(doc["verdict"])
    if how == "typo" and tables:
        table, where = rng.choice(tables)
        key = rng.choice(list(table) or ["metric"])
        typo = rng.choice([key + "s", key[:-1] or "x", key.upper(), "ruel", "prob", "metrics", "wher"])
        if typo not in table:
            table[typo] = table.get(key, 1)
            return Mutant("deep", dump(doc), invalid=True, what=f"{where}.{typo}")
    bounded = [(r, w) for r, w in _rule_tables(doc["verdict"])
               if (info := registry.rules().get(r.get("rule"))) is not None and not info.band
               and {"min", "max"} <= set(info.params) and info.params["min"].default is None
               and info.params["max"].default is None and ("min" in r or "max" in r)]
    if how == "no_bound" and bounded:
        rule, where = rng.choice(bounded)
        rule.pop("min", None), rule.pop("max", None)
        return Mutant("deep", dump(doc), invalid=True, what=f"{where} without a bound")
    nested = [(r, w) for r, w in _rule_tables(doc["verdict"]) if isinstance(r.get("of"), list)]
    if how == "no_subrules" and nested:
        rule, where = rng.choice(nested)
        rule["of"] = []
        return Mutant("deep", dump(doc), invalid=True, what=f"{where}.of empty")
    if how == "resamples":
        rule, where = rng.choice(_rule_tables(doc["verdict"]))
        rule["n_resamples"] = rng.choice([0, 1, 10, 199])
        return Mutant("deep", dump(doc), invalid=True, what=f"{where}.n_resamples = {rule['n_resamples']}")
    if how == "reference":
        doc["reference"] = rng.choice([[1, 2], ["x"], [[{"model": "m"}]], [True]])
        return Mutant("deep", dump(doc), invalid=True, what=f"reference = {doc['reference']!r}")
    key = rng.choice(["title", "claim", "source"])
    doc[key] = rng.choice(["", " ", "\n\t"])
    return Mutant("deep", dump(doc), invalid=True, what=f"{key} empty")


def _mutate(rng: random.Random, kind: str, text: str, doc: dict) -> Mutant:
    doc = json.loads(json.dumps(doc))  # deep copy
    if kind == "deep":
        return _deep(rng, doc)
    params = _params(doc)
    if kind == "nesting":
        depth = rng.choice([25, 40, 100, 330, 1000, 5000])
        how = rng.choice(["array", "inline", "dotted", "mixed"])
        if how == "array":
            value = "[" * depth + "1" + "]" * depth
        elif how == "inline":
            value = "{a = " * depth + "1" + "}" * depth
        elif how == "mixed":
            value = "[{a = " * (depth // 2) + "1" + "}]" * (depth // 2)
        else:
            return Mutant(kind, text + "\n" + ".".join(["k"] * depth) + " = 1\n", invalid=True, what=f"dotted {depth}")
        return Mutant(kind, text.replace("\n[", f"\nzz_nested = {value}\n[", 1) if rng.random() < 0.5 else
                      text + f"\n[data.deep]\nx = {value}\n", invalid=True, what=f"{how} {depth}")
    if kind == "wrong_types":
        target = rng.choice(["param"] * 6 + ["models", "top", "probe", "rule", "subrule", "section"])
        if target == "param" and params:
            c, k, where = rng.choice(params)
            c[k] = _other_kind(rng, c[k])
            what = f"{where}.{k} -> {c[k]!r:.30}"
        elif target == "models":
            doc["models"]["default"] = rng.choice(["smollm2-135m", 3, [1], [{"a": 1}], [""], {"a": 1}])
            what = f"models.default -> {doc['models']['default']!r}"
        elif target == "top":
            k = rng.choice(["id", "title", "source", "claim", "spec_version"])
            doc[k] = _other_kind(rng, doc[k])
            what = f"{k} -> {doc[k]!r:.30}"
        elif target == "probe":
            doc["measure"]["probe"] = _other_kind(rng, doc["measure"]["probe"])
            what = "measure.probe"
        elif target == "rule":
            doc["verdict"]["rule"] = _other_kind(rng, doc["verdict"]["rule"])
            what = "verdict.rule"
        elif target == "subrule" and doc["verdict"].get("of"):
            sub = rng.choice(doc["verdict"]["of"])
            sub["rule"] = rng.choice([3, 2.5, ["threshold"], {"a": 1}, True])
            what = f"sub-rule rule -> {sub['rule']!r}"
        else:
            s = rng.choice(["data", "measure", "verdict", "models", "profiles"])
            doc[s] = rng.choice(["x", 1, [1, 2], [{"a": 1}]])
            what = f"[{s}] -> {doc[s]!r}"
        return Mutant(kind, dump(doc), invalid=True, what=what)
    if kind == "ranges":
        ranged = [(c, k, w, registry.range_of(k, a)) for c, k, w in params
                  if (a := _annotation(doc, c, k)) is not None and registry.range_of(k, a) in OUT_OF_RANGE]
        if not ranged:  # every spec has alpha on its rule: set it when the spec leaves the default
            doc["verdict"]["alpha"] = rng.choice(OUT_OF_RANGE[registry.PROBABILITY])
            return Mutant(kind, dump(doc), invalid=True, what=f"verdict.alpha -> {doc['verdict']['alpha']}")
        c, k, w, rng_ = rng.choice(ranged)
        c[k] = rng.choice(OUT_OF_RANGE[rng_])
        if rng.random() < 0.2:  # also not finite
            c[k] = rng.choice([math.inf, -math.inf, math.nan])
        return Mutant(kind, dump(doc), invalid=True, what=f"{w}.{k} -> {c[k]!r}")
    if kind == "unicode":
        target = rng.choice(["title", "claim", "identifier", "key", "corpus", "metric"])
        junk = "".join(rng.choice(WEIRD) for _ in range(rng.randint(1, 4)))
        if target in ("title", "claim"):
            doc[target] = doc[target] + junk
            return Mutant(kind, dump(doc), invalid=False, what=f"{target} + unicode")
        if target == "identifier":
            which = rng.choice(["probe", "rule", "model"])
            if which == "probe":
                doc["measure"]["probe"] += junk
            elif which == "rule":
                doc["verdict"]["rule"] += junk
            else:
                return Mutant(kind, dump({**doc, "models": {"default": [junk]}}), invalid=False, what="model name")
            return Mutant(kind, dump(doc), invalid=True, what=f"{which} + unicode")
        if target == "key":
            s = rng.choice(["data", "measure", "verdict"])
            doc.setdefault(s, {})[junk + "x"] = 1
            return Mutant(kind, dump(doc), invalid=True, what=f"{s} key unicode")
        if target == "corpus" and "corpus" in doc.get("data", {}):
            doc["data"]["corpus"] = doc["data"]["corpus"].split(":")[0] + ":" + junk
            return Mutant(kind, dump(doc), invalid=True, what="corpus variant unicode")
        doc["verdict"]["metric"] = junk
        return Mutant(kind, dump(doc), invalid=True, what="metric unicode")
    if kind == "huge":
        target = rng.choice(["int", "float", "string", "array", "file", "count"])
        if target == "int":
            v = rng.choice([2**63, -(2**63) - 1, 10**30, 10**300])
            c, k, w = rng.choice(params) if params else (doc["verdict"], "alpha", "verdict")
            c[k] = v
            return Mutant(kind, dump(doc), invalid=True, what=f"{w}.{k} -> int {len(str(v))} digits")
        if target == "count":
            counts = [(c, k, w) for c, k, w in params if (a := _annotation(doc, c, k)) is not None
                      and registry.range_of(k, a) == registry.COUNT]
            if counts:
                c, k, w = rng.choice(counts)
                c[k] = rng.choice([10**10, 2**62, 10**18])
                return Mutant(kind, dump(doc), invalid=True, what=f"{w}.{k} -> huge count")
        if target == "float":
            doc["verdict"]["zz"] = rng.choice([1e308, -1e308, 5e-324])  # unknown key in any case
            return Mutant(kind, dump(doc), invalid=True, what="huge float under unknown key")
        if target == "string":
            doc["title"] = "t" * rng.choice([10**4, 10**5, 2 * 10**6])
            return Mutant(kind, dump(doc), invalid=False, what=f"title {len(doc['title'])} chars")
        if target == "array":
            doc["models"]["paper"] = ["m"] * rng.choice([10**3, 10**5])
            return Mutant(kind, dump(doc), invalid=False, what=f"{len(doc['models']['paper'])} paper models")
        return Mutant(kind, text + "\n" + "# padding\n" * (2 * 10**5), invalid=True, what="2 MB file")
    if kind == "binary":
        how = rng.choice(["nul", "bytes", "latin1", "bom", "truncate"])
        raw = text.encode()
        pos = rng.randrange(len(raw))
        if how == "nul":
            return Mutant(kind, raw[:pos] + b"\x00" + raw[pos:], invalid=True, what="NUL byte")
        if how == "bytes":
            junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            return Mutant(kind, raw[:pos] + junk + raw[pos:], invalid=False, what="random bytes")
        if how == "latin1":
            return Mutant(kind, raw[:pos] + b"\xe9\xff\xfe" + raw[pos:], invalid=True, what="not UTF-8")
        if how == "bom":
            return Mutant(kind, b"\xef\xbb\xbf" + raw, invalid=False, what="BOM")
        return Mutant(kind, raw[:pos], invalid=False, what="truncated")
    if kind == "special_files":
        return Mutant(kind, special=rng.choice(["fifo", "devnull", "loop", "dir", "dangling", "dirloop", "socket"]),
                      invalid=True, what="special")
    if kind == "long_names":
        target = rng.choice(["path", "model", "key", "profile", "id", "folder"])
        n = rng.choice([256, 300, 1000, 5000])
        if target == "path":
            return Mutant(kind, text, invalid=True, what=f"path part {n}", paths=["x" * n + ".toml"])
        if target == "folder":
            return Mutant(kind, text, invalid=True, what=f"folder {n}", paths=["/tmp/" + "d" * n])
        if target == "model":
            doc["models"]["default"] = ["m" * n]
            return Mutant(kind, dump(doc), invalid=True, what=f"model name {n}")
        if target == "key":
            doc["data"] = {**doc.get("data", {}), "k" * n: 1}
            return Mutant(kind, dump(doc), invalid=True, what=f"key {n}")
        if target == "profile":
            doc["profiles"] = {"p" * n: {"data": {}}}
            return Mutant(kind, dump(doc), invalid=True, what=f"profile name {n}")
        doc["id"] = doc["id"] + "-" + "x" * n
        return Mutant(kind, dump(doc), invalid=True, what=f"id {n}")
    # profiles: unknown names, overrides in the other section, verdict overrides
    how = rng.choice(["near", "unknown", "misplaced", "verdict"])
    prof = doc.setdefault("profiles", {})
    body = prof.pop("smoke", None) or {"data": {}}
    if how == "near":
        prof[rng.choice(["smok", "Smoke", "smoke ", "ful", "fulll", "smoke-test"])] = body
        return Mutant(kind, dump(doc), invalid=True, what="near-miss profile name")
    if how == "unknown":
        prof[rng.choice(["quick", "paper", "gpu", "x"])] = body
        return Mutant(kind, dump(doc), invalid=True, what="unknown profile name")
    if how == "verdict":
        prof["smoke"] = {**body, "verdict": {"alpha": 0.5}}
        return Mutant(kind, dump(doc), invalid=True, what="profile changes the verdict")
    keys = [(s, k) for s in ("data", "measure") for k in doc.get(s, {}) if k != "probe"]
    if not keys:
        prof["smoke"] = {"verdict": {}}
        return Mutant(kind, dump(doc), invalid=True, what="empty verdict override")
    s, k = rng.choice(keys)
    other = "measure" if s == "data" else "data"
    prof["smoke"] = {other: {k: doc[s][k]}}
    return Mutant(kind, dump(doc), invalid=True, what=f"override of {s}.{k} under {other}")


def _write(m: Mutant, where: Path, stem: str) -> list[str]:
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"{stem}.toml"
    if m.paths:
        return [str(where / p) if not p.startswith("/") else p for p in m.paths]
    if m.special == "fifo":
        os.mkfifo(target)
    elif m.special == "devnull":
        target.symlink_to("/dev/null")
    elif m.special == "loop":
        target.symlink_to(target.name)
    elif m.special == "dir":
        target.mkdir()
        (target / "inner.txt").write_text("x")
    elif m.special == "dangling":
        target.symlink_to(where / "missing.toml")
    elif m.special == "dirloop":
        (where / "sub").mkdir()
        (where / "sub" / "back").symlink_to("..")
        (where / "sub" / f"{stem}.toml").write_text("x = 1")
        return [str(where.parent)]
    elif m.special == "socket":
        import socket

        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(target))
        except OSError:  # a path too long for a socket address: a FIFO instead
            os.mkfifo(target)
        finally:
            s.close()
    else:
        target.write_bytes(m.text if isinstance(m.text, bytes) else m.text.encode("utf-8", "surrogatepass"))
    return [str(where.parent) if m.special == "dir" else str(target)]


def shipped() -> list[tuple[Path, str, dict]]:
    out = []
    for p in sorted(SPECS.rglob("*.toml")):
        text = p.read_text()
        out.append((p, text, tomllib.loads(text)))
    return out


def run_fuzz(n: int, seed: int, workdir: Path) -> dict:
    bases = shipped()
    for spec in load_specs([SPECS]):  # warm up (imports, corpus hashes) outside the timed part
        check_spec(spec)
    stats: dict[str, Counter] = defaultdict(Counter)
    problems: list[str] = []
    slowest = 0.0
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        kind = CLASSES[i % len(CLASSES)]
        path, text, doc = rng.choice(bases)
        m = _mutate(rng, kind, text, doc)
        where = workdir / f"m{i}" / path.parent.name
        stats[kind]["mutants"] += 1
        t0 = time.perf_counter()
        if m.text is not None and len(m.text if isinstance(m.text, bytes) else m.text.encode()) > validate.MAX_BYTES:
            m.invalid = True  # over the size limit, whatever else it holds
        try:
            paths = _write(m, where, path.stem)
            for spec in load_specs(paths):
                check_spec(spec)
            outcome = "accepted"
        except SpecError as exc:
            outcome = "rejected"
            if "\n" in str(exc):
                stats[kind]["multi_line"] += 1
                problems.append(f"{kind} ({m.what}): message of several lines")
        except Exception:  # noqa: BLE001 - the point of the fuzzer
            outcome = "traceback"
            problems.append(f"{kind} ({m.what}): " + traceback.format_exc().strip().splitlines()[-1][:200])
        dt = time.perf_counter() - t0
        slowest = max(slowest, dt)
        stats[kind][outcome] += 1
        if dt > LIMIT_S:
            stats[kind]["slow"] += 1
            problems.append(f"{kind} ({m.what}): {dt:.1f} s")
        if outcome == "accepted" and m.invalid:
            stats[kind]["accepted_invalid"] += 1
            problems.append(f"{kind} ({m.what}): invalid but accepted")
    return {"stats": {k: dict(v) for k, v in stats.items()}, "problems": problems, "slowest_s": round(slowest, 3)}


def _assert_clean(result: dict) -> None:
    assert not result["problems"], "\n".join(result["problems"][:30])


def test_shipped_specs_survive_a_few_hundred_mutants(tmp_path):
    result = run_fuzz(int(os.environ.get("BENCH_FUZZ_QUICK", 270)), seed=1, workdir=tmp_path)  # 30 per class
    _assert_clean(result)
    assert sum(s["mutants"] for s in result["stats"].values()) >= 270 or os.environ.get("BENCH_FUZZ_QUICK")


@pytest.mark.fuzz
def test_shipped_specs_survive_ten_thousand_mutants(tmp_path):
    result = run_fuzz(int(os.environ.get("BENCH_FUZZ_N", 10_000)), seed=2, workdir=tmp_path)
    print(json.dumps(result["stats"], indent=1))
    _assert_clean(result)


if __name__ == "__main__":  # figures for a note: python tests/core/test_fuzz.py N SEED
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        res = run_fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 2,
                       Path(d))
    print(json.dumps(res["stats"], indent=1))
    print("slowest:", res["slowest_s"], "s")
    print("\n".join(res["problems"][:60]))


def test_cli_validate_gives_one_line_and_exit_2(tmp_path):
    """Through `bench validate`: every mutant gives exit 0 or 2 and, on 2, exactly one line."""
    from click.testing import CliRunner

    from bench.cli import main

    runner = CliRunner()
    bases = shipped()
    for i in range(len(CLASSES) * 5):
        rng = random.Random(7_000 + i)
        kind = CLASSES[i % len(CLASSES)]
        path, text, doc = rng.choice(bases)
        m = _mutate(rng, kind, text, doc)
        paths = _write(m, tmp_path / f"c{i}" / path.parent.name, path.stem)
        t0 = time.perf_counter()
        r = runner.invoke(main, ["validate", *paths], catch_exceptions=False)
        assert time.perf_counter() - t0 < LIMIT_S, (kind, m.what)
        assert r.exit_code in (0, 2), (kind, m.what, r.output)
        if r.exit_code == 2:
            assert r.output.strip().count("\n") == 0 and r.output.startswith("error: "), (kind, m.what, r.output)
        if m.invalid:
            assert r.exit_code == 2, (kind, m.what)
