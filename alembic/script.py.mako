"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Self-contained: the SQL this revision runs is frozen in the .sql file of the
same name beside it, never read from the live sql/ directory.
"""

from __future__ import annotations

from memgov_pg.migrate import execute_revision_sql

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    execute_revision_sql(__file__, "upgrade")


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
