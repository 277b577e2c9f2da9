"""The Electronic Circuit Model of in-context learning and chain of thought (Chen et al. 2025): accuracy
against the number of demonstrations, and worked chain-of-thought demonstrations against direct answers.

``tasks``      seeded task generators (capital recall, string and arithmetic mappings, multi-step word
               problems), prompts and exact-answer extraction
``probes``     the two probes, answering with :func:`bench.models.decoding.greedy`
``rules``      the paired McNemar gain
``schemas``, ``charts``   frame schemas and report charts
"""
