"""A small English text shipped with bench, for probes that need ordinary prose and nothing more."""

from __future__ import annotations

from bench.corpora import source_def

ENGLISH = (
    "The river rose slowly through the night, and by morning the low fields were under water.",
    "She folded the letter twice, put it in her coat pocket, and walked to the station without looking back.",
    "Most of the library's old maps were stored in flat drawers to keep the paper from curling.",
    "When the power failed, the bakery kept its ovens going with wood from the yard behind the shop.",
    "A good experiment changes one thing at a time and writes down everything else.",
    "The committee met on Tuesday, argued for three hours, and agreed only to meet again.",
    "Children in the village learned to swim in the lake long before they learned to read.",
    "He repaired the clock with a spring taken from a broken toy, and it has kept time ever since.",
    "Rain on the tin roof made it hard to hear the radio, so they turned it off and played cards.",
    "The bridge was built in 1897, closed in 1960, and reopened to walkers and cyclists last spring.",
    "If the seeds are planted too deep, they rot before the shoots can reach the light.",
    "Our neighbour keeps bees, and every autumn she leaves a jar of honey on our doorstep.",
    "The train was late again, which gave him time to finish the crossword and start another.",
    "Scientists measured the temperature of the cave every hour for a whole year.",
    "Nobody remembered who had planted the apple tree, but everybody ate its apples.",
    "The museum closes at five, although the garden stays open until the sun goes down.",
    "Write the numbers in a column, add them carefully, and check the total twice.",
    "Across the valley, smoke from a single chimney rose straight up into the still air.",
    "The recipe calls for two eggs, a cup of flour, and a pinch of salt.",
    "After the storm, the beach was covered with shells, seaweed and pieces of old rope.",
    "Her brother sold his car and bought a boat, which surprised everyone except her.",
    "The teacher asked why the sky is blue, and the class spent the afternoon finding out.",
    "Long before the road was paved, carts carried grain from the farms to the mill by the river.",
    "They counted forty-two birds on the wire, then a truck passed and all of them flew away.",
)


def _variant(variant: str) -> str:
    if variant not in ("english", ""):
        from bench.ground.errors import SpecError

        raise SpecError(f"unknown builtin corpus '{variant}' (known: english)", key="data.corpus")
    return variant


@source_def("builtin", version=1, fingerprint=_variant)
def builtin(variant: str) -> list[str]:
    _variant(variant)
    return list(ENGLISH)
