"""The second release of the schema.

Revision ID: 0002_second_release
Revises: 0001_initial
Create Date: 2026-12-03

Holds only what changed since the revision before it: the SQL is in the
.sql file of the same name beside it (`-- migrate:upgrade`, then
`-- migrate:downgrade`), written once and never edited after a release.
"""

from __future__ import annotations

from memgov_pg.revision_scripts import execute_revision_sql

revision = "0002_second_release"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
