"""SFT memorizes, RL generalizes (Chu et al. 2025): a rule-variant card game, trained two ways.

``tasks``       GeneralPoints: hands, the face-card rule (J/Q/K = 10 in distribution, 11/12/13 out of it),
                the exact verifier (own parser, rational arithmetic), the solver and the seeded generator
``train_loop``  LoRA (peft) or full fine-tuning; SFT steps; GRPO-style policy-gradient steps on the verifier's
                reward; FLOPs estimates and equal-FLOPs step counts.  Decoding and completion log-probabilities
                (the prompts' shared prefix run once) come from :mod:`bench.models.decoding`
``probes``      ``sft_vs_rl``: base / SFT-initialised ("initial") / SFT / RL / RL-from-base accuracy on the same
                held-out hands, per training seed; every stage cached with ``ctx.memo`` (the two specs share the
                initial checkpoint and the RL runs)
``rules``       ``accuracy_floor`` and ``accuracy_ceiling`` (exact binomial tests), the specs' preconditions
``schemas``, ``charts``   frame schema; accuracy per stage and split, accuracy against FLOPs, training curves

Why a policy-gradient loop of our own rather than trl's GRPOTrainer: on a CPU the cost is generation and one
forward/backward per step, and trl adds a dataset pipeline, its own generation path and reference-model
bookkeeping around the same arithmetic; our loop is ~60 lines on top of the SFT step, samples from a seeded
``torch.Generator`` (deterministic on CPU), sees the same prompts in the same order as SFT and lets the sign of
the update be tested directly on a tiny model.

Profiles: ``full`` is the paper's task (four cards, target 24, the rule in words only) for models that can do
arithmetic; ``smoke`` keeps the structure at a size 135M–270M models handle: two cards summed with the target
hidden (the answer states its own value), so only the stated face-card rule decides a held-out answer.  Both
arms start from the SFT-initialised checkpoint, whose format-following and in-distribution accuracy are the
first spec's preconditions; the second spec's premise is a base model that cannot follow the format.
"""
