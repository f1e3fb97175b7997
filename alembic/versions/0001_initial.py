"""The memgov schema: roles, tables, detectors, the policy engine, the write
path, review, feedback, retention and the audit log.

Revision ID: 0001_initial
Revises:
Create Date: 2026-12-01

Until the first release this revision runs the sql/ files themselves, each
pinned below by its digest: scripts/freeze-migration rewrites the list, and
the upgrade refuses to run if a file differs from it. At the release,
`scripts/freeze-migration --release` copies the files into 0001_initial.sql
and empties the list; from then on the revision never changes and every
schema change is a new revision (docs/development.md).
"""

from __future__ import annotations

from memgov_pg.migrate import BRANCH, Frozen, execute_frozen, execute_revision_sql

revision = "0001_initial"
down_revision = None
branch_labels = (BRANCH,)
depends_on = None

# frozen: written by scripts/freeze-migration, not by hand
FROZEN: Frozen = (
    ("000_roles.sql", "sha256:8a7bddf16c46ab5c72ba81ecb9d9d99304e5130995714a3f62ab5b1657a55409"),
    ("005_tenants.sql", "sha256:38bac24788855f0858ee8c71e13d96a5507948321f7703ae6587c00c76062ccd"),
    ("010_schema.sql", "sha256:83b91a7557a267a8393a066c7435ddf0ebbe71df7c6d40c40787371f0b217c4d"),
    ("020_detectors.sql", "sha256:fd4244c627da347bb819f222e3b96b505e25745660ba9c56ee050f3da59bc8eb"),
    ("030_policy.sql", "sha256:2e0f4fc21fa5ae712fe10bd3d785364861787ba3e9ce5251b5a4031be0435a4d"),
    ("035_shadow.sql", "sha256:c3e5473fb911d352c768eea149b3ad5f61e041908d52b1d370f595dfdd531e49"),
    ("040_enforce.sql", "sha256:e5719c6ae9c43cf4186a1a9e797d48ee05b88ed24691a3d2e0afd503d1d9fead"),
    ("045_review.sql", "sha256:87aadc8285970108e51a1c304d78530dbea0fba2555bb38e55f44c02857871f7"),
    ("050_feedback.sql", "sha256:48cc129e3d5384529b585f73a2cc09e1e41d0a0d735c66764da779f8c70adbed"),
    ("060_recall.sql", "sha256:8561d4aa2e88b1d0b1547df3b1919606f46960edb62f4c5dcfc91d2e9e4c9dfc"),
    ("070_retention.sql", "sha256:9d65016ffd141946e3ee209ccbbb1ad8eaab8a1aeae1fe4fd79471fec67c62f7"),
    ("080_audit.sql", "sha256:3d5fd380e495eab9ec99e95cc621c27f671482a1a160cac4e8098cd69cb65dcf"),
)
# end frozen


def upgrade() -> None:
    execute_frozen(__file__, FROZEN)


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
