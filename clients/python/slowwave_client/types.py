"""The server's schemas as pydantic models: generated from
``clients/openapi.json`` by ``scripts/generate_clients.py`` (datamodel-code-generator). Do not edit:
regenerate."""

# ruff: noqa
from __future__ import annotations
from enum import StrEnum
from pydantic import AwareDatetime, BaseModel, Field, RootModel
from uuid import UUID
from typing import Any


class Category(StrEnum):
    identity = "identity"
    preference = "preference"
    interest = "interest"
    personality = "personality"
    relationship = "relationship"
    experience = "experience"
    goal = "goal"
    guideline = "guideline"


class ContextAnswer(BaseModel):
    context: str = Field(..., title="Context")
    conversation_id: str = Field(..., title="Conversation Id")


class EpisodicHit(BaseModel):
    """
    One episode a search found: when it was said, how it ranked and its text.
    """

    conversation_id: str = Field(..., title="Conversation Id")
    end_at: AwareDatetime = Field(..., title="End At")
    excerpt: bool = Field(..., title="Excerpt")
    """
    The text is cut to the budget around the best messages.
    """
    id: UUID = Field(..., title="Id")
    messages: int = Field(..., title="Messages")
    """
    How many messages the episode holds.
    """
    pending: bool = Field(..., title="Pending")
    """
    Not consolidated yet: no fact may cite it so far.
    """
    ranks: dict[str, int | None] = Field(..., title="Ranks")
    """
    The episode's rank in each channel (fulltext: BM25 over the conversation's episodes; vector: by its window nearest the query; temporal: among the episodes begun within the time the query names, null when it names none).
    """
    retrievability: float = Field(..., title="Retrievability")
    """
    FSRS retrievability now (or as of the search's time): the probability it is recalled, from its last review.
    """
    reviews: int = Field(..., title="Reviews")
    """
    How many searches returned it before this one.
    """
    score: float = Field(..., title="Score")
    """
    How well it answers, from 0 to 1 (the best one 1): its fused rank score weighed by its retrievability, over the best one's.
    """
    start_at: AwareDatetime = Field(..., title="Start At")
    superseded: bool | None = Field(False, title="Superseded")
    """
    A later episode replaced one of the facts it taught (a later version of it had begun by the search's time): part of what it says no longer holds. Asked about now (`now`, `currently`, `still` ...), the episode that replaced it comes first where both are found.
    """
    text: str = Field(..., title="Text")
    """
    Its messages, one a line: `speaker: text`.
    """


class ErrorDetail(BaseModel):
    code: str = Field(..., title="Code")
    """
    Stable: what a program tests (`slowwave.errors`).
    """
    message: str = Field(..., title="Message")
    """
    What happened and what to do, for a person.
    """
    status: int = Field(..., title="Status")
    """
    The HTTP status, again.
    """


class FactVersion(BaseModel):
    """
    One version of a fact: what it said, when it held (event time), when slowwave learned
    it (system time) and from what.
    """

    action: str = Field(..., title="Action")
    """
    `update` when it superseded a version, else `new`.
    """
    category: Category
    conversation_id: str = Field(..., title="Conversation Id")
    created_at: AwareDatetime = Field(..., title="Created At")
    """
    System time: when it was written.
    """
    created_by_run_id: UUID | None = Field(..., title="Created By Run Id")
    """
    The run that wrote it.
    """
    fact: str = Field(..., title="Fact")
    id: UUID = Field(..., title="Id")
    invalid_at: AwareDatetime | None = Field(None, title="Invalid At")
    """
    Event time at which it stopped holding; None = active.
    """
    keywords: list[str] | None = Field(None, title="Keywords")
    source_episodic_ids: list[UUID] = Field(..., title="Source Episodic Ids")
    supersedes_id: UUID | None = Field(None, title="Supersedes Id")
    """
    The fact this one updated.
    """
    valid_at: AwareDatetime = Field(..., title="Valid At")
    """
    Event time from which the fact holds.
    """
    version: int | None = Field(None, title="Version")
    """
    1 for the first version, counting forward (in a history).
    """


class Kind(StrEnum):
    forget_conversation = "forget_conversation"
    forget_fact = "forget_fact"


class Purge(StrEnum):
    """
    done: the tables were rewritten and the write-ahead log moved on before this answer; queued: they will be, right after it (GET the conversation to see when); skipped: purge=false was asked; incomplete: see purge_note.
    """

    done = "done"
    queued = "queued"
    skipped = "skipped"
    incomplete = "incomplete"


class Forgotten(BaseModel):
    """
    What a forget removed, and whether the bytes are gone from the database's files yet.
    """

    export_files: int = Field(..., title="Export Files")
    """
    Parquet files of slowwave's exports rewritten.
    """
    export_notes: int = Field(..., title="Export Notes")
    """
    Exports that could not be reached (the log names them).
    """
    kind: Kind = Field(..., title="Kind")
    purge: Purge = Field(..., title="Purge")
    """
    done: the tables were rewritten and the write-ahead log moved on before this answer; queued: they will be, right after it (GET the conversation to see when); skipped: purge=false was asked; incomplete: see purge_note.
    """
    purge_note: str | None = Field(None, title="Purge Note")
    reject_lines: int = Field(..., title="Reject Lines")
    """
    Lines removed from the rejects reports.
    """
    rows: dict[str, int] = Field(..., title="Rows")
    """
    Rows removed, per table.
    """
    target_sha256: str = Field(..., title="Target Sha256")
    """
    The SHA-256 of what was forgotten (the tombstone).
    """


class Hit(BaseModel):
    category: Category
    fact: str = Field(..., title="Fact")
    id: UUID = Field(..., title="Id")
    invalid_at: AwareDatetime | None = Field(..., title="Invalid At")
    ranks: dict[str, int | None] = Field(..., title="Ranks")
    """
    The fact's rank in each channel.
    """
    score: float = Field(..., title="Score")
    sources: int = Field(..., title="Sources")
    valid_at: AwareDatetime = Field(..., title="Valid At")


class ConversationId(RootModel[str]):
    root: str = Field(
        ...,
        max_length=200,
        min_length=1,
        pattern="^[^\\x00-\\x1f\\x7f]*[^\\x00-\\x1f\\x7f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^\\x00-\\x1f\\x7f]*$",
        title="Conversation Id",
    )
    """
    The conversation the key's calls that name none are about (an MCP client's add_memory and search_memory; no control characters, not only whitespace).
    """


class QuarantinedEpisode(BaseModel):
    """
    A quarantined episode as ``slowwave quarantine list`` shows it.
    """

    attempts: int = Field(..., title="Attempts")
    conversation_id: str = Field(..., title="Conversation Id")
    end_at: AwareDatetime = Field(..., title="End At")
    external_key: str = Field(..., title="External Key")
    id: UUID = Field(..., title="Id")
    last_error: str | None = Field(..., title="Last Error")
    quarantined_at: AwareDatetime = Field(..., title="Quarantined At")
    start_at: AwareDatetime = Field(..., title="Start At")


class Kind1(StrEnum):
    fact = "fact"
    memory = "memory"


class Ranked(BaseModel):
    """
    A place in a fused list: a fact or an episodic memory, by its id.
    """

    id: UUID = Field(..., title="Id")
    kind: Kind1 = Field(..., title="Kind")
    score: float = Field(..., title="Score")
    """
    Reciprocal rank fusion of its rank in its own list, or the reranker's score when the search reranked.
    """


class RecordRequest(BaseModel):
    """
    Messages of one conversation, each as a line of a JSONL transcript (without
    ``conversation_id``: the path names it).
    """

    messages: list[dict[str, Any]] = Field(..., min_length=1, title="Messages")
    """
    Each with message_id, timestamp (ISO 8601 with a zone), speaker, text; optionally session_id and surprise (0 to 1). Or as chat APIs send them: role and content (a string, or text parts), with no id and no time — the id is then derived from the message and its position in the request (a retry adds nothing), the time is the server's. At most SLOWWAVE_SERVE_MAX_MESSAGES a request (413 beyond). A message that cannot be recorded is in the answer's `rejected`, with its reason; the others are recorded.
    """


class Rejected(BaseModel):
    index: int = Field(..., title="Index")
    """
    The message's place in the request, 0 for the first.
    """
    message_id: str | None = Field(..., title="Message Id")
    reason: str = Field(..., title="Reason")


class RunRow(BaseModel):
    """
    A run as the runs list shows it (``slowwave runs list``, ``GET /v1/runs``): what it
    committed, counted from its chunks while it runs.
    """

    actions_rejected: int | None = Field(0, title="Actions Rejected")
    chunks: int | None = Field(0, title="Chunks")
    chunks_failed: int | None = Field(0, title="Chunks Failed")
    completion_tokens: int | None = Field(0, title="Completion Tokens")
    conversations: int | None = Field(0, title="Conversations")
    dedupe_merges: int | None = Field(0, title="Dedupe Merges")
    episodes_consolidated: int | None = Field(0, title="Episodes Consolidated")
    episodes_quarantined: int | None = Field(0, title="Episodes Quarantined")
    episodes_skipped: int | None = Field(0, title="Episodes Skipped")
    error: str | None = Field(None, title="Error")
    facts_inserted: int | None = Field(0, title="Facts Inserted")
    facts_invalidated: int | None = Field(0, title="Facts Invalidated")
    facts_reinforced: int | None = Field(0, title="Facts Reinforced")
    facts_updated: int | None = Field(0, title="Facts Updated")
    finished_at: AwareDatetime | None = Field(None, title="Finished At")
    flow_run_id: str | None = Field(None, title="Flow Run Id")
    """
    Its Prefect flow run, if any.
    """
    host: str | None = Field(None, title="Host")
    """
    The machine whose process ran it.
    """
    id: UUID = Field(..., title="Id")
    kind: str = Field(..., title="Kind")
    pid: int | None = Field(None, title="Pid")
    prompt_tokens: int | None = Field(0, title="Prompt Tokens")
    prompt_tokens_cached: int | None = Field(0, title="Prompt Tokens Cached")
    requested_by_tenant: str | None = Field(None, title="Requested By Tenant")
    """
    The tenant whose key asked for it (consolidate now).
    """
    started_at: AwareDatetime = Field(..., title="Started At")
    status: str = Field(..., title="Status")


class StartedIn(StrEnum):
    """
    prefect: a flow run of the nightly deployment (flow_run_id); server: the server's own worker; here: this process, done before the answer.
    """

    prefect = "prefect"
    server = "server"
    here = "here"


class RunStarted(BaseModel):
    """
    A run a key asked for: its id at once (``GET /v1/runs/{id}`` follows it) and where it
    runs.
    """

    conversation_id: str = Field(..., title="Conversation Id")
    flow_run_id: str | None = Field(None, title="Flow Run Id")
    run_id: UUID = Field(..., title="Run Id")
    started_in: StartedIn = Field(..., title="Started In")
    """
    prefect: a flow run of the nightly deployment (flow_run_id); server: the server's own worker; here: this process, done before the answer.
    """


class RunState(BaseModel):
    """
    A run as the tenant that asked for it sees it: its status and what it committed.
    """

    episodes_consolidated: int | None = Field(0, title="Episodes Consolidated")
    episodes_quarantined: int | None = Field(0, title="Episodes Quarantined")
    error: str | None = Field(None, title="Error")
    facts_inserted: int | None = Field(0, title="Facts Inserted")
    facts_invalidated: int | None = Field(0, title="Facts Invalidated")
    facts_reinforced: int | None = Field(0, title="Facts Reinforced")
    facts_updated: int | None = Field(0, title="Facts Updated")
    finished_at: AwareDatetime | None = Field(..., title="Finished At")
    kind: str = Field(..., title="Kind")
    left_undone: dict[str, int] | None = Field(None, title="Left Undone")
    """
    Once the run ended: the episodes of its conversations it left undone, by reason, only those that count: `open` (still open: the conversation went on after the request), `held` (by another run), `not_due`, `over_cap`, `deferred` (behind a failed chunk), `over_budget` (the run or its tenant had spent its token budget), `conflicted` (taken over by another run), `forgotten`, `quarantined`.
    """
    note: str | None = Field(None, title="Note")
    """
    Once the run ended: one sentence on what it left undone and why ("nothing left undone" when it took everything).
    """
    run_id: UUID = Field(..., title="Run Id")
    started_at: AwareDatetime | None = Field(..., title="Started At")
    status: str = Field(..., title="Status")
    """
    queued (not started yet), running, completed, failed, …
    """


class Scope(StrEnum):
    """
    What a key may do; each scope includes the ones before it.
    """

    read = "read"
    write = "write"
    admin = "admin"


class SearchAnswer(BaseModel):
    """
    Facts and episodic memories side by side (seed 001's raw answer, in this API's names).
    """

    conversation_id: str = Field(..., title="Conversation Id")
    hits: list[Hit] = Field(..., title="Hits")
    """
    The facts, best first.
    """
    markdown: str | None = Field(None, title="Markdown")
    memories: list[EpisodicHit] | None = Field(None, title="Memories")
    """
    The episodes (pending and consolidated) whose messages answer best.
    """
    query: str = Field(..., title="Query")
    ranked: list[Ranked] | None = Field(None, title="Ranked")
    """
    When asked (fused): facts and memories in one list, best first, at most k long, each scored by its rank in its own list (by the reranker's score when the search reranked); an item that reaches no episode the items above it have not comes after every item that does.
    """


class Status(BaseModel):
    conversation_id: str = Field(..., title="Conversation Id")
    episodes_consolidated: int = Field(..., title="Episodes Consolidated")
    episodes_pending: int = Field(..., title="Episodes Pending")
    episodes_quarantined: int = Field(..., title="Episodes Quarantined")
    facts_active: int = Field(..., title="Facts Active")
    facts_invalidated: int = Field(..., title="Facts Invalidated")
    last_consolidated_at: AwareDatetime | None = Field(..., title="Last Consolidated At")
    last_message_at: AwareDatetime | None = Field(..., title="Last Message At")
    oldest_pending_at: AwareDatetime | None = Field(..., title="Oldest Pending At")
    """
    When the oldest pending episode was recorded: how long it has waited.
    """


class ApiKey(BaseModel):
    """
    A key as slowwave keeps it: never the key itself.
    """

    conversation_id: str | None = Field(None, title="Conversation Id")
    """
    The conversation a call with no conversation of its own is about.
    """
    created_at: AwareDatetime = Field(..., title="Created At")
    created_by: str = Field(..., title="Created By")
    id: UUID = Field(..., title="Id")
    last_used_at: AwareDatetime | None = Field(None, title="Last Used At")
    name: str | None = Field("", title="Name")
    prefix: str = Field(..., title="Prefix")
    """
    The key's first characters, to tell keys apart.
    """
    revoked_at: AwareDatetime | None = Field(None, title="Revoked At")
    scope: Scope
    tenant: str = Field(..., title="Tenant")


class ErrorBody(BaseModel):
    """
    Every answer that is not a success.
    """

    error: ErrorDetail


class KeyRequest(BaseModel):
    conversation_id: ConversationId | None = Field(None, title="Conversation Id")
    """
    The conversation the key's calls that name none are about (an MCP client's add_memory and search_memory; no control characters, not only whitespace).
    """
    name: str | None = Field("", max_length=200, pattern="^[^\\x00]*$", title="Name")
    """
    A label, for people.
    """
    scope: Scope


class NewKey(BaseModel):
    key: str = Field(..., title="Key")
    """
    Shown this once: only its SHA-256 is kept.
    """
    record: ApiKey


class Recorded(BaseModel):
    already_recorded: int = Field(..., title="Already Recorded")
    """
    Messages stored before (by message id): kept.
    """
    conversation_id: str = Field(..., title="Conversation Id")
    episodes_grown: int = Field(..., title="Episodes Grown")
    episodes_new: int = Field(..., title="Episodes New")
    received: int = Field(..., title="Received")
    recorded: int = Field(..., title="Recorded")
    """
    Messages stored by this request.
    """
    rejected: list[Rejected] = Field(..., title="Rejected")
