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


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _top_level_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Modules of bench imported at module level (imports inside functions are deliberate late imports)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in tree.body:
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


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _top_level_imports(path, name, known) for name, path in mods.items()}


def test_no_import_cycles():
    graph = _graph()
    # A package's __init__ is imported before its submodules; an edge to the parent package is not a cycle.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


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
    from bench.report import charts

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
        from bench.report.charts import chart_def

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
