"""The shape of the package: one folder per family, a core that names no family, no import cycles, small
modules, and families found by package alone."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "bench"
MAX_LINES = 400


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Modules of bench that `path` imports anywhere: at module level and inside functions (a late import is
    still an edge of the graph; a circle through one is still a circle)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name if is_pkg else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rsplit(".", 1)[0]
                base = f"{pkg}.{base}" if base else pkg
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = _modules(root)
    known = set(mods)
    graph = {name: _imports(path, name, known) for name, path in mods.items()}
    # A package's __init__ is imported before its submodules; an edge to the parent package is not a cycle.
    return {name: {t for t in graph[name] if not name.startswith(t + ".")} for name in graph}


def _folder(module: str) -> str:
    """The folder a module belongs to: ``bench.families.<name>`` for a family, else ``bench.<folder>``."""
    parts = module.split(".")
    if parts[:2] == ["bench", "families"] and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = out.setdefault(_folder(name), set())
        edges |= {_folder(t) for t in targets if _folder(t) != _folder(name) and t != "bench"}
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


BELOW_FAMILIES = {"bench.ground", "bench.stats", "bench.models", "bench.corpora"}
ALLOWED = {  # folder → the other folders it may import (CONTRIBUTING.md, "Where things live")
    "bench.ground": set(),
    "bench.stats": {"bench.ground"},
    "bench.models": {"bench.ground"},
    "bench.corpora": {"bench.ground", "bench.models"},
    "family": BELOW_FAMILIES,
    "bench.spine": BELOW_FAMILIES,
    "bench.report": BELOW_FAMILIES | {"bench.spine"},
}


def _layer_problems(graph: dict[str, set[str]]) -> list[str]:
    """Imports that point up or sideways: each folder imports only the folders :data:`ALLOWED` lists for it (the
    ground none), and a family never another family."""
    bad = []
    for name, targets in sorted(graph.items()):
        folder = _folder(name)
        kind = "family" if folder.startswith("bench.families.") else folder
        for t in sorted(targets):
            other = _folder(t)
            if t == "bench" or other == folder:
                continue
            if kind == "family" and other.startswith("bench.families."):
                bad.append(f"the family {folder} imports the family {other} ({name} → {t})")
            elif kind in ALLOWED and other not in ALLOWED[kind]:
                bad.append(f"{folder} imports {other}, which sits above it ({name} → {t})")
    return bad


def test_no_import_cycles_counting_late_imports():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_no_folder_cycles():
    cycle = _cycle(_folder_graph(_graph()))
    assert cycle is None, "folder cycle: " + " → ".join(cycle or [])


def test_every_folder_imports_only_the_folders_below_it():
    assert _layer_problems(_graph()) == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / "bench" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    return tmp_path / "bench"


def test_the_checks_catch_a_planted_late_circle_and_a_family_import(tmp_path):
    """The checks themselves: a circle closed by an import inside a function, a folder circle, a family that
    imports another family and a ground module that imports a family are each found."""
    root = _plant(tmp_path, {
        "__init__.py": "",
        "ground/__init__.py": "",
        "ground/a.py": "def f():\n    from bench.ground import b\n",
        "ground/b.py": "from bench.ground import a\n",
        "models/__init__.py": "from bench.ground import a\n",
        "families/__init__.py": "",
        "families/one/__init__.py": "",
        "families/one/p.py": "def g():\n    from bench.families.two import q\n",
        "families/two/__init__.py": "",
        "families/two/q.py": "",
        "ground/c.py": "def h():\n    import bench.models\n",
    })
    graph = _graph(root)
    assert _cycle(graph) == ["bench.ground.a", "bench.ground.b", "bench.ground.a"]
    assert _cycle(_folder_graph(graph)) == ["bench.ground", "bench.models", "bench.ground"]
    problems = _layer_problems(graph)
    assert "bench.ground imports bench.models, which sits above it (bench.ground.c → bench.models)" in problems
    assert ("the family bench.families.one imports the family bench.families.two (bench.families.one.p → "
            "bench.families.two.q)") in problems
    assert len(problems) == 3  # the family edge to the package and to its module, the ground edge


def test_the_spine_names_no_family():
    """core, models, stats, corpora, report and the CLI never name a family (the registry finds them)."""
    import re

    from bench.ground.registry import families

    names = re.compile(r"bench\.families\.(" + "|".join(families()) + r")\b")
    for name, path in _modules().items():
        if name.startswith("bench.families"):
            continue
        hit = names.search(path.read_text())
        assert hit is None, f"{path} names the family module {hit.group(0) if hit else ''}"


def test_modules_stay_small():
    big = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_a_new_family_is_found_from_its_folder_alone(tmp_path, monkeypatch):
    """The recipe in CONTRIBUTING.md: a package under bench/families registers its probe, rule and chart with
    nothing edited elsewhere."""
    import bench.families
    from bench.ground import registry
    from bench.ground import charts

    family = tmp_path / "zzdemo"
    family.mkdir()
    (family / "__init__.py").write_text('"""A demonstration family."""\n')
    (family / "probes.py").write_text(textwrap.dedent('''
        import pandas as pd
        from bench.ground.registry import probe_def, rule_def
        from bench.ground.schemas import SampleMetrics
        from bench.stats import errored

        @probe_def("zzdemo_probe", version=1, schema=SampleMetrics, metrics=("x",), uses_model=False)
        def zzdemo_probe(ctx, *, n: int = 3) -> pd.DataFrame:
            """Counts to n."""
            return pd.DataFrame({"sample": range(n), "metric": "x", "value": [float(i) for i in range(n)]})

        @rule_def("zzdemo_rule")
        def zzdemo_rule(frame, *, alpha: float = 0.05):
            return errored("demonstration")
    '''))
    (family / "charts.py").write_text(textwrap.dedent('''
        from bench.ground.charts import chart_def

        @chart_def("zzdemo_probe")
        def chart(frame):
            return None
    '''))
    monkeypatch.setattr(bench.families, "__path__", [*bench.families.__path__, str(tmp_path)])
    for cached in (registry.import_families, registry.import_submodules):
        cached.cache_clear()
    try:
        assert "zzdemo" in registry.families()
        assert registry.probe("zzdemo_probe").params["n"].default == 3
        assert "zzdemo_rule" in registry.rules()
        assert charts.chart_for("zzdemo_probe") is not None
    finally:
        for store in (registry.PROBES, registry.RULES, charts.CHARTS):
            for key in [k for k in store._items if k.startswith("zzdemo")]:
                del store._items[key]
        for mod in [m for m in sys.modules if m.startswith("bench.families.zzdemo")]:
            del sys.modules[mod]
        for cached in (registry.import_families, registry.import_submodules):
            cached.cache_clear()


KINDS = ("known_answer", "parity", "wiring")


def _probe_test_problems(probes: dict[str, list[str]], repo: Path) -> list[str]:
    """Problems with the per-probe test lists: `probes` maps each family to its probes' names, and
    ``tests/families/<family>/probe_tests.toml`` must name, for every one of them, at least one test of each kind
    in :data:`KINDS` as ``path::function``, every one a test function defined at the top of that file."""
    import tomllib

    bad = []
    for family, names in sorted(probes.items()):
        listing = repo / "tests" / "families" / family / "probe_tests.toml"
        if not listing.is_file():
            bad.append(f"{family}: no {listing.relative_to(repo)}")
            continue
        table = tomllib.loads(listing.read_text())
        bad += [f"{family}: '{extra}' is listed but is not a probe of the family" for extra in set(table) - set(names)]
        for probe in sorted(names):
            for kind in KINDS:
                tests = table.get(probe, {}).get(kind) or []
                if not tests:
                    bad.append(f"{family}.{probe}: no {kind} test listed")
                for test in tests:
                    path, _, fn = test.partition("::")
                    file = repo / path
                    defined = file.is_file() and fn in {n.name for n in ast.parse(file.read_text()).body
                                                        if isinstance(n, ast.FunctionDef)}
                    if not (defined and fn.startswith("test_")):
                        bad.append(f"{family}.{probe}: {kind} test {test} does not exist")
    return bad


def test_every_probe_lists_its_known_answer_parity_and_wiring_tests():
    from bench.ground import registry

    packages = {pkg: fam for fam, pkg in registry.family_packages().items() if pkg.startswith("bench.families.")}
    probes: dict[str, list[str]] = {fam: [] for fam in packages.values()}
    for name, info in registry.probes().items():
        pkg = next((p for p in packages if info.fn.__module__.startswith(p + ".")), None)
        if pkg is not None:
            probes[packages[pkg]].append(name)
    assert _probe_test_problems(probes, ROOT.parent) == []


def test_the_probe_test_check_catches_a_missing_kind_and_a_missing_test(tmp_path):
    (tmp_path / "tests" / "families" / "demo").mkdir(parents=True)
    (tmp_path / "tests" / "families" / "demo" / "test_demo.py").write_text("def test_known():\n    pass\n")
    (tmp_path / "tests" / "families" / "demo" / "probe_tests.toml").write_text(textwrap.dedent('''
        [p]
        known_answer = ["tests/families/demo/test_demo.py::test_known"]
        parity = ["tests/families/demo/test_demo.py::test_gone"]
        [old]
        wiring = ["tests/families/demo/test_demo.py::test_known"]
    '''))
    assert sorted(_probe_test_problems({"demo": ["p"], "other": ["q"]}, tmp_path)) == [
        "demo.p: no wiring test listed",
        "demo.p: parity test tests/families/demo/test_demo.py::test_gone does not exist",
        "demo: 'old' is listed but is not a probe of the family",
        "other: no tests/families/other/probe_tests.toml",
    ]


def test_the_committed_claim_catalogue_is_what_the_specs_say(tmp_path):
    """docs/CLAIMS.md is generated from specs/ (`make claims-doc`); a spec changed without regenerating it leaves
    the catalogue describing a different decision rule."""
    from click.testing import CliRunner

    from bench.cli import main

    out = tmp_path / "CLAIMS.md"
    res = CliRunner().invoke(main, ["list", str(ROOT.parent / "specs"), "--markdown", "-o", str(out)])
    assert res.exit_code == 0, res.output
    committed = (ROOT.parent / "docs" / "CLAIMS.md").read_text()
    assert out.read_text() == committed, "docs/CLAIMS.md is stale: run `make claims-doc`"


def test_the_committed_parameter_reference_is_what_the_code_says():
    """docs/PARAMETERS.md is generated from the registry (`make claims-doc`): the default a spec gets for a key it
    leaves out is the code's, and a changed default or range without regenerating the page would tell spec
    authors a value no run uses.  Run in a fresh process: tests register probes of their own in this one."""
    import subprocess

    res = subprocess.run([sys.executable, "-m", "bench", "describe", "--markdown"], capture_output=True, text=True,
                         cwd=ROOT.parent, timeout=300)
    assert res.returncode == 0, res.stderr
    committed = (ROOT.parent / "docs" / "PARAMETERS.md").read_text()
    assert res.stdout == committed, "docs/PARAMETERS.md is stale: run `make claims-doc`"
