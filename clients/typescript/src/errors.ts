/**
 * Every error the server answers with, a class per code: generated from the Python
 * list (slowwave_client.errors) by scripts/generate_clients.py. Do not edit: regenerate.
 */

/** Every error the server answers with: its stable `code`, HTTP `status` and message. */
export class SlowwaveError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfterS: number | undefined;
  readonly details: Record<string, unknown>;

  constructor(
    message: string,
    options: { status?: number; code?: string; retryAfterS?: number; details?: Record<string, unknown> } = {},
  ) {
    super(message);
    this.name = new.target.name;
    this.status = options.status ?? 400;
    this.code = options.code ?? "error";
    this.retryAfterS = options.retryAfterS;
    this.details = options.details ?? {};
  }
}
/** `ambiguous_id` (409): More than one id of the kind starts with what was typed. */
export class AmbiguousId extends SlowwaveError {}
/** `busy` (503): Every database connection is in use: retry shortly. */
export class Busy extends SlowwaveError {}
/** `conflict` (409): The state does not allow it now (a run not revertible as asked, an id that names two). */
export class Conflict extends SlowwaveError {}
/** `database_unavailable` (503): Postgres cannot be reached, or it cannot serve slowwave (no pgvector). */
export class DatabaseUnavailable extends SlowwaveError {}
/** `embedding_dimension_mismatch` (409): The embedding model's dimension is not the schema's. */
export class EmbeddingDimensionMismatch extends SlowwaveError {}
/** `empty_source` (404): A folder or glob with no transcript file in it. */
export class EmptySource extends SlowwaveError {}
/** `export_refused` (422): An export target or request slowwave cannot take. */
export class ExportError extends SlowwaveError {}
/** `forbidden` (403): A valid key whose scope or tenant does not allow this. */
export class Forbidden extends SlowwaveError {}
/** `forgotten` (410): It was there and was forgotten on request: the tombstone says when. */
export class Gone extends SlowwaveError {}
/** `history_error` (409): An operation on history that cannot be done as asked (no such fact, not invalidated). */
export class HistoryError extends SlowwaveError {}
/** `internal` (500): The server failed on the request; its log holds the incident id the message names. */
export class InternalError extends SlowwaveError {}
/** `invalid_conversation_id` (422): A conversation id slowwave cannot store. */
export class InvalidConversationId extends SlowwaveError {}
/** `invalid_request` (422): A request that cannot be done as asked: a value out of range, a field missing. */
export class InvalidRequest extends SlowwaveError {}
/** `invalid_tenant` (422): A tenant name slowwave does not accept. */
export class InvalidTenant extends SlowwaveError {}
/** `malformed_answer` (502): The model's answer is not a valid `ConsolidationOutput`. */
export class MalformedAnswer extends SlowwaveError {}
/** `invalid_mapping` (422): A column mapping that cannot be applied to a source. */
export class MappingError extends SlowwaveError {}
/** `method_not_allowed` (405): A method the path does not take (the answer's `Allow` names those it does). */
export class MethodNotAllowed extends SlowwaveError {}
/** `schema_mismatch` (503): The database's schema history does not match this version of slowwave (a migration missing: `slowwave db migrate`; or one this version does not know). */
export class MigrationError extends SlowwaveError {}
/** `model_not_prepared` (503): The model is not there, or not what the catalog pins. */
export class ModelNotPrepared extends SlowwaveError {}
/** `not_found` (404): No such thing for this caller: a conversation another tenant has is not found either. */
export class NotFound extends SlowwaveError {}
/** `rate_limited` (429): A key that asked faster than its rate: retry after `retry_after_s`. */
export class RateLimited extends SlowwaveError {}
/** `model_unavailable` (503): The selected runtime cannot be used on this installation. */
export class RuntimeNotAvailable extends SlowwaveError {}
/** `model_unreachable` (503): The runtime cannot answer anything now (its engine died, its endpoint is down). Transient: the run is retried and no chunk is charged an attempt for it. */
export class RuntimeUnreachable extends SlowwaveError {}
/** `local_server_failed` (503): A local server exited or did not become healthy in time, or did not stop. */
export class ServerError extends SlowwaveError {}
/** `server_unreachable` (503): The client could not reach the server, or it gave no answer in time (after the client's retries): nothing says whether a request that was sent was done. */
export class ServerUnreachable extends SlowwaveError {}
/** `invalid_source` (422): A source that cannot be read as asked: no format to tell, or the wrong one. */
export class SourceError extends SlowwaveError {}
/** `too_large` (413): A request over a limit of the server's (messages, body bytes). */
export class TooLarge extends SlowwaveError {}
/** `unauthorized` (401): No key, or a key that is not valid (unknown, revoked). */
export class Unauthorized extends SlowwaveError {}
/** `conversation_required` (422): No conversation named, by the request, the key or `SLOWWAVE_SERVE_DEFAULT_CONVERSATION`. */
export class ConversationRequired extends InvalidRequest {}
/** `invalid_body` (400): A body the server cannot read at all. */
export class InvalidBody extends InvalidRequest {}
/** `invalid_budget` (422): A token budget (`budget_tokens`, `memory_tokens`) outside what the server answers. */
export class InvalidBudget extends InvalidRequest {}
/** `invalid_k` (422): A number of results (`k`, `memories`) outside what the server answers. */
export class InvalidK extends InvalidRequest {}
/** `invalid_limit` (422): A page size (`limit`) outside what the server answers. */
export class InvalidLimit extends InvalidRequest {}
/** `no_export_target` (422): No export named, and `SLOWWAVE_EXPORT_TO` not set where this runs. */
export class NoExportTarget extends ExportError {}
/** `no_facts` (409): The conversation has no active facts to write a profile from. */
export class NoFacts extends Conflict {}
/** `no_profile` (404): The conversation has no profile yet (runs write them with `SLOWWAVE_PROFILES=true`). */
export class NoProfile extends NotFound {}
/** `no_route` (404): No route of the server answers this path. */
export class NoRoute extends NotFound {}
/** `nothing_to_add` (422): A record with neither messages nor a text to remember. */
export class NothingToAdd extends InvalidRequest {}
/** `nul_character` (400): A path or query that holds a NUL character. */
export class NulCharacter extends InvalidRequest {}
/** `profile_not_written` (502): The model did not write the profile asked for; the stored one (if any) is kept. */
export class ProfileNotWritten extends MalformedAnswer {}
/** `reason_required` (422): A forget, a revert or a release without the reason its record keeps. */
export class ReasonRequired extends InvalidRequest {}
/** `invalid_query` (422): A query that cannot be searched: empty, not text, or longer than the server reads. */
export class SearchError extends InvalidRequest {}
/** `too_many_messages` (413): More messages in one request than `SLOWWAVE_SERVE_MAX_MESSAGES`. */
export class TooManyMessages extends TooLarge {}

export type ErrorClass = new (
  message: string,
  options: ConstructorParameters<typeof SlowwaveError>[1],
) => SlowwaveError;

/** The class of each code the server answers with. */
export const BY_CODE: Record<string, ErrorClass> = {
  ambiguous_id: AmbiguousId,
  busy: Busy,
  conflict: Conflict,
  conversation_required: ConversationRequired,
  database_unavailable: DatabaseUnavailable,
  embedding_dimension_mismatch: EmbeddingDimensionMismatch,
  empty_source: EmptySource,
  error: SlowwaveError,
  export_refused: ExportError,
  forbidden: Forbidden,
  forgotten: Gone,
  history_error: HistoryError,
  internal: InternalError,
  invalid_body: InvalidBody,
  invalid_budget: InvalidBudget,
  invalid_conversation_id: InvalidConversationId,
  invalid_k: InvalidK,
  invalid_limit: InvalidLimit,
  invalid_mapping: MappingError,
  invalid_query: SearchError,
  invalid_request: InvalidRequest,
  invalid_source: SourceError,
  invalid_tenant: InvalidTenant,
  local_server_failed: ServerError,
  malformed_answer: MalformedAnswer,
  method_not_allowed: MethodNotAllowed,
  model_not_prepared: ModelNotPrepared,
  model_unavailable: RuntimeNotAvailable,
  model_unreachable: RuntimeUnreachable,
  no_export_target: NoExportTarget,
  no_facts: NoFacts,
  no_profile: NoProfile,
  no_route: NoRoute,
  not_found: NotFound,
  nothing_to_add: NothingToAdd,
  nul_character: NulCharacter,
  profile_not_written: ProfileNotWritten,
  rate_limited: RateLimited,
  reason_required: ReasonRequired,
  schema_mismatch: MigrationError,
  server_unreachable: ServerUnreachable,
  too_large: TooLarge,
  too_many_messages: TooManyMessages,
  unauthorized: Unauthorized,
};
/** The class of an answer with no known code, by its status. */
export const BY_STATUS: Record<number, ErrorClass> = {
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  410: Gone,
  413: TooLarge,
  422: InvalidRequest,
  429: RateLimited,
  503: Busy,
};
