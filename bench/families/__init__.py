"""Claim families, one package each.  A family's package holds everything the family adds: its probes, the
kernels behind them, the decision rules only it needs, its frame schemas, and its report charts
(``charts.py``, imported by the report only).  ``bench.ground.registry`` discovers families by package; no module
outside ``bench/families/`` names one.  CONTRIBUTING.md says how to add a family.
"""
