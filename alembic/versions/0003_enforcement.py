"""The write path: enforcement trigger, remember(), approvals, quarantine.

Revision ID: 0003_enforcement
Revises: 0002_policy_engine
Create Date: 2026-11-29

Self-contained: the SQL this revision runs is frozen in the .sql file of the
same name beside it, never read from the live sql/ directory.
"""

from __future__ import annotations

from memgov_pg.migrate import execute_revision_sql

revision = "0003_enforcement"
down_revision = "0002_policy_engine"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
