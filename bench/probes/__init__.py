"""Measurements, one module each, registered by name with ``bench.registry.probe_def``.

A probe is pure: a model (via the context), batches and parameters in, a tidy long DataFrame out.  It never
decides a verdict.
"""
