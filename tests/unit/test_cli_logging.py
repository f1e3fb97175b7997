"""The command line prints its own one-line errors: what psycopg logs while a connection
closes on an error (a rollback that finds an interrupted query still running) stays out."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys
from memgov_pg.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
logging.getLogger("psycopg").warning("error ignored in rollback on <conn>: another command is already in progress")
"""


@pytest.mark.slow
def test_psycopg_warnings_do_not_reach_stderr():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert "error ignored" not in result.stderr, result.stderr
    assert result.stderr == ""


@pytest.mark.slow
def test_without_the_cli_python_would_print_them():
    """The premise: with no handler, Python's last-resort handler prints a library's warning."""
    script = 'import logging; logging.getLogger("psycopg").warning("error ignored in rollback")'
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "error ignored in rollback" in result.stderr
