"""The one-number rows and the RL gain of sft_vs_rl, by known answer on hand-written frames: which rows each
summary averages, under which metric, stage, split and seed; which start each trained item is compared with."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.families.generalization import probes


def _frame() -> pd.DataFrame:
    r = probes._rows
    return pd.concat([
        r("format_ok", "initial", [1, 0, 1, 1], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1]),
        r("correct", "initial", [1, 0, 0, 1], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1]),
        r("format_ok", "base", [0, 0, 1, 0], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1]),
        r("correct", "base", [0, 1, 1, 1], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1]),
        # the trained arms list their items in another order than their starts
        r("correct", "rl", [0, 1, 1, 1], split=["ood", "id", "id", "ood"], sample=[1, 0, 1, 0], seed=0),
        r("correct", "rl", [0, 0, 0, 1], split=["id", "id", "ood", "ood"], sample=[1, 0, 0, 1], seed=1),
        r("format_ok", "rl", [1, 1, 1, 1], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1], seed=0),
        r("correct", "sft", [1, 1, 0, 0], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1], seed=3),
        r("correct", "base_rl", [1, 0, 0, 0], split=["id", "id", "ood", "ood"], sample=[0, 1, 0, 1], seed=0),
        r("train_loss", "sft", [2.0, 1.0], step=[0, 1], seed=3),
    ], ignore_index=True)


def test_rows_broadcast_scalars_and_keep_lists_as_nullable_integers():
    f = probes._rows("m", "s", [1, 2], split="id", sample=[3, 4], step=7)  # integer values stored as floats
    assert list(f.columns) == ["metric", "value", "stage", "split", "sample", "step", "seed"]
    assert f["value"].tolist() == [1.0, 2.0] and f["value"].dtype == np.float64
    assert f["split"].tolist() == ["id", "id"] and f["sample"].tolist() == [3, 4] and f["step"].tolist() == [7, 7]
    assert all(str(f[c].dtype) == "Int64" for c in ("sample", "step", "seed")) and f["seed"].isna().all()


def test_the_gain_is_each_trained_items_correctness_minus_its_starts():
    gain = probes._gain(_frame(), "rl", "initial")
    # initial correct: (id,0)=1 (id,1)=0 (ood,0)=0 (ood,1)=1, read by (split, sample) whatever the order
    expected = pd.DataFrame({"split": ["ood", "id", "id", "ood", "id", "id", "ood", "ood"],
                             "sample": [1, 0, 1, 0, 1, 0, 0, 1], "seed": [0, 0, 0, 0, 1, 1, 1, 1],
                             "value": [0 - 1, 1 - 1, 1 - 0, 1 - 0, 0 - 0, 0 - 1, 0 - 0, 1 - 1]})
    assert (gain["metric"] == "rl_gain").all() and (gain["stage"] == "rl").all()
    assert gain["step"].isna().all()
    got = gain[["split", "sample", "seed", "value"]].astype({"sample": int, "seed": int})
    pd.testing.assert_frame_equal(got, expected.astype({"value": float}))
    base = probes._gain(_frame(), "base_rl", "base")
    # base_rl minus base: (id,0) 1-0, (id,1) 0-1, (ood,0) 0-1, (ood,1) 0-1
    assert base["value"].tolist() == [1.0, -1.0, -1.0, -1.0] and (base["stage"] == "base_rl").all()


def test_the_summaries_average_the_rows_each_precondition_reads():
    got = pd.concat(probes._summaries(_frame()), ignore_index=True)
    rows = [("initial_format_rate", 0.75, "initial", None, None), ("base_format_rate", 0.25, "base", None, None),
            ("initial_ood_accuracy", 0.5, "initial", "ood", None),
            # each trained arm run's in-distribution accuracy, in (stage, seed) order; format and loss rows aside
            ("trained_id_accuracy", 0.5, "base_rl", "id", 0), ("trained_id_accuracy", 1.0, "rl", "id", 0),
            ("trained_id_accuracy", 0.0, "rl", "id", 1), ("trained_id_accuracy", 1.0, "sft", "id", 3)]
    expected = pd.DataFrame(rows, columns=["metric", "value", "stage", "split", "seed"])
    pd.testing.assert_frame_equal(got[["metric", "value", "stage"]], expected[["metric", "value", "stage"]])
    assert got["split"].tolist() == [None, None, "ood", "id", "id", "id", "id"]
    assert got["seed"].tolist()[:3] == [pd.NA] * 3 and got["seed"].tolist()[3:] == [0, 0, 1, 3]
    assert got["sample"].isna().all() and got["step"].isna().all()


def test_a_run_without_the_base_or_its_start_has_no_summary_of_them():
    f = _frame()
    only_arms = f[~f["stage"].isin(["initial", "base"])]
    got = pd.concat(probes._summaries(only_arms), ignore_index=True)
    assert set(got["metric"]) == {"trained_id_accuracy"} and len(got) == 4
    no_ood = f[~((f["stage"] == "initial") & (f["split"] == "ood"))]
    metrics = [x["metric"].item() for x in probes._summaries(no_ood)]
    assert "initial_ood_accuracy" not in metrics and metrics[:2] == ["initial_format_rate", "base_format_rate"]
    assert np.isclose(probes._summaries(no_ood)[0]["value"].item(), 0.5)  # the start's two id hands
