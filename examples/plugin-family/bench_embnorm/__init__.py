"""embnorm: how large the input embedding of a text's first token is, against the vocabulary's typical row.

``probes.py`` measures (one row per text and metric), ``rules.py`` decides (an exact binomial test over texts).
bench finds this package through the entry point in ``pyproject.toml``; nothing in bench names it.
"""
