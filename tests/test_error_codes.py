"""One list of error codes: every code slowwave raises or answers is a class of
``slowwave.errors``, a code is one class's (a subclass that keeps it narrows it in process), and
what is not found is a ``NotFound`` however it is raised."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import slowwave
import slowwave.errors as errors

PACKAGES = [
    Path(slowwave.__file__).parent,
    Path(__file__).resolve().parents[1] / "clients" / "python" / "slowwave_client",
]


def codes_written(source: str) -> set[str]:
    """The codes a module's text names as such: a ``code="..."`` argument, the code of an
    ``error_body(status, "...", ...)`` answer, a class's ``code = "..."``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                    found.add(str(keyword.value.value))
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "error_body" and len(node.args) > 1:
                code = node.args[1]
                if isinstance(code, ast.Constant):
                    found.add(str(code.value))
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets)
        ):
            found.add(node.value.value)
    return found


def test_the_scan_finds_a_code_written_each_way() -> None:
    written = codes_written(
        'raise InvalidRequest("no", code="made_up")\n'
        'error_body(400, "also_made_up", "no")\n'
        'class Own(SlowwaveError):\n    code = "own_code"\n'
    )
    assert written == {"made_up", "also_made_up", "own_code"}


def test_every_code_raised_or_answered_anywhere_is_in_the_one_list() -> None:
    listed = set(errors.by_code())
    unlisted: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            for code in codes_written(path.read_text(encoding="utf-8")) - listed:
                unlisted.setdefault(code, path.name)
    assert not unlisted, f"codes in no class of slowwave.errors: {unlisted}"


def test_a_code_is_one_class_and_its_narrower_classes_are_under_it() -> None:
    table = errors.by_code()
    for cls in errors.classes():
        assert issubclass(cls, table[cls.code]), (cls.__name__, table[cls.code].__name__)
    assert len(set(table.values())) == len(table)


@pytest.mark.parametrize(
    "error", [errors.UnknownId, errors.UnknownFact, errors.UnknownKey, errors.UnknownConversation]
)
def test_whatever_is_not_found_in_process_is_caught_as_not_found(
    error: type[errors.SlowwaveError],
) -> None:
    with pytest.raises(errors.NotFound) as caught:
        raise error("no such thing")
    assert (caught.value.code, caught.value.status) == ("not_found", 404)
    # and a client answered with its code raises the class a program catches for it
    answered = errors.from_answer(404, {"error": {"code": "not_found", "message": "no"}})
    assert type(answered) is errors.NotFound


def test_a_narrower_code_is_its_own_class_under_the_one_it_narrows() -> None:
    answered = errors.from_answer(422, {"error": {"code": "invalid_k", "message": "k"}})
    assert type(answered) is errors.InvalidK and isinstance(answered, errors.InvalidRequest)
    assert errors.from_answer(413, {"error": {"code": "too_many_messages"}}).status == 413
    # a code this client does not know yet is still the class of its status
    unknown = errors.from_answer(409, {"error": {"code": "newer_than_this_client"}})
    assert type(unknown) is errors.Conflict and unknown.code == "newer_than_this_client"


def test_the_client_package_holds_a_class_per_code_and_the_server_its_own_narrower_ones() -> None:
    """What the client can be answered is a code; a class that only narrows a code in process
    (``UnknownFact`` is a ``not_found``) is raised by the server alone, and lives there."""
    from slowwave_client import errors as client

    assert set(client.classes()) == set(client.by_code().values())
    server_only = set(errors.classes()) - set(client.classes())
    assert {c.__name__ for c in server_only} == {
        "EmbeddedPostgresError",
        "UnknownConversation",
        "UnknownFact",
        "UnknownId",
        "UnknownKey",
    }
    assert all(c.__module__ == "slowwave.models.errors" for c in server_only)
    assert errors.by_code() == client.by_code()  # the list of codes is one
