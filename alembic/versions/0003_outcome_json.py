"""A decision's outcome built in one call (memgov.outcome_json).

Revision ID: 0003_outcome_json
Revises: 0002_second_release
Create Date: 2026-12-06

Holds only what changed since the revision before it: the SQL is in the
.sql file of the same name beside it (`-- migrate:upgrade`, then
`-- migrate:downgrade`), written once and never edited after it lands.
"""

from __future__ import annotations

from memgov_pg.revision_scripts import execute_revision_sql

revision = "0003_outcome_json"
down_revision = "0002_second_release"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
