"""How the LoCoMo benchmarks match an extracted fact to a gold observation: by cosine, within
a conversation, and about the same person."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchmarks.locomo_extraction import ExtractedFact, Observation, fact_quality, subject_of


class AllergyOrNot:
    """Two meanings: a sentence about an allergy, or anything else."""

    name = "allergy-or-not"
    dim = 2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array(
            [[1.0, 0.0] if "allerg" in t else [0.0, 1.0] for t in texts], dtype=np.float32
        ).reshape(len(texts), 2)

    def close(self) -> None:
        pass


def _fact(text: str, conversation: str = "conv-1") -> ExtractedFact:
    return ExtractedFact(conversation, text, frozenset({1}))


# LoCoMo files observations of both speakers in every session: they name the speakers
GOLD = [
    Observation("conv-1", 1, "Joanna is allergic to cats and dogs.", "Joanna"),
    Observation("conv-1", 1, "Nate won a video game tournament.", "Nate"),
]


def test_a_fact_that_gives_one_speakers_observation_to_the_other_matches_nothing() -> None:
    figures = fact_quality(
        [_fact("Nate is allergic to animals with fur.")], GOLD, AllergyOrNot(), 0.7, 0.8
    )
    assert figures["fact_precision"] == 0.0
    assert figures["fact_recall"] == 0.0
    assert figures["fact_precision_any_subject"] == 1.0  # the cosine alone would count it


def test_a_fact_about_its_speaker_or_about_no_speaker_matches_within_its_conversation() -> None:
    facts = [
        _fact("Joanna's allergies keep her from having pets."),
        _fact("Her allergy makes pets hard."),
        _fact("Joanna is allergic to cats.", conversation="conv-2"),
    ]
    figures = fact_quality(facts, GOLD, AllergyOrNot(), 0.7, 0.8)
    assert figures["fact_precision"] == round(2 / 3, 4)
    assert figures["fact_recall"] == 0.5


def test_the_subject_is_the_speaker_a_fact_starts_with() -> None:
    speakers = {"Joanna", "Nate"}
    assert subject_of("Nate's turtles are named after planets.", speakers) == "Nate"
    assert subject_of("  Joanna writes screenplays.", speakers) == "Joanna"
    assert subject_of("Her brother Nate plays games.", speakers) is None
    assert subject_of("Natalie paints.", speakers) is None
