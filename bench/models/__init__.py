"""Models: names resolved to weights, loading, module-tree introspection, hooks and norm folding.

``loading``  embedded aliases, local folders, ``.gguf`` files and hub ids → :class:`ModelRef` (fingerprinted)
             → :class:`LoadedModel`
``arch``     where the blocks, norms, attention projections and FFN activations of a loaded model are
``hooks``    forward hooks on HF module paths, removed when their ``with`` block ends
``folding``  norm scales and biases folded into the linear layers that read them
``decoding`` the one decoder (greedy or sampled; shared prefixes, per-prompt budgets and stop strings) and
             completion log-probabilities
``logits``   the output head's logits with the config's soft-capping;  ``linear``  Linear/Conv1D orientation
``train``    LoRA / full fine-tuning: the recipe, the optimizer, the SFT loss and the cache of trained weights
``adapters`` where LoRA adapters go, put on for a ``with`` block;  ``policy``  policy-gradient updates on sampled
             completions (group advantages, the pg loss) with the engine's optimizer
"""

from bench.models.loading import (
                                  ALIASES,
                                  DTYPES,
                                  Embedded,
                                  LoadedModel,
                                  ModelRef,
                                  cache_state,
                                  dtype_name,
                                  load,
                                  prepare,
                                  resolve,
                                  torch_dtype,
                                  weight_bytes,
)

__all__ = ["ALIASES", "DTYPES", "Embedded", "LoadedModel", "ModelRef", "cache_state", "dtype_name", "load", "prepare", "resolve",
           "torch_dtype", "weight_bytes"]
