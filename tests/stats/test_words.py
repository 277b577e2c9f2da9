"""The generic rules in words (bench.stats.words): each sentence as the report and docs/CLAIMS.md print it,
for the defaults and for every parameter that changes the words (the reducer, the unit, the side, α, skips,
the sub-rules of a combination)."""

from __future__ import annotations

import pytest

from bench.stats import words

CASES = [
    ('threshold', {'metric': 'acc', 'min': 0.4},
     'the mean over samples of `acc` is ≥ 0.4, with a one-sided test at α = 0.05 (exact binomial test on 0/1 values, else a one-sample t-test, no surer than n of n 0/1 values when all lie in [0, 1])'),
    ('threshold', {'metric': 'acc', 'max': 0.2, 'reduce': 'max', 'where': {'layer': 3}},
     'the largest value of `acc` where layer = 3 is ≤ 0.2, exactly (no sampling)'),
    ('threshold', {'metric': 'acc', 'min': 0.1, 'reduce': 'min'},
     'the smallest value of `acc` is ≥ 0.1, exactly (no sampling)'),
    ('threshold', {'metric': 'acc', 'min': 0.4, 'reduce': 'max_group_mean', 'by': ['head'], 'alpha': 0.01},
     'the best head (mean over samples) of `acc` is ≥ 0.4, with a one-sided bootstrap test at α = 0.01'),
    ('paired_difference', {'a': {'cond': 'x'}, 'b': {'cond': 'y'}},
     'the mean over samples of [cond = x] minus the same for [cond = y], paired by sample, is ≥ 0 (one-sided exact McNemar test on 0/1 values, else a Wilcoxon signed-rank test, α = 0.05)'),
    ('paired_difference', {'a': {'cond': 'x'}, 'b': {'cond': 'y'}, 'reduce': 'max_group_mean', 'by': ['layer'], 'unit': 'text', 'min': 0.1, 'alpha': 0.01},
     'the best layer (mean over texts) of [cond = x] minus the same for [cond = y], paired by text, is ≥ 0.1 (one-sided bootstrap test, α = 0.01)'),
    ('exceeds_baseline', {'observed': {'m': 'o'}, 'baseline': {'m': 'b'}},
     'the observed [m = o] exceeds the 0.99 quantile of the baseline [m = b] (Monte Carlo rank p < 0.05)'),
    ('exceeds_baseline', {'observed': {'m': 'o'}, 'baseline': {'m': 'b'}, 'quantile': 0.95, 'alpha': 0.01},
     'the observed [m = o] exceeds the 0.95 quantile of the baseline [m = b] (Monte Carlo rank p < 0.01)'),
    ('all_of', {'of': [{'rule': 'threshold', 'metric': 'a', 'min': 1}, {'rule': 'threshold', 'metric': 'b', 'max': 2, 'reduce': 'max'}]},
     'all of: (1) the mean over samples of `a` is ≥ 1, with a one-sided test at α = 0.05 (exact binomial test on 0/1 values, else a one-sample t-test, no surer than n of n 0/1 values when all lie in [0, 1]); (2) the largest value of `b` is ≤ 2, exactly (no sampling)'),
    ('gated', {'of': []},
     'no rules given'),
    ('gated', {'of': [{'rule': 'threshold', 'metric': 'a', 'min': 1, 'reduce': 'max'}]},
     'the largest value of `a` is ≥ 1, exactly (no sampling)'),
    ('gated', {'of': [{'rule': 'threshold', 'metric': 'a', 'min': 1, 'reduce': 'max'}, {'rule': 'threshold', 'metric': 'b', 'max': 2, 'reduce': 'min'}, {'rule': 'threshold', 'metric': 'c', 'min': 3, 'reduce': 'max'}]},
     'provided that (1) the largest value of `a` is ≥ 1, exactly (no sampling); (2) the smallest value of `b` is ≤ 2, exactly (no sampling) (otherwise INCONCLUSIVE, nothing tested): (3) the largest value of `c` is ≥ 3, exactly (no sampling)'),
    ('group_comparison', {'metric': 'v', 'a': 'det', 'b': 'noun'},
     "`v` for cls det lies below that for noun: Cliff's δ beyond 0, its one-sided p < 0.05 and its interval excluding 0, both from a bootstrap over whole samples (Boschloo's exact test when each sample holds one 0/1 value)"),
    ('group_comparison', {'metric': 'v', 'a': 'det', 'b': 'noun', 'side': 'greater', 'delta': 0.2, 'column': 'pos', 'unit': 'text', 'over': 'layer', 'alpha': 0.01, 'where': {'k': 1}},
     "`v` where k = 1 for pos det lies above that for noun: Cliff's δ beyond 0.2, its one-sided p < 0.01 and its interval excluding 0, both from a bootstrap over whole texts (Boschloo's exact test when each text holds one 0/1 value); compared per layer, holding in more than half of them"),
    ('correlation', {'x': {'metric': 'x'}, 'y': {'metric': 'y'}},
     'Pearson r between [metric = x] and [metric = y] is > 0, its bootstrap interval over samples excluding it (α = 0.05)'),
    ('correlation', {'x': {'metric': 'x'}, 'y': {'metric': 'y'}, 'method': 'spearman', 'min': 0.3, 'unit': 'text', 'alpha': 0.01},
     'Spearman ρ between [metric = x] and [metric = y] is > 0.3, its bootstrap interval over texts excluding it (α = 0.01)'),
    ('correlation', {'x': {'metric': 'x'}, 'y': {'metric': 'y'}, 'given': {'metric': 'z'}},
     'the partial Pearson r given [metric = z] between [metric = x] and [metric = y] is > 0, its bootstrap interval over samples excluding it (α = 0.05)'),
    ('correlation_difference', {'x': {'metric': 'x'}, 'y': {'metric': 'y'}},
     'the Pearson r of [metric = x] and [metric = y] differs between base and instruct by at least 0.2 in absolute value (bootstrap over samples)'),
    ('correlation_difference', {'x': {'metric': 'x'}, 'y': {'metric': 'y'}, 'subjects': ['a', 'b', 'c'], 'min_abs': 0.3, 'unit': 'text'},
     'the Pearson r of [metric = x] and [metric = y] differs between a and b by at least 0.3 in absolute value (bootstrap over texts)'),
    ('trend', {'metric': 'm', 'min': 0.5},
     'Spearman ρ between layer and the mean `m` per layer is ≥ 0.5 (bootstrap over samples, α = 0.05)'),
    ('trend', {'metric': 'm', 'max': -0.5, 'over': 'block', 'unit': 'text', 'alpha': 0.01},
     'Spearman ρ between block and the mean `m` per block is ≤ -0.5 (bootstrap over texts, α = 0.01)'),
    ('layer_majority', {'metric': 'm', 'min': 0.5},
     'in more than half of the layers, the mean `m` over samples is ≥ 0.5 (α = 0.05)'),
    ('layer_majority', {'metric': 'm', 'min': 0.5, 'over': 'block', 'unit': 'text', 'where': {'a': 1}, 'alpha': 0.01},
     'in more than half of the blocks, the mean `m` where a = 1 over texts is ≥ 0.5 (α = 0.01)'),
    ('layer_summary', {'metric': 'm', 'max': 0.1},
     'the median over layers of the per-layer mean `m` is ≤ 0.1, exactly (no sampling)'),
    ('layer_summary', {'metric': 'm', 'max': 0.1, 'reduce': 'max', 'over': 'block', 'skip_first': 1, 'skip_last': 2, 'where': {'a': 1}},
     'the max over blocks, leaving out the first 1 and the last 2 blocks, of the per-block mean `m` where a = 1 is ≤ 0.1, exactly (no sampling)'),
    ('accuracy_drop', {'a': {'c': 'x'}, 'b': {'c': 'y'}},
     'accuracy under [c = x] minus under [c = y], paired by question, is > 0 (exact McNemar test, α = 0.05; exact interval from the discordant pairs)'),
    ('accuracy_drop', {'a': {'c': 'x'}, 'b': {'c': 'y'}, 'unit': 'fact', 'min': 0.1, 'alpha': 0.01},
     'accuracy under [c = x] minus under [c = y], paired by fact, is > 0.1 (exact McNemar test, α = 0.01; exact interval from the discordant pairs)'),
    ('crossfit_summary', {'resid': 'r', 'total': 't', 'min': 0.5},
     'the median over layers of the held-out score 1 − Σ `r` / Σ `t` (fitted on other samples) is ≥ 0.5 (bootstrap over samples, α = 0.05)'),
    ('crossfit_summary', {'resid': 'r', 'total': 't', 'min': 0.5, 'reduce': 'max', 'over': 'block', 'skip_first': 1, 'unit': 'text', 'alpha': 0.01},
     'the max over blocks, leaving out the first 1 blocks, of the held-out score 1 − Σ `r` / Σ `t` (fitted on other texts) is ≥ 0.5 (bootstrap over texts, α = 0.01)'),
]


@pytest.mark.parametrize(("name", "params", "said"), CASES)
def test_each_rule_says_itself(name, params, said):
    assert getattr(words, name)(params) == said


def test_accuracy_drop_pairs_by_the_unit_its_caller_names():
    assert words.accuracy_drop({"a": {"c": "x"}, "b": {"c": "y"}}, "item").startswith(
        "accuracy under [c = x] minus under [c = y], paired by item, is > 0")
