"""The Alembic history: the released revision never changes, later ones hold only
what changed, and the tool that writes their routines emits the right statements."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from memgov_pg.migrate import BRANCH
from memgov_pg.resources import alembic_dir
from memgov_pg.revision_scripts import revision_sql
from memgov_pg.revisions import BEGIN, END, Routine, changes, write_block

VERSIONS = alembic_dir() / "versions"

#: 0001_initial as released, 0002_second_release as it landed on main (databases that follow
#: main have run it): neither revision's files may ever change again
RELEASED = {
    "0001_initial.sql": "51b945103294d428e405fd1fb92804950f85aa7cac7df7a68372ee342b7b69ed",
    "0001_initial.py": "7274ed853adc62d29f0e41a1b7bac4dadd49e69c22cea16bceb9582f00a42f78",
    "0002_second_release.sql": "7f1a6b9ff6985889aff4790f3bc6117ca00647610e057198ca2c8d19d4ce3f2e",
    "0002_second_release.py": "783e24ddc1a01f2b96912369f1fdf1cd339fa80fe48e92003bcd92b6d1dcb9b4",
    "0003_outcome_json.sql": "5ac858de1419e47c5905965b8b20264ccb08320fce3132392d05eae6d71bff5d",
    "0003_outcome_json.py": "d809ae6a0eeb4ecbb394352d515beefddc714fdb92a9d5c5fac1f7114c9871ba",
}


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_a_released_revision_never_changes(name):
    assert hashlib.sha256((VERSIONS / name).read_bytes()).hexdigest() == RELEASED[name], (
        f"{name} was released: put the change in a new revision (docs/development.md)"
    )


def test_the_revisions_form_one_chain_on_memgov_s_branch():
    modules = {m.revision: m for m in map(_load, sorted(VERSIONS.glob("0*.py")))}
    chain, current = [], None
    while True:
        after = [m for m in modules.values() if m.down_revision == current]
        assert len(after) <= 1, f"two revisions follow {current}: {[m.revision for m in after]}"
        if not after:
            break
        current = after[0].revision
        chain.append(current)
    assert chain == sorted(modules) and chain[0] == "0001_initial"
    assert modules["0001_initial"].branch_labels == (BRANCH,)
    assert modules["0001_initial"].FROZEN == ()


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("0*.py"))[1:], ids=lambda p: p.stem)
def test_a_later_revision_runs_its_own_sql_with_one_generated_block_a_section(path):
    for section in ("upgrade", "downgrade"):
        body = revision_sql(path, section)
        assert body.count(BEGIN) == 1 and body.count(END) == 1
    assert "sql_files" not in path.read_text() and "execute_frozen" not in path.read_text()


def routine(name: str, **changed: object) -> Routine:
    fields: dict[str, object] = {
        "signature": f"memgov.{name}(text)",
        "kind": "FUNCTION",
        "definition": f"CREATE OR REPLACE FUNCTION memgov.{name}(p text)\n RETURNS text\nAS $$ SELECT p $$\n",
        "result": "text",
        "arguments": "p text",
        "owner": "memgov_owner",
        "grantees": ("memgov_writer",),
        "comment": "Says p.",
    }
    return Routine(**{**fields, **changed})  # type: ignore[arg-type]


def test_identical_routines_need_nothing():
    assert changes({"a": routine("a")}, {"a": routine("a")}) == ""


def test_a_new_routine_is_created_granted_and_described():
    out = changes({}, {"memgov.a(text)": routine("a")})
    assert out.startswith("SET ROLE memgov_owner;") and out.endswith("RESET ROLE;\n")
    assert "CREATE OR REPLACE FUNCTION memgov.a(p text)" in out
    assert "GRANT EXECUTE ON FUNCTION memgov.a(text) TO memgov_writer;" in out
    assert "COMMENT ON FUNCTION memgov.a(text) IS 'Says p.';" in out


def test_a_changed_body_is_replaced_and_keeps_its_grants():
    old, new = routine("a"), routine("a", definition=routine("a").definition.replace("SELECT p", "SELECT p || p"))
    out = changes({old.signature: old}, {new.signature: new})
    assert "SELECT p || p" in out and "GRANT" not in out and "COMMENT" not in out and "DROP" not in out


def test_a_changed_result_type_is_dropped_first():
    old, new = routine("a"), routine("a", result="integer")
    out = changes({old.signature: old}, {new.signature: new})
    assert out.index("DROP FUNCTION memgov.a(text);") < out.index("CREATE OR REPLACE")
    assert "GRANT EXECUTE ON FUNCTION memgov.a(text) TO memgov_writer;" in out


def test_grants_and_comments_move_by_difference():
    old = routine("a", grantees=("memgov_writer", "PUBLIC"))
    new = routine("a", grantees=("memgov_reviewer",), comment="Says p twice.")
    out = changes({old.signature: old}, {new.signature: new})
    assert "REVOKE EXECUTE ON FUNCTION memgov.a(text) FROM PUBLIC, memgov_writer;" in out
    assert "GRANT EXECUTE ON FUNCTION memgov.a(text) TO memgov_reviewer;" in out
    assert "COMMENT ON FUNCTION memgov.a(text) IS 'Says p twice.';" in out
    assert "CREATE" not in out


def test_a_removed_routine_is_dropped():
    assert "DROP FUNCTION memgov.a(text);" in changes({"memgov.a(text)": routine("a")}, {})


def test_a_routine_memgov_owner_cannot_own_is_handled_by_the_migrating_superuser():
    """memgov_owner is no member of memgov_settings_reader: it could neither hand it a routine,
    nor replace, grant or drop one of its routines."""
    reader = routine("a", owner="memgov_settings_reader", grantees=("memgov_admin",))
    out = changes({}, {reader.signature: reader})
    step = out.split("\n\n")[1]
    assert step.startswith("RESET ROLE;\nCREATE OR REPLACE FUNCTION memgov.a(p text)"), out
    assert step.endswith("SET ROLE memgov_owner;"), out
    for statement in ("ALTER FUNCTION memgov.a(text) OWNER TO memgov_settings_reader;",
                      "REVOKE ALL ON FUNCTION memgov.a(text) FROM PUBLIC;",
                      "GRANT EXECUTE ON FUNCTION memgov.a(text) TO memgov_admin;"):  # fmt: skip
        assert statement in step, out
    assert out.endswith("RESET ROLE;\n")
    dropped = changes({reader.signature: reader}, {})
    assert "RESET ROLE;\nDROP FUNCTION memgov.a(text);\nSET ROLE memgov_owner;" in dropped
    policy = routine("b", owner="memgov_policy")  # memgov_owner is a member of memgov_policy
    assert "RESET ROLE;\nCREATE" not in changes({}, {policy.signature: policy})


def test_write_block_replaces_only_its_section():
    text = f"-- migrate:upgrade\nALTER TABLE t;\n{BEGIN}\nold\n{END}\n-- migrate:downgrade\n{BEGIN}\n{END}\n"
    out = write_block(text, "upgrade", "new\n")
    assert out == f"-- migrate:upgrade\nALTER TABLE t;\n{BEGIN}\nnew\n{END}\n-- migrate:downgrade\n{BEGIN}\n{END}\n"
    assert write_block(out, "downgrade", "down\n").endswith(f"{BEGIN}\ndown\n{END}\n")
    with pytest.raises(ValueError, match="exactly one generated block"):
        write_block("-- migrate:upgrade\n-- migrate:downgrade\n", "upgrade", "x")


def test_the_live_schema_names_the_head_revision_in_its_comment():
    """memgov_pg.migrate.locate reads schema memgov's comment where a host implies memgov's revision."""
    from memgov_pg.migrate import head_revision, schema_revision
    from memgov_pg.resources import sql_dir

    roles = (sql_dir() / "000_roles.sql").read_text(encoding="utf-8")
    comment = roles.split("COMMENT ON SCHEMA memgov IS '", 1)[1].split("';", 1)[0]
    assert schema_revision(comment) == head_revision()
    assert schema_revision("memgov-pg: governed long-term memory of AI agents") == "0001_initial"
    assert schema_revision(None) is None
