"""Mutation testing of the probe and rule modules with mutmut: a score per module and the surviving mutants.

    python scripts/mutation.py [MODULE.py …] [--jobs N] [--minutes M] [--out build/mutation] [--retest]
                               [--leave-out-slow]

Without modules it takes every module of ``bench/stats/`` and ``bench/families/*/`` except ``__init__.py``,
``charts.py`` and ``schemas.py`` (declarations, no behaviour); a module named on the command line is mutated even
if it is one of these (``bench/stats/__init__.py`` holds ``evaluate`` and the shared bootstrap).  Each module is tested against its matching test
folder (``bench/stats/x.py`` → ``tests/stats``, ``bench/families/F/x.py`` → ``tests/families/F``), the embedded
and fuzz tests left out (and, with ``--leave-out-slow``, the tests marked ``slow``: the many-seed simulations of
``tests/stats`` reach every rule, so mutmut reruns them for each of its mutants).  Modules are grouped by test folder; each group runs in a fresh scratch copy of the
repository under ``--out`` (bench/, tests/, specs/ and a pyproject.toml whose ``[tool.mutmut]`` table names the
group's modules and tests), so the working tree is never touched and a group's results can be re-read later
(``--report-only``).

The score of a module is killed / (killed + survived + untested), a timeout counting as killed; mutants named in
``docs/mutation-equivalent.txt`` (one name a line, ``#`` starts the reason) are left out of the score.  Writes
``scores.md`` and ``survivors.txt`` under ``--out`` and prints the table.  ``--retest`` keeps a previous run's
mutants and results and tests only its survivors again with the working tree's tests (the triage loop: add a
test, re-run the survivors; refused when a module under test has changed).  Exit status 0 even when a module is
below the target: the figure is for the note, not a gate.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"__init__.py", "charts.py", "schemas.py"}
TARGET = 0.90
KILLED = {"killed", "timeout", "caught by type check"}
MISSED = {"survived", "no tests"}
NO_TESTS = "could not find any test case for any mutant"


def default_modules() -> list[Path]:
    found = sorted((ROOT / "bench" / "stats").glob("*.py")) + sorted((ROOT / "bench" / "families").glob("*/*.py"))
    return [p.relative_to(ROOT) for p in found if p.name not in SKIP]


def tests_for(module: Path) -> str:
    parts = module.parts
    if parts[:2] == ("bench", "stats"):
        return "tests/stats"
    if parts[:2] == ("bench", "families") and len(parts) == 4:
        return f"tests/families/{parts[2]}"
    raise SystemExit(f"{module}: no matching test folder (only bench/stats/ and bench/families/*/ are mapped)")


def undecorate(source: str) -> str:
    """`source` with every decorated top-level function rewritten as a plain ``def`` followed by
    ``name = deco(name)``: the same module once imported, but mutmut (which leaves decorated functions alone,
    and every probe and rule is one) now mutates their bodies."""
    import libcst as cst

    class Rewrite(cst.CSTTransformer):
        def leave_Module(self, original, updated):
            body = []
            for stmt in updated.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.decorators:
                    wrapped: cst.BaseExpression = stmt.name
                    for deco in reversed(stmt.decorators):
                        wrapped = cst.Call(func=deco.decorator, args=[cst.Arg(wrapped)])
                    body.append(stmt.with_changes(decorators=[]))
                    body.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(stmt.name)], wrapped)]))
                else:
                    body.append(stmt)
            return updated.with_changes(body=body)

    return cst.parse_module(source).visit(Rewrite()).code


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def _marker_args(line: str, leave_out_slow: bool) -> str:
    """The ``pytest_add_cli_args`` line, with ``and not slow`` added to its marker expression when asked."""
    name, _, value = line.partition("=")
    args = json.loads(value)
    if leave_out_slow:
        i = args.index("-m") + 1 if "-m" in args else None
        if i is None:
            args += ["-m", "not slow"]
        else:
            args[i] = f"({args[i]}) and not slow"
    return f"{name.strip()} = {_toml_list(args)}"


def _do_not_mutate(line: str, modules: list[Path]) -> str:
    """The ``do_not_mutate`` line without the patterns that would exclude a module named explicitly (a package's
    ``__init__.py`` holds code in bench/stats/: named on the command line, it is mutated)."""
    name, _, value = line.partition("=")
    kept = [p for p in json.loads(value) if not any(fnmatch.fnmatch(str(m), p) for m in modules)]
    return f"{name.strip()} = {_toml_list(kept)}"


def scratch_copy(where: Path, modules: list[Path], tests: str, leave_out_slow: bool = False,
                 warmup: str | None = None) -> None:
    """bench/, tests/, specs/ and a pyproject.toml restricted to `modules` and `tests`, under `where`; with
    `leave_out_slow` the tests marked ``slow`` are left out of the run (the marker filter of ``[tool.mutmut]``)."""
    shutil.rmtree(where, ignore_errors=True)  # a fresh start: mutmut would keep stale copies of changed files
    where.mkdir(parents=True)
    for name in ("bench", "tests", "specs"):
        shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for m in modules:
        (where / m).write_text(undecorate((ROOT / m).read_text()))
    text = (ROOT / "pyproject.toml").read_text()
    table = re.search(r"^\[tool\.mutmut\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    base = table.group(1) if table else ""
    lines = []
    for line in base.splitlines():
        if line.startswith(("only_mutate", "pytest_add_cli_args_test_selection")):
            continue
        if line.startswith("pytest_add_cli_args ") or line.startswith("pytest_add_cli_args="):
            line = _marker_args(line, leave_out_slow)
        elif line.startswith("do_not_mutate"):
            line = _do_not_mutate(line, modules)
        elif line.startswith("forkserver_warmup") and warmup:
            line = f"forkserver_warmup = {json.dumps(warmup)}"
        lines.append(line)
    keep = "\n".join(lines)
    text = text.replace(table.group(0), "") if table else text
    text += ("\n[tool.mutmut]\n" + keep.strip() + "\n"
             f"only_mutate = {_toml_list([str(m) for m in modules])}\n"
             f"pytest_add_cli_args_test_selection = {_toml_list([tests])}\n")
    (where / "pyproject.toml").write_text(text)


def refresh_tests(where: Path, modules: list[Path]) -> list[str]:
    """Copy the working tree's tests into an existing scratch copy (and mutmut's own copy under ``mutants/``),
    so that the mutants that survived there can be tested again after tests were added.  Refused (returns the
    reasons) when a module under test is no longer the one the mutants were made from: their names would then
    point at other edits."""
    stale = [str(m) for m in modules
             if not (where / m).is_file() or (where / m).read_text() != undecorate((ROOT / m).read_text())]
    if stale:
        return [f"{m} changed since its mutants were made: run without --retest" for m in stale]
    for dest in (where / "tests", where / "mutants" / "tests"):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(ROOT / "tests", dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return []


def _env() -> dict[str, str]:
    """The environment without the working tree on PYTHONPATH: the tests must import the mutated copy."""
    env = dict(os.environ)
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    env["PYTHONPATH"] = os.pathsep.join(keep)
    return env


def run_group(where: Path, jobs: int, seconds: float, names: list[str] = ()) -> str:
    """Run mutmut in `where` (only the mutants `names`, when given); returns how it ended."""
    env = _env()
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = ["nice", "-n", "15", sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *names]
    log_path = where / "mutmut.log"
    log_path.write_text("")
    with log_path.open("a") as log:  # its own process group, so the cap also stops mutmut's forked workers
        proc = subprocess.Popen(cmd, cwd=where, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"stopped at the time cap ({seconds / 60:.0f} min); the rest is 'not checked'"
    if NO_TESTS in log_path.read_text(errors="replace"):
        (where / "no-tests").write_text("mutmut found no test that runs any mutated function\n")
        return "no test of the folder runs any mutated function: every mutant counts as untested"
    return "finished" if proc.returncode == 0 else f"mutmut exited {proc.returncode} (see {log_path})"


def results(where: Path) -> dict[str, str]:
    """mutant name → status, from ``mutmut results --all true``."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=where, env=_env(),
                         capture_output=True, text=True).stdout
    pairs = (line.strip().rsplit(": ", 1) for line in out.splitlines() if ": " in line)
    found = {name: status for name, status in pairs if "__mutmut_" in name}
    if (where / "no-tests").exists():  # mutmut stopped before testing: nothing in the folder reaches them
        found = {name: "no tests" for name in found}
    return found


def dotted(module: Path) -> str:
    """The import name of a module file, as mutmut's mutant names start (a package's ``__init__.py`` is the
    package itself)."""
    name = str(module.with_suffix("")).replace("/", ".")
    return name.removesuffix(".__init__")


def module_of(mutant: str) -> str:
    return mutant.split("__mutmut_")[0].rsplit(".", 1)[0]


def equivalents() -> dict[str, str]:
    path = ROOT / "docs" / "mutation-equivalent.txt"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        name, _, why = line.partition("#")
        if name.strip():
            out[name.strip()] = why.strip()
    return out


def score_table(status: dict[str, str], equiv: dict[str, str]) -> tuple[list[str], list[str]]:
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    survivors = []
    for name, s in sorted(status.items()):
        if name in equiv:
            per[module_of(name)]["equivalent"] += 1
            continue
        per[module_of(name)][s] += 1
        if s in MISSED:
            survivors.append(f"{name}: {s}")
    lines = ["| module | mutants | killed | survived | untested | equivalent | not checked | score |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mod, c in sorted(per.items()):
        killed = sum(c[s] for s in KILLED)
        missed = c["survived"] + c["no tests"]
        other = sum(c.values()) - killed - missed - c["equivalent"]
        if killed + missed:
            score = killed / (killed + missed)
            shown = f"{score:.1%}" + ("" if score >= TARGET else " (below 90%)")
        else:
            shown = "— (nothing checked)"
        lines.append(f"| {mod} | {sum(c.values())} | {killed} | {c['survived']} | {c['no tests']} | "
                     f"{c['equivalent']} | {other} | {shown} |")
    return lines, survivors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", type=Path, help="module files (default: every probe and rule module)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1: the machine is shared)")
    ap.add_argument("--minutes", type=float, default=60.0, help="time cap per test folder (default 60)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "mutation")
    ap.add_argument("--leave-out-slow", action="store_true",
                    help="leave the tests marked slow out of the run (many-seed simulations that reach every rule "
                         "and would be rerun for each of its mutants); the score is then what the quick tests "
                         "catch. A --retest keeps the choice of the run it retests")
    ap.add_argument("--warmup", choices=["none", "collect"],
                    help="what mutmut's fork server loads before forking each mutant's test process (default: "
                         "pyproject.toml's forkserver_warmup, 'none'); 'collect' imports the test modules once, "
                         "several times faster per mutant where the tests are quick")
    ap.add_argument("--only", nargs="+", metavar="PATTERN", default=[],
                    help="test only the mutants whose names match (fnmatch, e.g. 'bench.stats.basic.x_threshold*'); "
                         "the others are left 'not checked', for a later run with --resume")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the run under --out: test the mutants it has not checked yet (after a time cap "
                         "or --only), with the working tree's tests; the modules must be unchanged")
    ap.add_argument("--report-only", action="store_true", help="re-read the results under --out, run nothing")
    ap.add_argument("--retest", action="store_true",
                    help="keep the mutants and results under --out and test only the survivors again, with the "
                         "working tree's tests (after adding tests; the modules must be unchanged)")
    args = ap.parse_args()
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutmut is not installed: pip install -e '.[mutation]' (or `make mutation`)", file=sys.stderr)
        return 2
    modules = [m if not m.is_absolute() else m.relative_to(ROOT) for m in args.modules] or default_modules()
    groups: dict[str, list[Path]] = collections.defaultdict(list)
    for m in modules:
        if not (ROOT / m).is_file():
            print(f"{m}: no such module", file=sys.stderr)
            return 2
        groups[tests_for(m)].append(m)
    status: dict[str, str] = {}
    for tests, mods in groups.items():
        where = args.out / tests.replace("/", "-")
        if args.report_only and not where.is_dir():  # nothing run for this folder under --out
            if args.modules:
                print(f"{tests}: no run under {where}", file=sys.stderr)
                return 2
            continue
        if args.resume or args.retest:  # an existing run, with the working tree's tests
            problems = refresh_tests(where, mods)
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 2
            (where / "no-tests").unlink(missing_ok=True)  # the new tests may reach what none reached before
            t0 = time.monotonic()
            if args.resume:
                ended = run_group(where, args.jobs, args.minutes * 60, args.only)
                print(f"{tests}: resumed, {time.monotonic() - t0:.0f} s, {ended}", flush=True)
            else:
                wanted, equiv = {dotted(m) for m in mods}, equivalents()
                again = sorted(k for k, v in results(where).items()
                               if module_of(k) in wanted and v in MISSED and k not in equiv)
                ended = run_group(where, args.jobs, args.minutes * 60, again) if again else "no survivor to test again"
                print(f"{tests}: {len(again)} survivor(s) tested again, {time.monotonic() - t0:.0f} s, {ended}",
                      flush=True)
        elif not args.report_only:
            scratch_copy(where, mods, tests, args.leave_out_slow, args.warmup)
            t0 = time.monotonic()
            ended = run_group(where, args.jobs, args.minutes * 60, args.only)
            print(f"{tests}: {len(mods)} module(s), {time.monotonic() - t0:.0f} s, {ended}", flush=True)
        wanted = {dotted(m) for m in mods}
        status.update({k: v for k, v in results(where).items() if module_of(k) in wanted})
    lines, survivors = score_table(status, equivalents())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scores.md").write_text("\n".join(lines) + "\n")
    (args.out / "survivors.txt").write_text("\n".join(survivors) + ("\n" if survivors else ""))
    print("\n".join(lines))
    print(f"\n{len(survivors)} surviving mutants listed in {args.out / 'survivors.txt'} "
          f"(`cd {args.out}/<group> && python -m mutmut show NAME` prints one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
