"""The host application's own table, on its own branch ``host``.

Revision ID: host_0001_notes
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "host_0001_notes"
down_revision = None
branch_labels = ("host",)
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE public.notes (note_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE public.notes")
