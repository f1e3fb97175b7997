"""``memgov test``: run a policy's unit tests inside PostgreSQL (docs/policy-tests.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ExitCode, MemgovError
from .base import ADMIN, cli, dsn_option, json_option, needs_role, to_json
from .dsn import resolve_dsn


@cli.command(name="test")
@needs_role(ADMIN)
@click.argument("policy", type=click.Path(dir_okay=False))
@click.argument("tests", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--junit", "junit_file", metavar="FILE", type=click.Path(dir_okay=False), help="Also write a JUnit XML report."
)
@dsn_option
@json_option
def test_command(policy: str, tests: tuple[str, ...], junit_file: str | None, dsn: str | None, as_json: bool) -> None:
    """Decide the cases of TESTS (default: POLICY's <name>.test.yaml) by POLICY; exit 1 on a failure.

    POLICY is a file, or the name of a shipped policy as `memgov deploy` takes it
    (`default`, `examples/memproof`), whose tests are shipped beside it. The policy is
    compiled and installed in a transaction that is rolled back: nothing is deployed.
    Needs a superuser connection (the embedded cluster's).
    """
    from ..deploy import policy_file
    from ..policy_tests import junit, run, tests_beside

    files = list(tests) or [str(tests_beside(policy_file(policy)))]
    if not tests and not Path(files[0]).is_file():
        raise MemgovError(f"no test file: {files[0]} does not exist (name the test files after the policy)")
    outcomes = run(resolve_dsn(dsn), policy, files)
    if junit_file is not None:
        Path(junit_file).write_text(junit(outcomes, Path(policy).name), encoding="utf-8")
    failed = [o for o in outcomes if not o.passed]
    if as_json:
        click.echo(to_json({"policy": policy, "passed": len(outcomes) - len(failed), "failed": len(failed),
                            "cases": [o.as_json() for o in outcomes]}))  # fmt: skip
    else:
        for outcome in failed:
            click.echo(f"FAIL {outcome.case.file}: {outcome.case.name}")
            for line in outcome.differences:
                click.echo(f"    {line}")
        click.echo(f"{policy}: {len(outcomes) - len(failed)} passed, {len(failed)} failed")
    if failed:
        sys.exit(ExitCode.FAILED)
