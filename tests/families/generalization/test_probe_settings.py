"""The sft_vs_rl probe refuses settings that describe no runnable task, each with its own message, before it
touches a model (the context here is None)."""

from __future__ import annotations

import re

import pytest

from bench.families.generalization import probes

ARMS_MSG = "unknown arms {} (known: sft, rl, base_rl)"
SHAPE_MSG = "adapter must be 'lora' or 'full', ops a subset of '+-*/', n_cards and steps ≥ 1"
RUN_MSG = "reward must be one of ['binary', 'shaped'], seeds ≥ 1, curve_points ≥ 0"


@pytest.mark.parametrize("settings, message", [
    ({"arms": ["sft", "ppo"]}, ARMS_MSG.format("['ppo']")),
    ({"arms": []}, ARMS_MSG.format("[]")),
    ({"adapter": "qlora"}, SHAPE_MSG),
    ({"ops": "+^"}, SHAPE_MSG),
    ({"n_cards": 0}, SHAPE_MSG),
    ({"steps": 0}, SHAPE_MSG),
    ({"reward": "dense"}, RUN_MSG),
    ({"seeds": 0}, RUN_MSG),
    ({"curve_points": -1}, RUN_MSG),
])
def test_settings_without_a_runnable_task_are_refused(settings, message):
    with pytest.raises(probes.TaskSetupError, match=f"^{re.escape(message)}$"):
        probes.sft_vs_rl(None, **settings)
