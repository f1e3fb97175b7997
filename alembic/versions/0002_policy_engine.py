"""Detectors, risk scoring, the policy compiler's runtime and deployment.

Revision ID: 0002_policy_engine
Revises: 0001_foundation
Create Date: 2026-11-29

Self-contained: the SQL this revision runs is frozen in the .sql file of the
same name beside it, never read from the live sql/ directory.
"""

from __future__ import annotations

from memgov_pg.migrate import execute_revision_sql

revision = "0002_policy_engine"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
