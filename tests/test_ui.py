"""The memory browser (``/ui``) in Debian's Chromium, as a person uses it: sign in with a key,
open a conversation, move the as-of control, read a fact's story, release a quarantined
episode, forget a conversation — and another tenant's key seeing none of it. Also: the
session cookie's flags, the form token, no key in any page or log, accessibility (axe-core),
and a page at 1280×800 and on a phone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fix_browser import CHROMIUM, browser_page, keep_screenshots
from tests.fix_processes import run_cli
from tests.fix_server import Served, make_key, quarantine_latest, start_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine"),
]

ROOT = Path(__file__).resolve().parents[1]
OURS = "conv-30"  # the default tenant's, consolidated with the replay model
THEIRS = "acme-desk"  # acme's: recorded, not consolidated
SHOTS = ROOT / "docs" / "images"
NO_FACT = "7f3c2a9e-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, locomo_path: Path, prefect_api_url: str
) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("ui")
    replay = {"SLOWWAVE_LLM_RUNTIME": "replay", "SLOWWAVE_REPLAY_DATA": str(locomo_path)}
    done = run_cli(
        home, "backfill", str(locomo_path), "-c", OURS, PREFECT_API_URL=prefect_api_url, **replay
    )
    assert done.returncode == 0, done.stderr[-2000:]
    keys = {
        "admin": make_key(home, "default", "admin"),
        "acme": make_key(home, "acme", "admin"),
        "read": make_key(home, "default", "read"),
    }
    server = start_server(home, port=None, **replay)
    server.keys = keys
    try:
        with server.client(keys["acme"]) as http:
            said = [{"role": "user", "content": "Our office moved to Porto in May."}]
            recorded = http.post(f"/v1/conversations/{THEIRS}/messages", json={"messages": said})
            assert recorded.status_code == 200, recorded.text
        yield server
    finally:
        server.stop()
        run_cli(home, "db", "stop")


def sign_in(page: Any, served: Served, key: str, target: str = "/ui") -> None:
    page.goto(f"{served.url}{target}")
    assert "/ui/login" in page.url
    page.get_by_label("Key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def serious_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']}: {v['help']}"
        for v in results.response["violations"]
        if v["impact"] in {"serious", "critical"}
    ]


def test_another_tenants_key_sees_none_of_it_and_a_forged_tenant_shows_nothing(
    served: Served,
) -> None:
    with browser_page() as page:
        sign_in(page, served, served.keys["acme"])
        listed = page.locator("tbody").inner_text()
        assert THEIRS in listed and OURS not in listed
        for target in (f"/ui/conversations/{OURS}", f"/ui/conversations/{OURS}?tenant=default"):
            page.goto(f"{served.url}{target}")
            nobody = page.content()
            page.goto(f"{served.url}/ui/conversations/nobody-at-all")
            assert page.get_by_role("heading", name="Not found").is_visible()
            assert _shape(nobody, OURS) == _shape(page.content(), "nobody-at-all"), target
        page.goto(f"{served.url}/ui?tenant=default")
        assert page.get_by_role("heading", name="Not allowed").is_visible()


def _shape(html: str, conversation: str) -> str:
    return html.replace(conversation, "X")


def test_the_session_cookie_is_httponly_and_strict_and_a_form_without_its_token_is_refused(
    served: Served,
) -> None:
    with httpx.Client(base_url=served.url) as web:
        refused = web.post("/ui/login", data={"key": "sw_" + "x" * 43, "next": "/ui"})
        assert refused.status_code == 401 and "not valid" in refused.text
        signed = web.post("/ui/login", data={"key": served.keys["read"], "next": "//evil.test"})
        assert signed.status_code == 303 and signed.headers["location"] == "/ui"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        assert served.keys["read"] not in cookie
        page = web.get("/ui")
        assert page.status_code == 200 and served.keys["read"] not in page.text
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        forged = web.post(
            "/ui/quarantine/release",
            data={
                "form_token": "forged",
                "episode": "00000000-0000-0000-0000-000000000000",
                "reason": "x",
            },
        )
        assert forged.status_code == 403 and "stale" in forged.text
        token = re.search(r'name="form_token" value="([^"]+)"', page.text)
        assert token is not None
        read_only = web.post(
            "/ui/forget",
            data={
                "form_token": token.group(1),
                "reason": "x",
                "confirm": "conv-26",
                "conversation": "conv-26",
            },
        )
        assert read_only.status_code == 403  # a read key forgets nothing
        web.post("/ui/logout", data={"form_token": token.group(1)})
        assert web.get("/ui").status_code == 303  # signed out: back to the form
    log = served.log.read_text(errors="replace")
    assert all(key not in log for key in served.keys.values())


def ui_routes() -> list[str]:
    """Every page the browser serves (GET), from the application itself."""
    from fastapi.routing import APIRoute

    from slowwave.models.settings import Settings
    from slowwave.server.app import create_app

    app = create_app(Settings(), mcp=False)
    return sorted(
        r.path
        for r in app.routes
        if isinstance(r, APIRoute) and r.path.startswith("/ui") and "GET" in r.methods
    )


def test_every_page_keeps_to_its_tenant(served: Served) -> None:
    """acme's session asks every page about the default tenant's conversation and fact, and
    about ones that do not exist: the answers are the same, and hold nothing of theirs."""
    conversation = OURS
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys['admin']}"}
    ) as api:
        fact = api.get(f"/v1/conversations/{OURS}/facts").json()[0]["id"]
        recorded = api.post(
            f"/v1/conversations/{conversation}/messages",
            json={"messages": [{"role": "user", "content": "My locker code is quokka-4417."}]},
        )
        assert recorded.status_code == 200, recorded.text
    secret = "quokka"  # not hex: a fact's id, which a page may echo, cannot contain it
    routes = ui_routes()
    assert {"/ui", "/ui/conversations/{conversation_id}", "/ui/facts/{fact_id}"} <= set(routes)
    with served.browser(served.keys["acme"]) as web:
        for route in routes:
            answers = []
            for name, fact_id in ((conversation, fact), ("nobody-at-all", NO_FACT)):
                path = route.replace("{conversation_id}", name).replace("{fact_id}", fact_id)
                path = path.replace("{run_id}", "00000000-0000-0000-0000-000000000000")
                for query in ("", f"?tenant=default&conversation={name}&query=locker"):
                    got = web.get(path + query)
                    assert secret not in got.text, (route, query)
                    shape = _shape(got.text, name).replace(fact_id, "F")
                    answers.append((got.status_code, shape))
            assert answers[0] == answers[2] and answers[1] == answers[3], route
        # and what changes memory: another tenant's conversation and episode are not reached
        token = re.search(r'name="form_token" value="([^"]+)"', web.get("/ui").text)
        assert token is not None
        held = quarantine_latest(served, OURS)
        for form in (
            {"conversation": OURS, "confirm": OURS, "reason": "x"},
            {"conversation": OURS, "confirm": OURS, "reason": "x", "tenant": "default"},
        ):
            refused = web.post("/ui/forget", data={"form_token": token.group(1), **form})
            assert refused.status_code in (403, 404), refused.text
        released = web.post(
            "/ui/quarantine/release",
            data={"form_token": token.group(1), "episode": held, "reason": "x"},
        )
        assert "Released 0 episode" in released.text
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys['admin']}"}
    ) as api:
        status = api.get(f"/v1/conversations/{OURS}").json()
        assert status["facts_active"] > 0 and status["episodes_quarantined"] == 1
    with served.browser(served.keys["admin"]) as ours:  # theirs: it is released
        token = re.search(r'name="form_token" value="([^"]+)"', ours.get("/ui").text)
        assert token is not None
        released = ours.post(
            "/ui/quarantine/release",
            data={"form_token": token.group(1), "episode": held, "reason": "x"},
        )
        assert "Released 1 episode" in released.text


def test_a_bare_date_shows_in_the_browser_the_facts_rest_answers_for_it(served: Served) -> None:
    """``as_of=DAY`` is the day's first moment (UTC) in the browser as on every other surface:
    a fact that became valid later that day is not shown."""
    from markupsafe import escape

    with served.client(served.keys["admin"]) as api:
        everything = api.get(f"/v1/conversations/{OURS}/facts").json()
        latest = max(everything, key=lambda f: f["valid_at"])
        day = latest["valid_at"][:10]
        assert latest["valid_at"][11:19] != "00:00:00"  # valid later in its day
        answered = api.get(f"/v1/conversations/{OURS}/facts", params={"as_of": day}).json()
    with served.browser(served.keys["admin"]) as web:
        page = web.get(f"/ui/conversations/{OURS}", params={"as_of": day})
    assert page.status_code == 200
    shown = {f["id"] for f in everything if str(escape(f["fact"])) in page.text}
    assert latest["id"] not in {f["id"] for f in answered}
    assert shown == {f["id"] for f in answered}


HOSTILE = [
    "/ui?q=%00",
    "/ui?q=" + "x" * 5000,
    "/ui/conversations/x?as_of=yesterday",
    "/ui/conversations/x?query=" + "y" * 5000,
    "/ui/conversations/%00",
    "/ui/facts/not-a-fact",
    "/ui/runs/not-a-run/revert",
    "/ui?tenant=Robert%27);DROP%20TABLE",
]


def test_hostile_input_to_a_page_gets_a_clear_4xx_and_changes_nothing(served: Served) -> None:
    with served.browser(served.keys["admin"]) as web:
        before = web.get("/ui").text
        for path in HOSTILE:
            got = web.get(path)
            assert 400 <= got.status_code < 500, (path, got.status_code, got.text[:300])
            assert "Traceback" not in got.text
        injected = web.get("/ui?after=%27%20OR%201%3D1--")  # a cursor is a parameter
        assert injected.status_code == 200
        assert web.get("/ui").text == before


# last: it forgets the default tenant's conversation
def test_a_person_signs_in_reads_a_conversation_and_its_facts_and_takes_memory_back(
    served: Served, tmp_path: Path
) -> None:
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys['admin']}"}
    ) as api:
        facts = api.get(f"/v1/conversations/{OURS}/facts").json()
    latest = max(facts, key=lambda f: f["valid_at"])
    day = latest["valid_at"][:10]
    after = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    quarantined = quarantine_latest(served, OURS)
    shots = tmp_path / "shots"
    shots.mkdir()
    violations: dict[str, list[str]] = {}

    with browser_page(1280, 800) as page:
        sign_in(page, served, served.keys["admin"])
        assert page.get_by_role("heading", name="Conversations").is_visible()
        page.screenshot(path=shots / "ui-conversations.png")
        violations["conversations"] = serious_violations(page)

        page.get_by_role("link", name=OURS, exact=True).click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name=OURS).is_visible()
        assert page.get_by_role("link", name=latest["fact"]).first.is_visible()
        page.screenshot(path=shots / "ui-conversation.png")
        violations["conversation"] = serious_violations(page)

        # the as-of control (a day is its first moment): on the day the latest fact became
        # valid, it is not shown yet; the day after, it is
        page.get_by_label("As of", exact=True).fill(day)
        page.get_by_role("button", name="Show").click()
        page.wait_for_load_state()
        assert f"as_of={day}" in page.url
        assert page.get_by_role("link", name=latest["fact"]).count() == 0
        page.get_by_label("As of", exact=True).fill(after)
        page.get_by_role("button", name="Show").click()
        page.wait_for_load_state()
        assert page.get_by_role("link", name=latest["fact"]).first.is_visible()

        # what the agent would be given
        page.get_by_label("Search", exact=True).fill(latest["fact"])
        page.get_by_role("button", name="Search").click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name="Episodic memories").is_visible()
        assert "score" in page.locator(".results").first.inner_text()

        # a fact's story: versions, decisions and its source messages, the evidence marked
        page.get_by_role("link", name=latest["fact"]).first.click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name="Versions").is_visible()
        assert page.get_by_role("heading", name="Source episodes").is_visible()
        assert page.locator(".messages li").count() > 0
        assert page.locator("mark").count() >= 1
        page.screenshot(path=shots / "ui-fact.png")
        violations["fact"] = serious_violations(page)

        # quarantine: release the held episode
        page.get_by_role("link", name="Quarantine").first.click()
        page.wait_for_load_state()
        assert "invalid JSON three times" in page.content()
        page.screenshot(path=shots / "ui-quarantine.png")
        violations["quarantine"] = serious_violations(page)
        page.locator(f"input[value='{quarantined}']").check()
        page.get_by_label("Why release them").fill("the model was fixed")
        page.get_by_role("button", name="Release the ones ticked").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").inner_text().startswith("Released 1 episode")
        assert "No episode is held back." in page.content()

        page.get_by_role("link", name="Runs").click()
        page.wait_for_load_state()
        assert page.locator("tbody tr").count() >= 1
        page.screenshot(path=shots / "ui-runs.png")
        violations["runs"] = serious_violations(page)

        # forget: the confirmation names what goes; the proof after
        page.goto(f"{served.url}/ui/conversations/{OURS}")
        page.get_by_role("link", name="Forget this conversation…").click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name=f"Forget the conversation “{OURS}”").is_visible()
        page.get_by_label("Reason").fill("erasure request #12")
        page.get_by_label("to confirm").fill("not it")
        page.get_by_role("button", name="Forget it").click()
        page.wait_for_load_state()
        assert "nothing was forgotten" in page.content()
        page.get_by_label("Reason").fill("erasure request #12")
        page.get_by_label("to confirm").fill(OURS)
        page.get_by_role("button", name="Forget it").click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name="Forgotten").is_visible()
        proof = page.locator("tbody").inner_text()
        assert re.search(r"episodes\s+[1-9]", proof) and re.search(r"facts\s+[1-9]", proof), proof
        page.screenshot(path=shots / "ui-forgotten.png")
        page.goto(f"{served.url}/ui/conversations/{OURS}")
        assert page.get_by_role("heading", name="Not found").is_visible() or "forgotten" in (
            page.content()
        )
        page.goto(f"{served.url}/ui")
        assert page.get_by_role("link", name=OURS, exact=True).count() == 0

    with browser_page(390, 844) as phone:  # a phone: one column, nothing cut off
        sign_in(phone, served, served.keys["acme"])
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        phone.screenshot(path=shots / "ui-phone.png")

    assert all(v == [] for v in violations.values()), violations
    keep_screenshots(shots, SHOTS)


def test_an_admin_reverts_a_run_after_reading_what_it_would_undo(served: Served) -> None:
    with browser_page(1280, 800) as page:
        sign_in(page, served, served.keys["admin"], "/ui/runs")
        page.get_by_role("link", name="Revert…").first.click()
        page.wait_for_load_state()
        assert "This undoes everything the run applied" in page.content()
        assert page.get_by_text("facts it made are removed").is_visible()
        page.get_by_label("Why").fill("a prompt bug")
        page.get_by_role("button", name="Revert this run").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").inner_text().startswith("Reverted 1 run(s)")
    with browser_page() as page:  # a tenant's admin key sees no runs at all
        sign_in(page, served, served.keys["acme"], "/ui/runs")
        assert page.get_by_role("heading", name="Not allowed").is_visible()
