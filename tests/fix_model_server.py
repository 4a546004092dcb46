"""A test double for the language model over the wire: an OpenAI-compatible endpoint on
127.0.0.1, in a thread of the test process, that slowwave reaches with
``SLOWWAVE_LLM_RUNTIME=openai`` from any process. Each chat completion answers one new fact
citing the chunk's first episode; a prompt holding one of ``garble`` gets an answer that is
not JSON (the chunk fails); with ``hold`` given, every request after the first ``hold_after``
waits on it unanswered (a model call in flight). Like llama.cpp's server it says how much of
each prompt its one slot's cache held (``timings.cache_n``: the characters shared with the
previous prompt, a token per four). With ``refuse``, its first requests are refused as a
hosted model's are when it is overloaded: 429 with ``Retry-After``."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slowwave.models.settings import Settings
from slowwave.models.summary import SUMMARY_SYSTEM_PROMPT
from tests.fix_episodes import with_settings


@dataclass
class FakeModel:
    url: str = ""
    garble: tuple[str, ...] = ()
    hold: threading.Event | None = None
    hold_after: int = 0
    held: threading.Event = field(default_factory=threading.Event)
    calls: int = 0
    previous: str = ""  # the last prompt answered: what the slot's cache holds
    refuse: int = 0  # the first requests answered 429 with Retry-After: refuse_after_s
    refuse_after_s: float = 1.0
    refused: int = 0
    in_flight: int = 0
    peak_after_refusals: int = 0  # the most answered at once once every refusal was sent
    answer_s: float = 0.0  # how long an answer takes

    def env(self, **extra: str) -> dict[str, str]:
        """The settings that point slowwave at this endpoint (no summaries, no second look, no
        change check: one call a chunk, so ``hold_after`` counts chunks)."""
        return {
            "SLOWWAVE_LLM_RUNTIME": "openai",
            "SLOWWAVE_OPENAI_BASE_URL": self.url,
            "SLOWWAVE_OPENAI_MODEL": "fake",
            "SLOWWAVE_OPENAI_SCHEMA_DIALECT": "json_object",
            "SLOWWAVE_OPENAI_STRICT_SCHEMA": "false",
            "SLOWWAVE_OPENAI_TIMEOUT_S": "600",
            "SLOWWAVE_SUMMARIZE_ON_INGEST": "false",
            "SLOWWAVE_SECOND_LOOK": "false",
            "SLOWWAVE_CHANGE_CHECK": "false",
            **extra,
        }

    def settings(self, settings: Settings, **extra: Any) -> Settings:
        """``settings`` pointing at this endpoint in this process, a chunk an episode (what
        ``env`` sets for another process)."""
        return with_settings(
            settings,
            llm_runtime="openai",
            openai_base_url=self.url,
            openai_model="fake",
            openai_schema_dialect="json_object",
            openai_strict_schema=False,
            second_look=False,
            change_check=False,
            chunk_size=1,
            **extra,
        )

    def answer(self, prompt: str) -> str:
        if any(word in prompt for word in self.garble):
            return "I cannot answer that in JSON, sorry."
        if prompt.startswith(SUMMARY_SYSTEM_PROMPT[:40]):  # an episode's summary, asked for
            digest = hashlib.sha256(prompt.encode()).hexdigest()[:12]
            return json.dumps({"summary": f"An episode of {len(prompt)} characters ({digest})."})
        after = prompt.split("### E1 |", 1)  # the chunk's first episode, its first line
        first = after[1].split("\n")[1].strip()[:120] if len(after) > 1 else ""
        fact = {
            "action": "new",
            "category": "experience",
            "fact": f'The user said: "{first or "something"}"',  # quoted: their own words
            "keywords": ["said"],
            "episodes": ["E1"],
        }
        return json.dumps({"facts": [fact]})


@contextmanager
def fake_model(
    *,
    garble: tuple[str, ...] = (),
    hold: threading.Event | None = None,
    hold_after: int = 0,
    refuse: int = 0,
    refuse_after_s: float = 1.0,
    answer_s: float = 0.0,
) -> Iterator[FakeModel]:
    model = FakeModel(
        garble=garble,
        hold=hold,
        hold_after=hold_after,
        refuse=refuse,
        refuse_after_s=refuse_after_s,
        answer_s=answer_s,
    )
    count = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with count:
                refusing = model.refused < model.refuse
                model.refused += refusing
            if refusing:
                self._refuse()
                return
            with count:
                model.in_flight += 1
                if model.refused >= model.refuse > 0:
                    model.peak_after_refusals = max(model.peak_after_refusals, model.in_flight)
            try:
                self._answer(body)
            finally:
                with count:
                    model.in_flight -= 1

        def _refuse(self) -> None:
            self.send_response(429)
            self.send_header("Retry-After", f"{model.refuse_after_s:g}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _answer(self, body: dict[str, Any]) -> None:
            time.sleep(model.answer_s)
            with count:
                model.calls += 1
                waits = model.hold is not None and model.calls > model.hold_after
            if waits and model.hold is not None:
                model.held.set()
                model.hold.wait(300)
            prompt = "\n".join(m["content"] for m in body["messages"])
            with count:
                pairs = enumerate(zip(prompt, model.previous, strict=False))
                shared = next(
                    (i for i, (a, b) in pairs if a != b), min(len(prompt), len(model.previous))
                )
                model.previous = prompt
            self._send(
                {
                    "choices": [
                        {"message": {"content": model.answer(prompt)}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 40},
                    "timings": {"cache_n": shared // 4, "prompt_n": len(prompt) // 4 - shared // 4},
                }
            )

        def _send(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client went away (an interrupted run)
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield model
    finally:
        if model.hold is not None:
            model.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
