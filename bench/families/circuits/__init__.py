"""Transformer circuits (Elhage et al. 2021; Olsson et al. 2022): induction heads, the 1- vs 2-layer toy
models, K-composition, norm folding and the direct path against bigram statistics.

``attention_metrics``  induction / previous-token scores and first- vs second-copy losses from attention
``lm``                 repeated-random-token passes over a model, cached per (model, seed, shape)
``toy``                tiny attention-only transformers, trained in the probe
``induction``, ``composition``, ``toy_composition``, ``norm_folding``, ``direct_path``   the probes,
                       one module each
``schemas``, ``charts``   frame schemas and report charts
"""
