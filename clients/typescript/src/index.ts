/**
 * slowwave's TypeScript client: the memory a `slowwave serve` holds, over HTTP, with the method
 * names of the Python client (`record`, `search`, `context`, `facts`, `history`, `profile`,
 * `status`, `forget`, `consolidateNow`, `runState`) and the server's schemas as its types
 * (`schema.d.ts`, generated from the server's OpenAPI document).
 *
 *     import { Client } from "slowwave-client";
 *
 *     const memory = new Client({ apiKey: process.env.SLOWWAVE_API_KEY });
 *     await memory.record("dana", [{ role: "user", content: "I moved to Manchester." }]);
 *     const answer = await memory.search("where does Dana live?", "dana");
 *
 * No runtime dependency beyond `fetch` (Node 18+, Deno, Bun, browsers). An answer that is not
 * a success throws the `SlowwaveError` subclass of its code; 429 and 503 are retried after the
 * server's `Retry-After`, `maxRetries` times.
 */

import type { components } from "./schema.js";
import { BY_CODE, BY_STATUS, InvalidRequest, ServerUnreachable, SlowwaveError } from "./errors.js";

export * from "./errors.js";

type Schemas = components["schemas"];
export type Recorded = Schemas["Recorded"];
export type SearchAnswer = Schemas["SearchAnswer"];
export type ContextAnswer = Schemas["ContextAnswer"];
export type FactVersion = Schemas["FactVersion"];
export type Status = Schemas["Status"];
export type Forgotten = Schemas["Forgotten"];
export type RunStarted = Schemas["RunStarted"];
export type RunState = Schemas["RunState"];
export type Category = Schemas["Category"];
export type EpisodicHit = Schemas["EpisodicHit"];
export type Hit = Schemas["Hit"];
export type ErrorBody = Schemas["ErrorBody"];
export type { components, paths } from "./schema.js";

/** A message as chat APIs send it, or as slowwave's transcripts hold it. */
export type Message =
  | { role: string; content: string | ReadonlyArray<{ type: string; text?: string }>; name?: string }
  | {
      speaker: string;
      text: string;
      message_id?: string;
      timestamp?: string;
      session_id?: string;
      surprise?: number;
    };

export const DEFAULT_BASE_URL = "http://127.0.0.1:8765";
const RETRIED = new Set([429, 503]);
const LONGEST_WAIT_S = 60;

/** `Retry-After` in seconds: a number of seconds, or an HTTP date. */
export function retryAfterS(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(seconds, 0);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max((at - Date.now()) / 1000, 0);
}

/** The error a server's answer says. */
export function errorOf(status: number, body: unknown, retryAfter?: number): SlowwaveError {
  const detail = (body as Partial<ErrorBody> | undefined)?.error as
    | (Record<string, unknown> & { code?: unknown; message?: unknown })
    | undefined;
  const code = typeof detail?.code === "string" ? detail.code : undefined;
  const message = typeof detail?.message === "string" ? detail.message : `the server answered ${status}`;
  const cls = (code !== undefined ? BY_CODE[code] : undefined) ?? BY_STATUS[status] ?? SlowwaveError;
  const details: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(detail ?? {})) {
    if (!["status", "code", "message"].includes(name)) details[name] = value;
  }
  return new cls(message, { status, code: code ?? "error", retryAfterS: retryAfter, details });
}

export interface ClientOptions {
  /** Else `SLOWWAVE_API_KEY` (in Node); none: a server on loopback that has no keys. */
  apiKey?: string;
  /** Else `SLOWWAVE_BASE_URL` (in Node), else http://127.0.0.1:8765 (the port in `SLOWWAVE_SERVE_PORT`). */
  baseUrl?: string;
  /** Per request, in milliseconds (60 s). */
  timeoutMs?: number;
  /** Retries of a 429 or 503 answer, and of a connection refused (2). */
  maxRetries?: number;
  /** Another fetch (a test's, a proxy's). */
  fetch?: typeof fetch;
}

export interface SearchOptions {
  k?: number;
  category?: Category;
  asOf?: Date | string;
  output?: "json" | "markdown";
  memories?: number;
  memoryTokens?: number;
  fused?: boolean;
  /** Order the best by the server's cross-encoder (default: its SLOWWAVE_SEARCH_RERANK). */
  rerank?: boolean;
}

function environment(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.[name] || undefined;
}

function localUrl(): string {
  const port = environment("SLOWWAVE_SERVE_PORT")?.trim();
  return port && /^\d+$/.test(port) ? `http://127.0.0.1:${port}` : DEFAULT_BASE_URL;
}

function when(value: Date | string | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** slowwave's memory over HTTP. */
export class Client {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.#apiKey = options.apiKey ?? environment("SLOWWAVE_API_KEY");
    this.baseUrl = (options.baseUrl ?? environment("SLOWWAVE_BASE_URL") ?? localUrl()).replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Record messages (chat-shaped or slowwave's own); idempotent: a retry adds nothing. */
  record(conversationId: string, messages: ReadonlyArray<Message>): Promise<Recorded> {
    return this.#send("POST", `${conversation(conversationId)}/messages`, {}, { messages });
  }

  /** The facts and the episodic memories that best answer `query`. */
  search(query: string, conversationId: string, options: SearchOptions = {}): Promise<SearchAnswer> {
    return this.#send("GET", `${conversation(conversationId)}/search`, {
      query,
      k: options.k,
      category: options.category,
      as_of: when(options.asOf),
      format: options.output,
      memories: options.memories,
      memory_tokens: options.memoryTokens,
      fused: options.fused || undefined,
      rerank: options.rerank,
    });
  }

  /** Guidelines and the top identity and preference facts, within a token budget. */
  context(
    conversationId: string,
    options: { budgetTokens?: number; asOf?: Date | string; memories?: number } = {},
  ): Promise<ContextAnswer> {
    return this.#send("GET", `${conversation(conversationId)}/context`, {
      budget_tokens: options.budgetTokens,
      as_of: when(options.asOf),
      memories: options.memories || undefined,
    });
  }

  /** The active facts, those valid at `asOf` (event time), or all of them. */
  facts(conversationId: string, options: { asOf?: Date | string; everything?: boolean } = {}): Promise<FactVersion[]> {
    return this.#send("GET", `${conversation(conversationId)}/facts`, {
      as_of: when(options.asOf),
      all: options.everything || undefined,
    });
  }

  /** Every version of a fact, oldest first. */
  history(factId: string): Promise<FactVersion[]> {
    return this.#send("GET", `/v1/facts/${encodeURIComponent(factId)}/history`);
  }

  /** The model-written profile of a conversation's facts. */
  profile(conversationId: string): Promise<Record<string, unknown>> {
    return this.#send("GET", `${conversation(conversationId)}/profile`);
  }

  /** Episodes pending, consolidated and quarantined; facts; the last run. */
  status(conversationId: string): Promise<Status> {
    return this.#send("GET", conversation(conversationId));
  }

  /** Forget a conversation (admin keys): its rows deleted, a tombstone kept. */
  forget(conversationId: string, options: { reason: string; purge?: boolean }): Promise<Forgotten> {
    return this.#send("DELETE", conversation(conversationId), { reason: options.reason, purge: options.purge });
  }

  /** Consolidate the conversation's pending episodes now (write keys): the run's id. */
  consolidateNow(conversationId: string): Promise<RunStarted> {
    return this.#send("POST", `${conversation(conversationId)}/consolidate`);
  }

  /** A run this tenant asked for: queued, running or how it ended. */
  runState(runId: string): Promise<RunState> {
    return this.#send("GET", `/v1/runs/${encodeURIComponent(runId)}`);
  }

  async #send<T>(
    method: string,
    path: string,
    query: Record<string, string | number | boolean | undefined> = {},
    body?: unknown,
  ): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        response = await this.#fetch(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (error) {
        const timedOut = error instanceof DOMException && error.name === "TimeoutError";
        if (!timedOut && attempt <= this.maxRetries) {
          await sleep(backoff(attempt));
          continue;
        }
        const why = timedOut ? `no answer within ${this.timeoutMs} ms` : `cannot reach it: ${String(error)}`;
        throw new ServerUnreachable(`slowwave at ${this.baseUrl}: ${why}`, {
          status: 503,
          code: "server_unreachable",
        });
      }
      if (response.ok) return (await response.json()) as T;
      const after = retryAfterS(response.headers.get("Retry-After"));
      if (RETRIED.has(response.status) && attempt <= this.maxRetries && (after ?? 0) <= LONGEST_WAIT_S) {
        await response.body?.cancel();
        await sleep(after ?? backoff(attempt));
        continue;
      }
      let answer: unknown;
      try {
        answer = await response.json();
      } catch {
        answer = undefined;
      }
      throw errorOf(response.status, answer, after);
    }
  }
}

function conversation(conversationId: string): string {
  if (!conversationId) throw new InvalidRequest("conversation_id: required", { status: 422, code: "invalid_request" });
  return `/v1/conversations/${encodeURIComponent(conversationId)}`;
}

function backoff(attempt: number): number {
  return Math.min(0.5 * 2 ** (attempt - 1), 8) * (0.75 + Math.random() / 2);
}
