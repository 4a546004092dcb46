"""The answer schemas against the rules of endpoints that enforce strict structured outputs.

Fast: no database, no model. Hosted OpenAI-compatible APIs with ``"strict": true`` refuse a
schema in which a property is not required, an object allows additional properties, or a
length bound is set; ``strict_violations`` states those rules and these tests hold slowwave's
schemas (and the checker itself) to them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from slowwave.models.consolidation import EXAMPLE_ANSWER, ConsolidationOutput, FactAction
from slowwave.models.llm.strict_schema import strict_subset, strict_violations
from slowwave.models.merge import MergeJudgement
from slowwave.models.profile import ConversationProfile
from slowwave.models.summary import EpisodeSummary


def objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``, definitions included."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += objects(value)
    return found


def test_the_answer_schema_sent_to_strict_endpoints_breaks_no_strict_rule() -> None:
    assert strict_violations(strict_subset(ConsolidationOutput.response_schema())) == []


def test_the_summary_schema_sent_to_strict_endpoints_breaks_no_strict_rule() -> None:
    assert strict_violations(strict_subset(EpisodeSummary.response_schema())) == []


def test_the_gray_zone_and_profile_schemas_sent_to_strict_endpoints_break_no_strict_rule() -> None:
    assert strict_violations(strict_subset(MergeJudgement.response_schema(3))) == []
    assert strict_violations(strict_subset(ConversationProfile.response_schema())) == []


def test_a_judgement_is_bounded_to_the_pairs_shown() -> None:
    schema = MergeJudgement.response_schema(3)
    assert schema["properties"]["pairs"]["minItems"] == schema["properties"]["pairs"]["maxItems"]
    assert schema["properties"]["pairs"]["maxItems"] == 3
    assert schema["$defs"]["PairJudgement"]["properties"]["pair"]["enum"] == ["P1", "P2", "P3"]
    merged = schema["$defs"]["PairJudgement"]["properties"]["merged"]["anyOf"][0]
    assert merged["maxLength"] == 300  # on the string branch, where a grammar applies it


def test_the_answer_schema_sent_to_strict_endpoints_requires_every_property() -> None:
    schema = strict_subset(ConsolidationOutput.response_schema())
    found = objects(schema)
    assert len(found) == 2  # the answer and one fact
    for obj in found:
        assert sorted(obj["required"]) == sorted(obj["properties"])
        assert obj["additionalProperties"] is False


def test_a_grammar_may_leave_out_only_the_nullable_slot_and_target_and_only_last() -> None:
    schema = ConsolidationOutput.response_schema()
    fact = schema["$defs"]["ConsolidatedFact"]
    optional = [name for name in fact["properties"] if name not in fact["required"]]
    assert optional == ["slot", "existing_fact_id"]
    assert list(fact["properties"])[-2:] == optional  # written after the action, or not at all
    for name in optional:
        assert {"type": "null"} in fact["properties"][name]["anyOf"]
    assert fact["additionalProperties"] is False


def test_a_new_fact_without_a_slot_is_answered_without_nulls_and_read_back() -> None:
    answer = '{"facts":[{"fact":"Ana sails.","category":"interest","keywords":["Ana"],'
    answer += '"episodes":["E1"],"action":"new"}]}'
    (item,) = ConsolidationOutput.model_validate_json(answer).facts
    assert (item.slot, item.existing_fact_id, item.action) == (None, None, FactAction.new)
    assert '"slot":null' not in EXAMPLE_ANSWER and "existing_fact_id" not in EXAMPLE_ANSWER


def test_optional_answer_fields_are_nullable_in_the_strict_schema() -> None:
    fact = strict_subset(ConsolidationOutput.response_schema())["properties"]["facts"]["items"]
    assert {"type": "null"} in fact["properties"]["existing_fact_id"]["anyOf"]
    assert "episodes" in fact["required"] and "existing_fact_id" in fact["required"]


def test_the_strict_check_catches_an_optional_property_and_a_length_bound() -> None:
    class Loose(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str
        nickname: str | None = None

    problems = strict_violations(Loose.model_json_schema())
    assert any("not required: ['nickname']" in p for p in problems)
    bounded = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 3}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_violations(bounded) == ["$.a: keyword 'maxLength' is not supported"]
    open_object = {"type": "object", "properties": {}, "required": []}
    assert strict_violations(open_object) == ["$: additionalProperties must be false"]


def test_an_answer_that_omits_the_nullable_fields_still_parses() -> None:
    answer = ConsolidationOutput.model_validate_json(
        '{"facts": [{"action": "new", "category": "identity", '
        '"fact": "Caroline lives in Boston", "keywords": ["Boston"]}]}'
    )
    assert answer.facts[0].existing_fact_id is None and answer.facts[0].episodes == []


_ITEM = (
    '{"action": "new", "existing_fact_id": null, "category": "identity", '
    '"fact": "Priya teaches chemistry in Leeds.", "keywords": ["Priya"], "episodes": ["E1"]}'
)


def test_an_answer_cut_off_at_max_tokens_keeps_the_items_written_whole() -> None:
    from slowwave.models.llm.base import ModelAnswer
    from slowwave.tasks.calibrate import calibration_of

    cut = '{"facts": [' + _ITEM + ",\n " + _ITEM.replace("Leeds", "York") + ', {"action": "ne'
    calibration = calibration_of(ModelAnswer("c1", cut, None, 900, 1024, truncated=True))
    assert calibration.cut_off and calibration.error is None
    assert calibration.output is not None
    assert [f.fact for f in calibration.output.facts] == [
        "Priya teaches chemistry in Leeds.",
        "Priya teaches chemistry in York.",
    ]


def test_an_answer_cut_off_before_any_whole_item_fails_its_chunk_with_the_reason() -> None:
    from slowwave.models.llm.base import ModelAnswer
    from slowwave.tasks.calibrate import calibration_of

    for cut in ('{"facts": [{"action": "new", "fact": "Pri', '{"fa', ""):
        calibration = calibration_of(ModelAnswer("c1", cut, None, 900, 1024, truncated=True))
        assert calibration.output is None
        assert calibration.error == "model call failed: answer cut off at max_tokens (1024 tokens)"
    finished = calibration_of(ModelAnswer("c1", '{"facts": [' + _ITEM + "]}", None, 9, 9))
    assert finished.output is not None and not finished.cut_off
