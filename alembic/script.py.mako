"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Holds only what changed since the revision before it: the SQL is in the
.sql file of the same name beside it (`-- migrate:upgrade`, then
`-- migrate:downgrade`), written once and never edited after a release.
"""

from __future__ import annotations

from memgov_pg.revision_scripts import execute_revision_sql

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
