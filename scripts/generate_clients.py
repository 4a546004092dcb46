"""The clients' types, generated from the server's OpenAPI document, and the check that they
have not drifted from it.

    python scripts/generate_clients.py          # clients/openapi.json and both clients' types
    python scripts/generate_clients.py --check  # exit 1, naming each file out of date

Four files are made, and kept in the repository so that a client builds without the server:
``clients/openapi.json`` (the document ``slowwave serve`` serves, with the default settings),
``clients/python/slowwave_client/types.py`` (pydantic models, by datamodel-code-generator),
``clients/typescript/src/schema.d.ts`` (by openapi-typescript, from ``clients/typescript``'s
own ``node_modules``; ``npm ci`` there first) and ``clients/typescript/src/errors.ts`` (a class
per error code, from ``slowwave_client.errors``). A route whose schema changed and whose types
were not regenerated fails ``--check``, which the test suite runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
DOCUMENT = CLIENTS / "openapi.json"
PYTHON_TYPES = CLIENTS / "python" / "slowwave_client" / "types.py"
TYPESCRIPT = CLIENTS / "typescript"
TYPESCRIPT_TYPES = TYPESCRIPT / "src" / "schema.d.ts"
TYPESCRIPT_ERRORS = TYPESCRIPT / "src" / "errors.ts"

PYTHON_HEADER = '''"""The server's schemas as pydantic models: generated from
``clients/openapi.json`` by ``scripts/generate_clients.py`` (datamodel-code-generator). Do not edit:
regenerate."""

# ruff: noqa
'''
TYPESCRIPT_HEADER = """/**
 * The server's paths and schemas as TypeScript types: generated from clients/openapi.json by
 * scripts/generate_clients.py (openapi-typescript). Do not edit: regenerate.
 */

"""


def document() -> str:
    """The server's OpenAPI document with the default settings, as stored (sorted, indented)."""
    from slowwave.reference import openapi_document

    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def python_types(spec: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "types.py"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "datamodel_code_generator",
                "--input",
                str(spec),
                "--input-file-type",
                "openapi",
                "--output",
                str(out),
                "--output-model-type",
                "pydantic_v2.BaseModel",
                "--target-python-version",
                "3.11",
                "--use-standard-collections",
                "--use-union-operator",
                "--use-schema-description",
                "--use-field-description",
                "--field-constraints",
                "--disable-timestamp",
                "--formatters",
                "ruff-format",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        body = out.read_text().split("\n", 3)[3]  # without its own two-line header
    # formatted as the repository's ruff formats the file where it lies
    return subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(PYTHON_TYPES), "-"],
        input=PYTHON_HEADER + body.lstrip("\n"),
        cwd=CLIENTS.parent,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def typescript_types(spec: Path) -> str:
    binary = TYPESCRIPT / "node_modules" / ".bin" / "openapi-typescript"
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: run `npm ci` in {TYPESCRIPT} first")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "schema.d.ts"
        subprocess.run(
            [str(binary), str(spec), "--output", str(out)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        return TYPESCRIPT_HEADER + out.read_text()


def typescript_errors() -> str:
    """The TypeScript client's error classes, from the one list (``slowwave_client.errors``):
    a class for each code the server answers with, under the class it narrows, and the tables
    that pick one for an answer (by its code, else by its status)."""
    from slowwave_client import errors

    codes = errors.by_code()

    def parent(cls: type[errors.SlowwaveError]) -> type[errors.SlowwaveError] | None:
        return next((b for b in cls.__mro__[1:] if issubclass(b, errors.SlowwaveError)), None)

    wanted: set[type[errors.SlowwaveError]] = set()
    for cls in codes.values():
        chain: type[errors.SlowwaveError] | None = cls
        while chain is not None and chain is not errors.SlowwaveError:
            wanted.add(chain)
            chain = parent(chain)
    depth = {c: sum(issubclass(b, errors.SlowwaveError) for b in c.__mro__) for c in wanted}
    ordered = sorted(wanted, key=lambda c: (depth[c], c.__name__))  # a parent before its own
    lines = [
        "/**",
        " * Every error the server answers with, a class per code: generated from the Python",
        " * list (slowwave_client.errors) by scripts/generate_clients.py. Do not edit: regenerate.",
        " */",
        "",
        "/** Every error the server answers with: its stable `code`, HTTP `status` and message. */",
        "export class SlowwaveError extends Error {",
        "  readonly status: number;",
        "  readonly code: string;",
        "  readonly retryAfterS: number | undefined;",
        "  readonly details: Record<string, unknown>;",
        "",
        "  constructor(",
        "    message: string,",
        "    options: { status?: number; code?: string; retryAfterS?: number; details?: "
        "Record<string, unknown> } = {},",
        "  ) {",
        "    super(message);",
        "    this.name = new.target.name;",
        "    this.status = options.status ?? 400;",
        '    this.code = options.code ?? "error";',
        "    this.retryAfterS = options.retryAfterS;",
        "    this.details = options.details ?? {};",
        "  }",
        "}",
    ]
    for cls in ordered:
        doc = " ".join((cls.__doc__ or "").split()).replace("``", "`").replace("*/", "* /")
        base = parent(cls) or errors.SlowwaveError
        lines += [
            f"/** `{cls.code}` ({cls.status}): {doc} */",
            f"export class {cls.__name__} extends {base.__name__} {{}}",
        ]
    lines += [
        "",
        "export type ErrorClass = new (",
        "  message: string,",
        "  options: ConstructorParameters<typeof SlowwaveError>[1],",
        ") => SlowwaveError;",
        "",
        "/** The class of each code the server answers with. */",
        "export const BY_CODE: Record<string, ErrorClass> = {",
        *(f"  {code}: {cls.__name__}," for code, cls in sorted(codes.items())),
        "};",
        "/** The class of an answer with no known code, by its status. */",
        "export const BY_STATUS: Record<number, ErrorClass> = {",
        *(f"  {status}: {cls.__name__}," for status, cls in sorted(errors.BY_STATUS.items())),
        "};",
        "",
    ]
    return "\n".join(lines)


def generated(spec: Path) -> dict[Path, str]:
    return {
        DOCUMENT: spec.read_text(),
        PYTHON_TYPES: python_types(spec),
        TYPESCRIPT_TYPES: typescript_types(spec),
        TYPESCRIPT_ERRORS: typescript_errors(),
    }


def stale(files: dict[Path, str]) -> list[Path]:
    """The files whose text is not what was generated."""
    return [path for path, text in files.items() if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say what is out of date")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "openapi.json"
        spec.write_text(document())
        files = generated(spec)
    out_of_date = stale(files)
    if args.check:
        for path in out_of_date:
            print(
                f"{path.relative_to(CLIENTS.parent)} is out of date with the server's OpenAPI "
                "document: run `python scripts/generate_clients.py`",
                file=sys.stderr,
            )
        return 1 if out_of_date else 0
    for path in out_of_date:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path])
        print(f"wrote {path.relative_to(CLIENTS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
