"""A host revision that uses memgov: it declares memgov's revision in ``depends_on``.

``depends_on`` names the memgov revision this one needs (memgov's head when it
was written), so `alembic upgrade heads` runs memgov's branch first and
`alembic downgrade memgov@base` undoes this revision before memgov's.

Revision ID: host_0002_note_memories
Revises: host_0001_notes
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "host_0002_note_memories"
down_revision = "host_0001_notes"
branch_labels = None
depends_on = "0001_initial"


def upgrade() -> None:
    # which memgov memory a note was remembered as (no foreign key into memgov's schema)
    op.execute("ALTER TABLE public.notes ADD COLUMN memory_id uuid")
    op.execute("COMMENT ON COLUMN public.notes.memory_id IS 'memgov.long_term_memory_items.memory_id'")


def downgrade() -> None:
    op.execute("ALTER TABLE public.notes DROP COLUMN memory_id")
