"""LLM-Microscope (Razzhigaev et al. 2025) and the seed author's notes on it: layer linearity, token
nonlinearity, contextualization, logit lens, intrinsic dimension and token centrality.

``layerpass``    one shared streaming pass over tagged text: Gram statistics, per-token errors, centrality
``linearity``    least-squares layer maps from accumulated Gram matrices (in-sample and held-out scores)
``intrinsic``    TwoNN intrinsic dimension and anisotropy
``lens``         the logit lens with the model's final norm
``contextual``   the prefix-reconstruction decoder behind the contextualization score C
``qa``           capital-city questions and the input edits of the removal claims
``probes``, ``context_probe``, ``text_probes``   the probes
``schemas``, ``charts``   frame schemas and report charts
"""
