"""Running the `memgov` command line as a user would, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest


def run_memgov(
    *args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`memgov ARGS...` with MEMGOV_DSN unset unless ``env`` sets it."""
    base = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "memgov_pg.cli", *args],
        capture_output=True,
        text=True,
        env=base | (env or {}),
        cwd=cwd,
        timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """A user mistake: non-zero exit, one line on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("memgov: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def assert_one_line_failure(result: subprocess.CompletedProcess[str]) -> None:
    """A refusal: non-zero exit, one line on stderr, no traceback (any wording)."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr


@contextmanager
def raises_sqlstate(code: str) -> Iterator[pytest.ExceptionInfo[psycopg.Error]]:
    """Like pytest.raises, for a database error with SQLSTATE ``code`` (memgov's MGxxx too)."""
    with pytest.raises(psycopg.Error) as info:
        yield info
    assert info.value.sqlstate == code, f"SQLSTATE {info.value.sqlstate}, not {code}: {info.value}"
