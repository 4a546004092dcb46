"""The gray zone (seed 004): a new fact close to a known one but not a duplicate is judged by
the model, all of a chunk's pairs in one request; a merge that passes the faithfulness gate
updates the known fact with the merged sentence, and anything else leaves the facts as the
model wrote them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg

from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.merge import MergeJudgement, PairJudgement
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.revert import revert_run
from tests.fix_episodes import active, add, at, decisions, facts, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact

HIKING = "User loves hiking in the Alps"
SUMMERS = "User goes hiking in the Alps every summer"
MERGED = "User loves hiking in the Alps and goes there every summer"
CELLO = "User plays the cello in a quartet"
_PAIR = re.compile(r"^(P\d+)\nA: (.*)\nB: (.*)$", re.M)


@dataclass
class JudgingModel:
    """The scripted model for consolidation; gray-zone pairs are judged by ``verdict`` (new
    sentence → merged sentence, or None: not the same), or answered with ``raw`` text."""

    scripted: ScriptedModel
    verdict: Callable[[str, str], str | None]
    raw: str | None = None
    name: str = "judging"
    asked: list[GenerationRequest] = field(default_factory=list)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        judged = [r for r in requests if r.purpose is Purpose.merge]
        self.asked += judged
        answers = dict(
            zip(
                [id(r) for r in requests if r.purpose is not Purpose.merge],
                self.scripted.generate([r for r in requests if r.purpose is not Purpose.merge]),
                strict=True,
            )
        )
        return [answers[id(r)] if id(r) in answers else self._judge(r) for r in requests]

    def _judge(self, request: GenerationRequest) -> ModelAnswer:
        items = []
        for pair, new, known in _PAIR.findall(request.user):
            merged = self.verdict(new, known)
            items.append(PairJudgement(pair=pair, same=merged is not None, merged=merged))
        text = self.raw if self.raw is not None else MergeJudgement(pairs=items).model_dump_json()
        return ModelAnswer(request.chunk_id, text, prompt_tokens=50, completion_tokens=10)

    def close(self) -> None:
        return None


def _says(*texts: str) -> Callable[[object], ConsolidationOutput]:
    return lambda request: ConsolidationOutput(facts=[fact(t, "interest") for t in texts])


def _two_nights(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    conversation: str,
    model: JudgingModel,
) -> RunSummary:
    first = make_episode(
        conversation, f"{conversation}-1", f"Alps ({conversation})", at(2025, 5, 1)
    )
    add(conn, first)
    consolidate(db, model, embedder, settings, kind="backfill")
    text = f"Summer in the Alps; cello on Mondays ({conversation})"
    add(conn, make_episode(conversation, f"{conversation}-2", text, at(2025, 8, 1)))
    return consolidate(db, model, embedder, settings, kind="backfill")


def _model(
    conversation: str, verdict: Callable[[str, str], str | None], raw: str | None = None
) -> JudgingModel:
    scripted = ScriptedModel(
        {f"{conversation}-1": _says(HIKING), f"{conversation}-2": _says(SUMMERS, CELLO)}
    )
    return JudgingModel(scripted, verdict, raw)


def test_a_new_fact_judged_the_same_as_a_close_known_one_updates_it_with_the_merged_sentence(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, gray_zone_merge=True)
    model = _model("gz", lambda new, known: MERGED if new == SUMMERS else None)
    second = _two_nights(db, conn, on, embedder, "gz", model)

    (request,) = model.asked  # the chunk's pairs, in one request
    assert len(_PAIR.findall(request.user)) == second.gray_zone_pairs == 2
    assert second.gray_zone_merges == 1
    rows = {f["fact"]: f for f in facts(conn, "gz")}
    assert set(active(conn, "gz")) == {MERGED, CELLO}
    assert rows[HIKING]["invalid_at"] == at(2025, 8, 1)
    assert rows[MERGED]["supersedes_id"] == rows[HIKING]["id"]
    (logged,) = [d for d in decisions(conn) if d["fact_id"] == rows[MERGED]["id"]]
    assert (logged["proposed_action"], logged["action"]) == ("new", "merge")
    assert logged["previous_fact_id"] == rows[HIKING]["id"]
    assert 0.2 <= logged["similarity"] < 0.95 and "gray-zone" in logged["reason"]
    assert second.similarity["gray_zone_merge"].count == 1  # its own metrics histogram

    revert_run(conn, second.run_id, reason="not the same after all", by="test")
    assert set(active(conn, "gz")) == {HIKING}


def test_a_merged_sentence_that_drifts_from_a_source_is_refused_by_the_faithfulness_gate(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, gray_zone_merge=True)
    model = _model("drift", lambda new, known: "User repairs vintage typewriters for a living")
    second = _two_nights(db, conn, on, embedder, "drift", model)
    assert second.gray_zone_merges == 0 and second.gray_zone_unfaithful >= 1
    assert set(active(conn, "drift")) == {HIKING, SUMMERS, CELLO}


def test_pairs_judged_different_or_an_unreadable_judgement_leave_the_facts_as_written(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, gray_zone_merge=True)
    different = _two_nights(db, conn, on, embedder, "diff", _model("diff", lambda n, k: None))
    assert different.gray_zone_pairs == 2 and different.gray_zone_merges == 0
    assert set(active(conn, "diff")) == {HIKING, SUMMERS, CELLO}
    unreadable = _model("junk", lambda n, k: MERGED, raw='{"pairs": [{"pair": "P1", "sa')
    result = _two_nights(db, conn, on, embedder, "junk", unreadable)
    assert result.gray_zone_merges == 0 and result.episodes_quarantined == 0
    assert set(active(conn, "junk")) == {HIKING, SUMMERS, CELLO}


def test_off_or_below_the_lower_bound_no_pair_is_judged(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    off = _model("off", lambda n, k: MERGED)
    assert _two_nights(db, conn, settings, embedder, "off", off).gray_zone_pairs == 0
    high = with_settings(settings, gray_zone_merge=True, gray_zone_lower=0.94)
    above = _model("high", lambda n, k: MERGED)
    assert _two_nights(db, conn, high, embedder, "high", above).gray_zone_pairs == 0
    assert off.asked == [] and above.asked == []
    assert set(active(conn, "off")) == set(active(conn, "high")) == {HIKING, SUMMERS, CELLO}


def test_a_merge_that_restates_the_known_fact_reinforces_it_and_says_it_came_from_the_gray_zone(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, gray_zone_merge=True)
    model = _model("same", lambda new, known: known if new == SUMMERS else None)
    second = _two_nights(db, conn, on, embedder, "same", model)
    assert second.gray_zone_merges == 1
    assert set(active(conn, "same")) == {HIKING, CELLO}
    (hiking,) = [f for f in facts(conn, "same") if f["fact"] == HIKING]
    assert len(hiking["source_episodic_ids"]) == 2  # the new evidence joined it
    (logged,) = [d for d in decisions(conn) if d["proposed_fact"] == SUMMERS]
    assert logged["action"] == "reinforce" and "gray-zone" in logged["reason"]


def test_a_fact_given_to_the_other_speaker_then_merged_logs_the_models_sentence_and_both_reasons(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    known = "Melanie's kids love dinosaurs."
    said = "Caroline's kids were stoked for the dinosaur exhibit."  # Melanie's words
    given = "Melanie's kids were stoked for the dinosaur exhibit."
    merged = "Melanie's kids love dinosaurs and were stoked for the dinosaur exhibit."
    add(
        conn,
        make_episode("gzs", "gzs-1", "My kids love dinosaurs.", at(2025, 3, 1), speaker="Melanie"),
    )
    scripted = ScriptedModel(
        {"gzs-1": lambda r: ConsolidationOutput(facts=[fact(known, "interest")])}
    )
    model = JudgingModel(scripted, lambda new, old: merged if new == given else None)
    on = with_settings(settings, gray_zone_merge=True, check_speaker=True, grounding="names")
    consolidate(db, model, embedder, on, kind="backfill")
    add(
        conn,
        make_episode(
            "gzs",
            "gzs-2",
            "Yesterday I took the kids to the museum. They were stoked for the dinosaur exhibit!",
            at(2025, 3, 8),
            speaker="Melanie",
        ),
        make_episode(
            "gzs", "gzs-3", "Being a mom is awesome, Melanie.", at(2025, 3, 9), speaker="Caroline"
        ),
    )
    scripted.script["gzs-2"] = lambda r: ConsolidationOutput(facts=[fact(said, "interest")])
    second = consolidate(db, model, embedder, on, kind="backfill")

    assert second.gray_zone_merges == 1
    assert set(active(conn, "gzs")) == {merged}
    (logged,) = [d for d in decisions(conn) if d["action"] == "merge"]
    assert logged["proposed_fact"] == said  # what the model said, not the given sentence
    assert "given to Melanie" in logged["reason"] and "gray-zone merge" in logged["reason"]
