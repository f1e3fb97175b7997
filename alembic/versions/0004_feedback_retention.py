"""Feedback and retention: confirm, reject, edit, forget, the sweep.

Revision ID: 0004_feedback_retention
Revises: 0003_enforcement
Create Date: 2026-11-29

Self-contained: the SQL this revision runs is frozen in the .sql file of the
same name beside it, never read from the live sql/ directory.
"""

from __future__ import annotations

from memgov_pg.migrate import execute_revision_sql

revision = "0004_feedback_retention"
down_revision = "0003_enforcement"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
