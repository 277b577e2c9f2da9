"""Language-specific FFN neurons (Tang et al. 2024, LAPE; Zhao et al. 2024, PLND): the computations behind the
``langneurons`` and ``plnd`` probes.

``text``     tokenising texts with a start token, packing documents, batching by tokens
``stats``    one streaming pass per language: per-neuron counts of activation > 0, activation sums, PLND top-k
             counts; the per-neuron parameter-gradient norms of the PV baseline
``select``   the selection methods (LAPE, LAP, LAVE, PV, RS, PLND), pure functions on those statistics
``edit``     hooks that zero or set neurons at the FFN activation; bits per byte with a chunked LM head
``steer``    greedy generation under an edit and the language of the output
``shared``   the cached sub-results (ctx.memo) that the family's probes share
"""
