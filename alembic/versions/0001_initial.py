"""The memgov schema: roles, tables, detectors, the policy engine, the write
path, review, feedback, retention and the audit log.

Revision ID: 0001_initial
Revises:
Create Date: 2026-12-01

Released: 0001_initial.sql holds the schema as first shipped, and this
revision never changes again. Every schema change since is a new revision
that holds only what changed (docs/development.md).
"""

from __future__ import annotations

from memgov_pg.migrate import BRANCH, Frozen, execute_frozen, execute_revision_sql

revision = "0001_initial"
down_revision = None
branch_labels = (BRANCH,)
depends_on = None

# the sql/ files it pinned before the release; empty since
FROZEN: Frozen = ()


def upgrade() -> None:
    execute_frozen(__file__, FROZEN)


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
