"""SFT memorizes, RL generalizes (Chu et al. 2025): a rule-variant card game, trained two ways.

``tasks``       GeneralPoints: hands, the face-card rule (J/Q/K = 10 in distribution, 11/12/13 out of it),
                the exact verifier (own parser, rational arithmetic), the solver and the seeded generator
``train_loop``  LoRA (peft) or full fine-tuning; SFT steps; GRPO-style policy-gradient steps on the verifier's
                reward; FLOPs estimate.  Decoding and completion log-probabilities (the prompts' shared prefix
                run once) come from :mod:`bench.models.decoding`
``probes``      ``sft_vs_rl``: initial / SFT / RL / SFT→RL accuracy on the same held-out hands, every stage
                cached with ``ctx.memo`` (the two specs share the initial, SFT and RL stages)
``rules``       ``accuracy_floor`` (exact binomial test), the precondition of both specs
``schemas``, ``charts``   frame schema; accuracy per stage and split, loss and reward curves

Why a policy-gradient loop of our own rather than trl's GRPOTrainer: on a CPU the cost is generation and one
forward/backward per step, and trl adds a dataset pipeline, its own generation path and reference-model
bookkeeping around the same arithmetic; our loop is ~60 lines on top of the SFT step, samples from a seeded
``torch.Generator`` (deterministic on CPU), takes the same optimizer steps on the same prompts as SFT (matched
budget by construction) and lets the sign of the update be tested directly on a tiny model.

Profiles: ``full`` is the paper's task (four cards, target 24, the rule in words only) for models that can do
arithmetic; ``smoke`` keeps the structure at a size 135M–270M models partly solve: two cards summed to a stated
target, with three demonstrations that show the stated rule at work.  Both specs are gated on the untrained
model's in-distribution accuracy being above a floor; below it the verdict is INCONCLUSIVE with the reason.
"""
