"""The initial revision pins the sql/ files by digest: current in the tree,
refused when a file changes, copied for good at the release."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from memgov_pg.migrate import (
    FrozenSqlError,
    freeze,
    frozen_files_sql,
    frozen_manifest,
    initial_revision,
    revision_sql,
)
from memgov_pg.resources import sql_dir


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_initial_revision_pins_the_sql_files_as_they_are():
    assert freeze(initial_revision(), check=True) is None, "run scripts/freeze-migration"
    assert list(_load(initial_revision()).FROZEN) == frozen_manifest()


def test_it_is_the_only_revision_and_carries_the_branch_label():
    revisions = sorted(initial_revision().parent.glob("*.py"))
    assert revisions == [initial_revision()]
    module = _load(initial_revision())
    assert module.down_revision is None and module.branch_labels == ("memgov",)


@pytest.fixture
def sql_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "sql"
    shutil.copytree(sql_dir(), copy)
    return copy


def test_a_changed_file_is_refused_by_name(sql_copy: Path):
    frozen = frozen_manifest(sql_copy)
    assert frozen_files_sql(frozen, sql_copy).startswith((sql_copy / frozen[0][0]).read_text())
    target = sql_copy / "040_enforce.sql"
    target.write_text(target.read_text() + "\n-- one more line\n")
    with pytest.raises(FrozenSqlError, match=r"sql/040_enforce\.sql has changed.*scripts/freeze-migration"):
        frozen_files_sql(frozen, sql_copy)


def test_a_new_or_missing_file_is_refused(sql_copy: Path):
    frozen = frozen_manifest(sql_copy)
    (sql_copy / "099_extra.sql").write_text("SELECT 1;\n")
    with pytest.raises(FrozenSqlError, match=r"sql/099_extra\.sql is new"):
        frozen_files_sql(frozen, sql_copy)
    (sql_copy / "099_extra.sql").unlink()
    (sql_copy / "010_schema.sql").unlink()
    with pytest.raises(FrozenSqlError, match=r"sql/010_schema\.sql is missing"):
        frozen_files_sql(frozen, sql_copy)


def test_release_copies_the_files_into_the_revision_for_good(tmp_path: Path):
    revision = tmp_path / initial_revision().name
    shutil.copy(initial_revision(), revision)
    shutil.copy(initial_revision().with_suffix(".sql"), revision.with_suffix(".sql"))
    downgrade = revision_sql(revision, "downgrade")

    freeze(revision, release=True)

    assert revision_sql(revision, "upgrade") == frozen_files_sql(frozen_manifest()).strip() + "\n"
    assert revision_sql(revision, "downgrade") == downgrade
    assert list(_load(revision).FROZEN) == []
    assert freeze(revision, check=True) is None
    with pytest.raises(FrozenSqlError, match="released already"):
        freeze(revision, release=True)
