"""decide: what applying a guarded plan writes, as a pure function (no database).

apply reads what the decisions depend on (the locked target facts, each written fact's
nearest active duplicate) and hands it here; the rows to insert, the facts to end or
reinforce and the decision-log entries come back, and apply writes them set-wise.

Rules, in answer order:

- ``new`` / ``update`` write a fact, deduplicated against every fact the plan has written so
  far that is still active (new versions included) and then against the conversation's active
  facts: a duplicate (cosine at or above the threshold, or the same sentence under another
  category or other keywords: ``models.fact.said``) is reinforced with the evidence instead
  of a second row being written. The fact written first keeps its category and keywords.
- ``update`` ends its target at the event time and links the new version to it
  (``supersedes_id``); an update whose sentence restates its target (a duplicate of it) is a
  reinforcement. When the new version is a duplicate of a fact the plan wrote, that fact takes
  the lineage.
- Targets are existing facts (F-ids) or facts written by earlier actions of the same plan
  (N-ids), so a change inside one chunk keeps its history in event time: Beijing from E1 until
  E3, then Tokyo.
- ``invalidate`` ends its target; ``reinforce`` adds the evidence to it.
- With slots on, a fact written into a slot (a single-valued attribute: where a person lives)
  that an active fact holds updates that holder, whatever the model answered: ``new`` becomes
  an update of it (a reinforcement when it restates it), and an update of some other fact
  ends the holder too. A conversation keeps one active fact per slot.
- Last, a plan that contradicts itself is refused where it does: a fact it writes that is
  still active and valid since before the plan ended a duplicate of it is rejected, with the
  reason in the decision log; when it was an update's new version, the fact it was to
  succeed is left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import numpy as np

from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Vectors
from slowwave.models.fact import other_numbers, said
from slowwave.models.ids import new_id
from slowwave.models.plan import Decision, Plan, PlannedAction


@dataclass(frozen=True)
class Known:
    """An existing fact the plan acts on, as apply locked it."""

    valid_at: datetime
    vector: np.ndarray
    fact: str = ""


@dataclass
class NewFact:
    """A row of semantic memory to insert."""

    id: UUID
    category: str
    fact: str
    keywords: list[str]
    source_episodic_ids: list[UUID]
    valid_at: datetime
    invalid_at: datetime | None
    embedding: np.ndarray
    supersedes_id: UUID | None
    slot: str | None = None


@dataclass
class LogEntry:
    """A decision-log row, less what the whole chunk shares (run, conversation, chunk)."""

    proposed: str
    action: Decision
    fact_id: UUID | None
    previous_fact_id: UUID | None
    similarity: float | None
    episode_ids: list[UUID]
    event_time: datetime
    reason: str | None
    proposed_fact: str | None


@dataclass
class Writes:
    """Everything one chunk writes."""

    inserts: list[NewFact] = field(default_factory=list)
    reinforcements: list[tuple[UUID, UUID]] = field(default_factory=list)  # (fact, episode)
    endings: dict[UUID, datetime] = field(default_factory=dict)  # existing fact → event time
    log: list[LogEntry] = field(default_factory=list)

    def count(self, action: Decision) -> int:
        return sum(entry.action is action for entry in self.log)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two unit vectors (the embedders normalise)."""
    return float(np.dot(a, b))


def ended_targets(plan: Plan) -> set[UUID]:
    """Existing facts the plan updates or invalidates: never merge targets for its new facts."""
    return {
        a.target_id
        for a in plan.actions
        if a.action in (FactAction.update, FactAction.invalidate) and a.target_id is not None
    }


def writing_vectors(plan: Plan, vectors: Vectors) -> dict[int, np.ndarray]:
    """Action index → the vector of the fact it writes (``vectors`` in action order)."""
    writing = plan.writing
    if len(writing) != len(vectors):
        raise ValueError(f"{len(writing)} facts to write but {len(vectors)} vectors")
    return {i: vectors[k] for k, i in enumerate(writing)}


def decide(
    plan: Plan,
    vectors: Vectors,
    known: dict[UUID, Known],
    nearest: dict[int, tuple[UUID, float]],
    threshold: float,
    *,
    slots: dict[str, UUID] | None = None,
) -> Writes:
    """The writes of ``plan``.

    :param vectors: one row per action that writes a fact, in action order.
    :param known: the existing facts the plan targets, locked.
    :param nearest: action index → its nearest active duplicate in the conversation (at or
        above ``threshold``), among facts the plan does not end.
    :param slots: slot → the active fact holding it (locked, in ``known``), for the slots the
        plan fills; None: slots are off, and the plan's slots are ignored.
    """
    vector_of = writing_vectors(plan, vectors)
    position = {index: k for k, index in enumerate(plan.writing)}
    # every pair of the plan's own facts at once (unit vectors: the dot product is the cosine)
    similarities = vectors @ vectors.T if len(vectors) else np.zeros((0, 0), dtype=np.float32)
    return _Decider(plan, vector_of, position, similarities, known, nearest, threshold, slots).run()


@dataclass
class _Decider:
    plan: Plan
    vector_of: dict[int, np.ndarray]
    position: dict[int, int]  # action index → its row in ``similarities``
    similarities: np.ndarray  # cosine of each pair of facts the plan writes
    known: dict[UUID, Known]
    nearest: dict[int, tuple[UUID, float]]
    threshold: float
    slots: dict[str, UUID] | None
    writes: Writes = field(default_factory=Writes)
    rows: dict[UUID, NewFact] = field(default_factory=dict)
    row_of: dict[UUID, int] = field(default_factory=dict)  # new fact → the action that wrote it
    fact_of: dict[int, UUID] = field(default_factory=dict)  # action index → fact it became

    def run(self) -> Writes:
        for index, action in enumerate(self.plan.actions):
            target = self._target(action)
            if action.action is FactAction.reinforce and target is not None:
                self._reinforce(target, action.episode_ids)
                self._log(action, Decision.reinforce, target)
            elif action.action is FactAction.invalidate and target is not None:
                self._end(target, action.event_time)
                self._log(action, Decision.invalidate, target)
            elif action.writes_fact:
                self.fact_of[index] = self._write(index, action, target)
        self._refuse_contradictions()
        for rejection in self.plan.rejections:
            self.writes.log.append(
                LogEntry(
                    proposed=str(rejection.proposed),
                    action=Decision.rejected,
                    fact_id=None,
                    previous_fact_id=rejection.target_id,
                    similarity=None,
                    episode_ids=self.plan.episode_ids,
                    event_time=self.plan.event_time,
                    reason=rejection.reason,
                    proposed_fact=rejection.fact,
                )
            )
        self.writes.inserts = list(self.rows.values())
        return self.writes

    # ── the facts acted on ──────────────────────────────────────────────────────────────

    def _target(self, action: PlannedAction) -> UUID | None:
        if action.target_ref is not None:
            return self.fact_of[action.target_ref]
        return action.target_id

    def _vector(self, fact_id: UUID) -> np.ndarray:
        row = self.rows.get(fact_id)
        return row.embedding if row is not None else self.known[fact_id].vector

    def _sentence(self, fact_id: UUID) -> str:
        row = self.rows.get(fact_id)
        return row.fact if row is not None else self.known[fact_id].fact

    def _valid_at(self, fact_id: UUID) -> datetime:
        row = self.rows.get(fact_id)
        return row.valid_at if row is not None else self.known[fact_id].valid_at

    def _reinforce(self, fact_id: UUID, episodes: Sequence[UUID]) -> None:
        row = self.rows.get(fact_id)
        if row is not None:
            row.source_episodic_ids = list(dict.fromkeys([*row.source_episodic_ids, *episodes]))
        else:
            self.writes.reinforcements += [(fact_id, e) for e in episodes]

    def _end(self, fact_id: UUID, at: datetime) -> None:
        row = self.rows.get(fact_id)
        if row is not None:
            if row.invalid_at is None:
                row.invalid_at = max(at, row.valid_at)
        else:
            self.writes.endings.setdefault(fact_id, at)

    # ── new and update ──────────────────────────────────────────────────────────────────

    def _write(self, index: int, action: PlannedAction, target: UUID | None) -> UUID:
        vector = self.vector_of[index]
        previous = target if action.action is FactAction.update else None
        slot = action.slot if self.slots is not None else None
        reason = None
        holder = self._holder(slot, previous) if slot else None
        if holder is not None and previous is None:
            previous = holder
            reason = f"slot {slot} is held: {action.action.value} taken as an update of it"
        elif holder is not None:
            self._end(holder, action.event_time)
            self._log(
                action,
                Decision.invalidate,
                holder,
                reason=f"slot {slot} holds one value: ended by the update that fills it",
            )
        if previous is not None:
            similarity = cosine(vector, self._vector(previous))
            restates = not other_numbers(action.fact or "", self._sentence(previous))
            if similarity >= self.threshold and restates:  # the new sentence says what it says
                self._reinforce(previous, action.episode_ids)
                self._log(
                    action,
                    Decision.reinforce,
                    previous,
                    similarity=similarity,
                    reason="; ".join(
                        r
                        for r in (
                            reason,
                            action.reason if action.gray_zone is not None else None,
                            "update restates the fact it names: reinforced",
                        )
                        if r
                    ),
                )
                return previous
            self._end(previous, action.event_time)

        duplicate = self._duplicate(index)
        if duplicate is not None:
            fact_id, similarity = duplicate
            self._reinforce(fact_id, action.episode_ids)
            row = self.rows.get(fact_id)
            if previous is not None and row is not None and row.supersedes_id is None:
                row.supersedes_id = previous  # the plan's own fact takes the lineage
            decision = Decision.update if previous is not None else Decision.merge
            self._log(
                action, decision, fact_id, previous=previous, similarity=similarity, reason=reason
            )
            return fact_id

        valid_at = action.event_time
        if previous is not None:
            valid_at = max(valid_at, self._valid_at(previous))
        row = NewFact(
            id=new_id(),
            category=str(action.category),
            fact=action.fact or "",
            keywords=list(action.keywords),
            source_episodic_ids=list(action.episode_ids),
            valid_at=valid_at,
            invalid_at=None,
            embedding=vector,
            supersedes_id=previous,
            slot=slot,
        )
        self.rows[row.id] = row
        self.row_of[row.id] = index
        decision = Decision.update if previous is not None else Decision.new
        if action.gray_zone is not None:  # the known fact restated with the new one's detail
            decision = Decision.merge
        self._log(
            action, decision, row.id, previous=previous, similarity=action.gray_zone, reason=reason
        )
        return row.id

    def _holder(self, slot: str, previous: UUID | None) -> UUID | None:
        """The active fact holding ``slot`` other than ``previous``: the plan's own latest,
        else the conversation's unless the plan ended it."""
        assert self.slots is not None
        own = [r.id for r in self.rows.values() if r.slot == slot and r.invalid_at is None]
        holder = own[-1] if own else self.slots.get(slot)
        if holder is None or holder == previous or holder in self.writes.endings:
            return None
        return holder

    def _duplicate(self, index: int) -> tuple[UUID, float] | None:
        """The plan's own active fact this one duplicates, else the conversation's."""
        best: tuple[UUID, float] | None = None
        pairs = self.similarities[self.position[index]]
        sentence = said(self.plan.actions[index].fact or "")
        for row in self.rows.values():
            if row.invalid_at is not None:
                continue
            similarity = float(pairs[self.position[self.row_of[row.id]]])
            if said(row.fact) == sentence:
                similarity = 1.0  # the same sentence under another category or keywords
            if other_numbers(self.plan.actions[index].fact or "", row.fact):
                continue  # "five sessions" is no duplicate of "three sessions"
            if similarity >= self.threshold and (best is None or similarity > best[1]):
                best = (row.id, similarity)
        return best if best is not None else self.nearest.get(index)

    # ── contradictions ──────────────────────────────────────────────────────────────────

    def _refuse_contradictions(self) -> None:
        """A fact the plan leaves active while it ended a duplicate of it, valid from before
        that end, contradicts the plan itself: rejected, never written."""
        ended = [
            (k.vector, at, k.fact) for f, at in self.writes.endings.items() if (k := self.known[f])
        ]
        ended += [(r.embedding, r.invalid_at, r.fact) for r in self.rows.values() if r.invalid_at]
        refused: dict[UUID, str] = {}
        for row in self.rows.values():
            if row.invalid_at is not None:
                continue
            for vector, at, sentence in ended:
                if other_numbers(row.fact, sentence):  # "five sessions" ends "three sessions"
                    continue
                if row.valid_at <= at and cosine(row.embedding, vector) >= self.threshold:
                    refused[row.id] = (
                        f"contradicts the plan itself: it ends this fact at {at.isoformat()} "
                        f"and asserts it from {row.valid_at.isoformat()}"
                    )
                    break
        for fact_id in refused:
            self._restore_predecessor(self.rows.pop(fact_id))
        for entry in self.writes.log:
            if entry.fact_id in refused:
                entry.reason = refused[entry.fact_id]
                entry.action = Decision.rejected
                entry.fact_id = None

    def _restore_predecessor(self, refused: NewFact) -> None:
        """The fact a refused row was to succeed stays as it was: the update that ended it is
        refused with the row (one update per fact, so that was its only end)."""
        previous = refused.supersedes_id
        if previous is None:
            return
        row = self.rows.get(previous)
        if row is not None:
            row.invalid_at = None
        else:
            self.writes.endings.pop(previous, None)

    def _log(
        self,
        action: PlannedAction,
        decision: Decision,
        fact_id: UUID,
        *,
        previous: UUID | None = None,
        similarity: float | None = None,
        reason: str | None = None,
    ) -> None:
        self.writes.log.append(
            LogEntry(
                proposed=str(action.proposed),
                action=decision,
                fact_id=fact_id,
                previous_fact_id=previous,
                similarity=similarity,
                episode_ids=list(action.episode_ids),
                event_time=action.event_time,
                reason=reason or action.reason,
                proposed_fact=action.proposed_fact or action.fact,
            )
        )
