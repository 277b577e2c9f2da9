"""SFT memorizes, RL generalizes (Chu et al. 2025): a rule-variant card game, trained two ways.

``tasks``       GeneralPoints: hands, the face-card rule (J/Q/K = 10 in distribution, 11/12/13 out of it),
                the exact verifier (own parser, rational arithmetic), the solver and the seeded generator
``train_loop``  the arms' runs on the training engine: the family's recipe (an engine ``Recipe`` plus how RL
                samples), SFT through :func:`bench.models.train.fit`, GRPO-style policy gradient on the
                verifier's reward through :mod:`bench.models.policy`; FLOPs estimates and equal-FLOPs step counts
``probes``      ``sft_vs_rl``: base / SFT-initialised ("initial") / SFT / RL / RL-from-base accuracy on the same
                held-out hands, per training seed; every stage cached with ``ctx.memo``, the SFT-initialised
                weights in the engine's cache of trained weights (the two specs share them and the RL runs)
``rules``       ``accuracy_floor`` and ``accuracy_ceiling`` (exact binomial tests), the specs' preconditions
``schemas``, ``charts``   frame schema; accuracy per stage and split, accuracy against FLOPs, training curves

Why the engine's own policy-gradient loop rather than trl's GRPOTrainer: on a CPU the cost is generation and one
forward/backward per step, and trl adds a dataset pipeline, its own generation path and reference-model
bookkeeping around the same arithmetic; the engine's loop is a few dozen lines sharing the SFT loop's optimizer
and batch order, samples from a seeded ``torch.Generator`` (deterministic on CPU), sees the same prompts in the
same order as SFT and lets the sign of the update be tested directly on a tiny model.

Profiles: ``full`` is the paper's task (four cards, target 24, the rule in words only) for models that can do
arithmetic; ``smoke`` keeps the structure at a size 135M–270M models handle: two cards summed with the target
hidden (the answer states its own value), so only the stated face-card rule decides a held-out answer.  Both
arms start from the SFT-initialised checkpoint, whose format-following and in-distribution accuracy are the
first spec's preconditions; the second spec's premise is a base model that cannot follow the format.
"""
