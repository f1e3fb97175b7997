"""A host application's own Alembic project with memgov's revisions as a branch of its
history (tests/host_project/), driven as a user drives it: `alembic -c ... upgrade
heads` in a subprocess, `memgov revision` for the policies, a real writer login.

The project is copied to a temp directory per test; its two policy revisions are
made there by `memgov revision` (so the committed sample holds only the host's own
revisions). Each upgrade runs once online and once as `alembic upgrade heads --sql`
piped to psql.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.alembic_ops import version_location
from memgov_pg.cluster import find_bindir
from memgov_pg.migrate import head_revision
from tests.cli_helpers import assert_one_line_error, raises_sqlstate, run_memgov

SAMPLE = Path(__file__).resolve().parents[1] / "host_project"
RESOURCE = "memgov_pg:alembic/versions"

POLICY_1 = """\
version: "1.0.0"
description: host project, first policy
mode: enforce
defaults: {on_policy_miss: allow}
rules:
  - id: no-secrets
    priority: 10
    when: [{field: content.contains_secret, operator: eq, value: true}]
    action: deny
    reason_codes: [SECRET_DETECTED]
"""

POLICY_2 = """\
version: "2.0.0"
description: host project, second policy
mode: enforce
defaults: {on_policy_miss: allow}
rules:
  - id: no-preferences
    priority: 10
    when: [{field: category, operator: eq, value: preference}]
    action: deny
    reason_codes: [NO_PREFERENCES]
"""

FAILING = '''"""A revision that fails after the policy revisions.

Revision ID: host_0099_fails
"""

from alembic import op

revision = "host_0099_fails"
down_revision = {down!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("SELECT 1 / 0")


def downgrade() -> None:
    pass
'''


def copy_project(tmp_path: Path) -> Path:
    """The sample project in ``tmp_path``, its alembic.ini as docs/alembic.md shows it: the
    package-resource path resolves in this editable install (memgov_pg/alembic links
    to the repository's alembic/) as it does from a wheel (the test below)."""
    project = tmp_path / "host_project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    ini = project / "alembic.ini"
    text = ini.read_text(encoding="utf-8")
    assert f"version_locations = %(here)s/versions {RESOURCE}\n" in text
    assert "path_separator = space\n" in text
    return project


def alembic(project: Path, dsn: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    x = ["-x", f"dsn={dsn}"] if dsn else []
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "HOST_DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(project / "alembic.ini"), *x, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def upgrade_heads(project: Path, dsn: str, mode: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`alembic upgrade heads`, online or as `--sql | psql` (one transaction, stop at the first error)."""
    if mode == "online":
        return alembic(project, dsn, *extra, "upgrade", "heads")
    emitted = alembic(project, None, *extra, "upgrade", "heads", "--sql")
    if emitted.returncode != 0:
        return emitted
    return subprocess.run(
        [str(find_bindir() / "psql"), "--no-psqlrc", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn],
        input=emitted.stdout,
        capture_output=True,
        text=True,
        timeout=300,
    )


def make_policy_revisions(project: Path) -> list[str]:
    """Two policy revisions made by `memgov revision` in the copy; their revision ids."""
    ids = []
    for number, text in ((1, POLICY_1), (2, POLICY_2)):
        policy = project / f"policy_{number}.yaml"
        policy.write_text(text, encoding="utf-8")
        result = run_memgov(
            "revision", "--policy", str(policy), "-m", f"policy {number}", "--config", str(project / "alembic.ini")
        )
        assert result.returncode == 0, result.stderr
        path = Path(result.stdout.strip().splitlines()[-1])
        assert path.parent == project / "versions", path
        ids.append(path.name.split("_", 1)[0])
    return ids


def one(dsn: str, statement: str, params: dict[str, Any] | None = None) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(statement, params).fetchone()
    return row[0] if row else None


def versions(dsn: str, table: str = "alembic_version") -> set[str] | None:
    if one(dsn, "SELECT to_regclass(%(t)s)", {"t": f"public.{table}"}) is None:
        return None
    with psycopg.connect(dsn, autocommit=True) as conn:
        stmt = sql.SQL("SELECT version_num FROM public.{}").format(sql.Identifier(table))
        return {row[0] for row in conn.execute(stmt)}


def active_policies(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM memgov.policy_versions WHERE active ORDER BY 1")]


def memgov_objects(dsn: str) -> list[str]:
    """Anything of memgov's left in the database (roles are cluster-wide and not counted)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname = 'memgov'
               UNION ALL SELECT 'relation ' || c.oid::regclass::text FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname LIKE 'memgov%'
                   OR n.nspname = 'memgov'
               UNION ALL SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p
                 JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'memgov' OR p.proname LIKE 'memgov%'
               UNION ALL SELECT 'type ' || t.typname FROM pg_type t
                 JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'memgov'"""
        ).fetchall()
    return [row[0] for row in rows]


@pytest.fixture
def writer(empty_dsn: str, memgov_template: str) -> str:
    """The DSN of a real login in memgov_writer (the roles exist cluster-wide: the template migrated them)."""
    name = f"hp_writer_{os.getpid()}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "DO $$ BEGIN CREATE ROLE {} LOGIN IN ROLE memgov_writer; EXCEPTION WHEN duplicate_object THEN END $$"
            ).format(sql.Identifier(name))
        )
    return conninfo.make_conninfo(empty_dsn, user=name)


def remember_preference(writer_dsn: str) -> str:
    """A writer's INSERT of a preference, decided by the active policy: its status."""
    with psycopg.connect(writer_dsn, autocommit=True) as conn:
        conn.execute("SET memgov.org_id = 'acme'")
        row = conn.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " VALUES ('acme', 'preference', 'likes green tea', 'agent_extracted', 0.9) RETURNING status"
        ).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_upgrade_heads_then_downgrade_step_by_step(tmp_path, empty_dsn, writer, mode):
    project = copy_project(tmp_path)
    first, second = make_policy_revisions(project)

    ok(upgrade_heads(project, empty_dsn, mode))
    assert one(empty_dsn, "SELECT to_regnamespace('memgov') IS NOT NULL")
    assert one(empty_dsn, "SELECT to_regclass('public.notes') IS NOT NULL")
    # one head: the policy revisions continue the host's branch and depend on memgov's head
    assert versions(empty_dsn) == {second}
    assert versions(empty_dsn, "memgov_alembic_version") is None
    assert active_policies(empty_dsn) == ["2.0.0"]
    with raises_sqlstate("MG403") as denied:
        remember_preference(writer)
    assert "no-preferences" in str(denied.value) or "NO_PREFERENCES" in str(denied.value), denied.value

    ok(alembic(project, empty_dsn, "downgrade", "-1"))
    assert versions(empty_dsn) == {first}
    assert active_policies(empty_dsn) == ["1.0.0"]
    assert remember_preference(writer) == "active"  # decided by 1.0.0: allowed

    ok(alembic(project, empty_dsn, "downgrade", "memgov@base"))
    assert memgov_objects(empty_dsn) == []
    assert versions(empty_dsn) == {"host_0001_notes"}  # what depends on memgov went with it
    assert one(empty_dsn, "SELECT count(*) FROM public.notes") == 0
    assert one(empty_dsn, "SELECT rolname FROM pg_roles WHERE rolname = 'memgov_writer'") == "memgov_writer"

    ok(alembic(project, empty_dsn, "upgrade", "heads"))  # and back
    assert active_policies(empty_dsn) == ["2.0.0"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_a_failing_revision_after_a_policy_revision_rolls_everything_back(tmp_path, empty_dsn, mode):
    project = copy_project(tmp_path)
    _, second = make_policy_revisions(project)
    (project / "versions" / "host_0099_fails.py").write_text(FAILING.format(down=second), encoding="utf-8")

    result = upgrade_heads(project, empty_dsn, mode)
    assert result.returncode != 0
    assert "division by zero" in result.stderr
    assert one(empty_dsn, "SELECT to_regnamespace('memgov')") is None
    assert one(empty_dsn, "SELECT to_regclass('public.notes')") is None
    assert versions(empty_dsn) is None
    assert one(empty_dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'memgov'") == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_memgov_branch_alone_in_the_host_table(tmp_path, empty_dsn, mode):
    """`alembic upgrade memgov@head`: the host's table records memgov's revision itself."""
    project = copy_project(tmp_path)
    if mode == "online":
        ok(alembic(project, empty_dsn, "upgrade", "memgov@head"))
    else:
        emitted = ok(alembic(project, None, "upgrade", "memgov@head", "--sql"))
        psql = [str(find_bindir() / "psql"), "--no-psqlrc", "-q", "-v", "ON_ERROR_STOP=1", "-d", empty_dsn]
        ok(subprocess.run(psql, input=emitted, capture_output=True, text=True, timeout=300))
    assert versions(empty_dsn) == {head_revision()}
    assert one(empty_dsn, "SELECT to_regclass('public.notes')") is None

    status = json.loads(ok(run_memgov("status", "--dsn", empty_dsn, "--json")))
    assert (status["schema_revision"], status["version_table"]) == (head_revision(), "public.alembic_version")
    migrated = run_memgov("migrate", "--dsn", empty_dsn)
    assert migrated.returncode == 0, migrated.stderr
    assert "the host's Alembic history owns it" in migrated.stdout
    assert versions(empty_dsn, "memgov_alembic_version") is None  # never recorded twice

    ok(alembic(project, empty_dsn, "downgrade", "memgov@base"))
    assert memgov_objects(empty_dsn) == []


@pytest.mark.slow
def test_a_host_revision_written_against_an_older_memgov_records_memgovs_head_too(tmp_path, empty_dsn):
    """The sample's revision depends on 0001_initial; `upgrade heads` takes memgov on to its head,
    which nothing implies, so Alembic records it beside the host's."""
    project = copy_project(tmp_path)
    ok(alembic(project, empty_dsn, "upgrade", "heads"))
    assert versions(empty_dsn) == {"host_0002_note_memories", head_revision()}
    status = json.loads(ok(run_memgov("status", "--dsn", empty_dsn, "--json")))
    assert (status["schema_revision"], status["version_table"], status["implied_by"]) == (
        head_revision(),
        "public.alembic_version",
        [],
    )


@pytest.mark.slow
def test_memgov_migrate_and_status_in_a_host_project(tmp_path, empty_dsn):
    """memgov's revision implied by a host revision's depends_on (Alembic then records only the host's):
    the schema's comment says which revision it is."""
    project = copy_project(tmp_path)
    dependent = project / "versions" / "host_0002_note_memories.py"
    text = dependent.read_text(encoding="utf-8")
    assert 'depends_on = "0001_initial"' in text
    dependent.write_text(text.replace('depends_on = "0001_initial"', f'depends_on = "{head_revision()}"'))
    ok(alembic(project, empty_dsn, "upgrade", "heads"))
    assert versions(empty_dsn) == {"host_0002_note_memories"}

    status = json.loads(ok(run_memgov("status", "--dsn", empty_dsn, "--json")))
    assert status["schema_revision"] == head_revision()
    assert status["version_table"] == "public.alembic_version"
    assert status["implied_by"] == ["host_0002_note_memories"]
    text = ok(run_memgov("status", "--dsn", empty_dsn))
    assert "in public.alembic_version (the host's Alembic history, implied by host_0002_note_memories" in text

    migrated = run_memgov("migrate", "--dsn", empty_dsn)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.strip() == (
        f"memgov schema already at {head_revision()}, recorded in public.alembic_version: the host's "
        "Alembic history owns it (upgrade it there: alembic upgrade memgov@head)"
    )
    assert versions(empty_dsn, "memgov_alembic_version") is None
    assert json.loads(ok(run_memgov("migrate", "--dsn", empty_dsn, "--json")))["host_owned"] is True


@pytest.mark.slow
def test_a_host_table_of_another_name_needs_version_table(tmp_path, empty_dsn):
    project = copy_project(tmp_path)
    ok(alembic(project, empty_dsn, "-x", "version_table=app_versions", "upgrade", "memgov@head"))
    assert versions(empty_dsn, "app_versions") == {head_revision()}

    # not found where memgov looks by default: it refuses, and never creates what exists
    refused = run_memgov("migrate", "--dsn", empty_dsn)
    assert_one_line_error(refused, "schema memgov exists", "--version-table")
    assert "already exists" not in refused.stderr
    assert versions(empty_dsn, "memgov_alembic_version") is None
    status = json.loads(ok(run_memgov("status", "--dsn", empty_dsn, "--json")))
    assert (status["schema_revision"], status["schema_exists"]) == (None, True)

    named = ["--dsn", empty_dsn, "--version-table", "public.app_versions"]
    status = json.loads(ok(run_memgov("status", *named, "--json")))
    assert (status["schema_revision"], status["version_table"]) == (head_revision(), "public.app_versions")
    assert "owns it" in ok(run_memgov("migrate", *named))
    assert "owns it" in ok(run_memgov("migrate", "--dsn", empty_dsn, "--version-table", "app_versions"))


@pytest.mark.slow
def test_another_target_in_a_host_table_is_one_line(empty_dsn):
    """memgov migrate never moves a host table: any target but the head it is at is one error line."""
    assert run_memgov("migrate", "--dsn", empty_dsn).returncode == 0
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # as if a host had recorded memgov's branch at an older revision (memgov ships one: fake a head)
        conn.execute("ALTER TABLE public.memgov_alembic_version RENAME TO alembic_version")
        conn.execute("INSERT INTO public.alembic_version VALUES ('host_0001_notes')")
    result = run_memgov("migrate", "--dsn", empty_dsn, "--revision", "base")
    assert_one_line_error(result, "recorded in public.alembic_version", "alembic upgrade memgov@head")
    assert versions(empty_dsn) == {head_revision(), "host_0001_notes"}


@pytest.mark.slow
def test_recorded_twice_and_bad_names_are_one_line(empty_dsn):
    assert run_memgov("migrate", "--dsn", empty_dsn).returncode == 0
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES (%s)", (head_revision(),))
    assert_one_line_error(run_memgov("migrate", "--dsn", empty_dsn), "recorded twice", "public.alembic_version")
    text = ok(run_memgov("status", "--dsn", empty_dsn))
    assert "recorded twice" in text
    for bad in ("x; DROP TABLE y", "a.b.c", '"quoted"', ""):
        result = run_memgov("status", "--dsn", empty_dsn, "--version-table", bad)
        assert_one_line_error(result, "--version-table")


@pytest.mark.slow
def test_memgov_own_table_is_still_found_first(empty_dsn):
    assert run_memgov("migrate", "--dsn", empty_dsn).returncode == 0
    status = json.loads(ok(run_memgov("status", "--dsn", empty_dsn, "--json")))
    assert (status["schema_revision"], status["version_table"]) == (head_revision(), "public.memgov_alembic_version")
    assert ok(run_memgov("migrate", "--dsn", empty_dsn)).strip() == f"memgov schema already at {head_revision()}"


@pytest.mark.slow
def test_the_resource_path_resolves_from_a_wheel(tmp_path):
    """The sample alembic.ini, unchanged, finds memgov's branch when memgov-pg is installed from its wheel."""
    repo = SAMPLE.parents[1]
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(repo)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = dist.glob("memgov_pg-*.whl")
    target = tmp_path / "site"
    ok(subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                      capture_output=True, text=True))  # fmt: skip
    project = tmp_path / "host_project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    where = ok(subprocess.run([sys.executable, "-c", "import memgov_pg; print(memgov_pg.__file__)"],
                              capture_output=True, text=True, env=env, cwd=elsewhere))  # fmt: skip
    assert where.startswith(str(target)), where
    heads = ok(subprocess.run([sys.executable, "-m", "alembic", "-c", str(project / "alembic.ini"), "heads"],
                              capture_output=True, text=True, env=env, cwd=elsewhere))  # fmt: skip
    assert f"{head_revision()} (memgov)" in heads, heads
    assert "host_0002_note_memories (host) (head)" in heads, heads


def test_version_location_is_where_the_resource_path_points():
    """``memgov_pg.alembic_ops.version_location()`` (for configurations built in Python) and the
    documented ``memgov_pg:alembic/versions`` name the same directory, which holds memgov's revision."""
    from alembic.util import coerce_resource_to_filename

    location = Path(version_location())
    assert location.is_absolute()
    assert Path(coerce_resource_to_filename(RESOURCE)).resolve() == location.resolve()
    assert (location / f"{head_revision()}.py").is_file()


# -- a downgrade restores exactly the policy each scope had before the revision -----------------

#: (policy, tenant) of each policy revision, in order; the CLI deploy made before them, if any
SCENARIOS = {
    # two revisions of one version: undoing the second leaves the first's deploy in place
    "same version twice": ([(POLICY_1, None), (POLICY_1, None)], None),
    # the first revision deploys the version `memgov deploy` made active already
    "version active already": ([(POLICY_1, None), (POLICY_2, None)], POLICY_1),
    # per scope: a tenant's revisions leave the global policy, and the reverse
    "tenant twice": ([(POLICY_1, None), (POLICY_2, "acme"), (POLICY_2, "acme")], None),
}


def scopes(dsn: str) -> dict[str, str]:
    """The active version of each scope ('*' = global)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(conn.execute("SELECT org_id, version FROM memgov.policy_versions WHERE active").fetchall())


def decided(writer_dsn: str) -> str:
    """How a writer login's INSERT of an acme preference is decided: its status, or the reason it was denied
    (2.0.0 denies it, 1.0.0 stores it, and without a policy the engine fails closed)."""
    try:
        return remember_preference(writer_dsn)
    except psycopg.Error as exc:
        assert exc.sqlstate == "MG403", exc
        return json.loads(exc.diag.message_detail or "{}")["reason_codes"][0]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_downgrade_restores_the_policies_before_its_revision(tmp_path, empty_dsn, writer, scenario):
    revisions, deployed_before = SCENARIOS[scenario]
    project = copy_project(tmp_path)
    ids = []
    for number, (text, tenant) in enumerate(revisions, 1):
        policy = project / f"policy_{number}.yaml"
        policy.write_text(text, encoding="utf-8")
        args = ["--tenant", tenant] if tenant else []
        result = run_memgov("revision", "--policy", str(policy), "--config", str(project / "alembic.ini"), *args)
        assert result.returncode == 0, result.stderr
        ids.append(Path(result.stdout.strip().splitlines()[-1]).name.split("_", 1)[0])

    ok(alembic(project, empty_dsn, "upgrade", "host_0002_note_memories"))  # memgov's schema and the host's
    if deployed_before:
        path = project / "deployed_before.yaml"
        path.write_text(deployed_before, encoding="utf-8")
        result = run_memgov("deploy", str(path), env={"MEMGOV_DSN": empty_dsn})
        assert result.returncode == 0, result.stderr
    states = [(scopes(empty_dsn), decided(writer))]
    for revision in ids:  # one revision at a time, each state observed
        ok(alembic(project, empty_dsn, "upgrade", revision))
        states.append((scopes(empty_dsn), decided(writer)))
    assert states[0][0] == ({"*": "1.0.0"} if deployed_before else {})
    assert states[1][0] == {"*": "1.0.0"} and states[1][1] == "active"

    for before in reversed(states[:-1]):  # downgrade -1, and again, back to before the first
        ok(alembic(project, empty_dsn, "downgrade", "-1"))
        assert (scopes(empty_dsn), decided(writer)) == before
    assert states[0][1] == ("active" if deployed_before else "NO_ACTIVE_POLICY")
    assert versions(empty_dsn) == {"host_0002_note_memories", head_revision()}
