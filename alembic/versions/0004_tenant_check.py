"""Row security's tenant check and a statement's end, cheaper (memgov.is_tenant_id, memgov.flush_batch).

Revision ID: 0004_tenant_check
Revises: 0003_outcome_json
Create Date: 2026-12-06

Holds only what changed since the revision before it: the SQL is in the
.sql file of the same name beside it (`-- migrate:upgrade`, then
`-- migrate:downgrade`), written once and never edited after it lands.
"""

from __future__ import annotations

from memgov_pg.revision_scripts import execute_revision_sql

revision = "0004_tenant_check"
down_revision = "0003_outcome_json"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
