"""How much knowledge can you pack into a LoRA adapter? (Pletenev et al. 2025, arXiv 2502.14502)

``categorise``  HighlyKnown / MaybeKnown / Unknown from k few-shot prompts with disjoint demonstration sets
                (shared-prefix KV cache)
``study``       the experiment: categorise a fact pool (grown until it holds enough Unknown facts), train on
                Unknown facts under several conditions (UK only, UK + HighlyKnown, UK + paraphrase, full
                fine-tuning) with equal exposure to each Unknown fact and ≥ 1 seed, categorise again; cached pieces
``probes``      the probe the four specs share; ``schemas``, ``charts``   its frame schema and report charts
"""
