/**
 * The client against a real `slowwave serve` on 127.0.0.1, which tests/test_clients.py starts
 * and stops: it passes the address in SLOWWAVE_BASE_URL and its keys in SLOWWAVE_TEST_KEYS
 * (JSON: write, other, revoked, limited).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, NotFound, RateLimited, SlowwaveError, Unauthorized } from "../src/index.js";

const baseUrl = process.env.SLOWWAVE_BASE_URL;
const keys = JSON.parse(process.env.SLOWWAVE_TEST_KEYS ?? "{}") as Record<string, string>;
const skip = baseUrl ? false : "SLOWWAVE_BASE_URL is not set: tests/test_clients.py runs these";

async function poll<T>(what: () => Promise<T>, done: (value: T) => boolean, seconds = 1): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await what();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test("a chat message recorded is found by the next search as an episodic memory", { skip }, async () => {
  const memory = new Client({ baseUrl, apiKey: keys.write });
  const said = [
    { role: "user", content: "My sister Ines just adopted a greyhound called Biscuit." },
    { role: "assistant", content: [{ type: "text", text: "Biscuit is a lovely name!" }] },
  ];
  const recorded = await memory.record("ts-desk", said);
  assert.equal(recorded.recorded, 2);
  assert.equal((await memory.record("ts-desk", said)).recorded, 0, "a retry adds nothing");
  const answer = await poll(
    () => memory.search("what dog did Ines adopt?", "ts-desk", { memories: 3 }),
    (a) => (a.memories ?? []).some((m) => m.text.includes("Biscuit")),
  );
  assert.ok((answer.memories ?? []).some((m) => m.text.includes("greyhound")), JSON.stringify(answer));
  const status = await memory.status("ts-desk");
  assert.equal(status.conversation_id, "ts-desk");
});

test("another tenant's key finds nothing of it", { skip }, async () => {
  const theirs = new Client({ baseUrl, apiKey: keys.other });
  await assert.rejects(theirs.search("what dog did Ines adopt?", "ts-desk"), (error: unknown) => {
    assert.ok(error instanceof NotFound);
    assert.equal(error.code, "not_found");
    assert.equal(error.status, 404);
    return true;
  });
});

test("a revoked key is refused with Unauthorized", { skip }, async () => {
  const revoked = new Client({ baseUrl, apiKey: keys.revoked });
  await assert.rejects(revoked.status("ts-desk"), (error: unknown) => {
    assert.ok(error instanceof Unauthorized && error instanceof SlowwaveError);
    assert.equal(error.code, "unauthorized");
    return true;
  });
});

test("a 429 with Retry-After is waited for and the request succeeds on its retry", { skip }, async () => {
  const statuses: number[] = [];
  const counting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    statuses.push(response.status);
    return response;
  };
  const impatient = new Client({ baseUrl, apiKey: keys.limited, maxRetries: 0 });
  let limited: RateLimited | undefined;
  for (let i = 0; i < 50 && limited === undefined; i++) {
    try {
      await impatient.status("ts-desk");
    } catch (error) {
      if (error instanceof RateLimited) limited = error;
      else if (!(error instanceof NotFound)) throw error;
    }
  }
  assert.ok(limited, "the key's burst was never used up");
  assert.ok((limited.retryAfterS ?? 0) >= 1, "a 429 says when to retry");
  const patient = new Client({ baseUrl, apiKey: keys.limited, maxRetries: 2, fetch: counting });
  const recorded = await patient.record("ts-limited", [{ role: "user", content: "one more" }]);
  assert.equal(recorded.received, 1);
  assert.equal(statuses[0], 429, `answers seen: ${statuses}`);
  assert.equal(statuses.at(-1), 200);
});
