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
    ("010_schema.sql", "sha256:e9b823555f28d30b4310355be2fd5b2bdd61ef3d56e3475152c9cfe950850916"),
    ("020_detectors.sql", "sha256:fd4244c627da347bb819f222e3b96b505e25745660ba9c56ee050f3da59bc8eb"),
    ("030_policy.sql", "sha256:351adccf96a23e0f3fc2de41fefd39df01041acdb3be4fb70b4cc877235c9244"),
    ("035_shadow.sql", "sha256:18d89af601d6f28c0b8d9109aa1266567f0224872d573075c78482327b4dfc63"),
    ("040_enforce.sql", "sha256:9ed981ff91f8977ba7b112829244091b9881550e5945996ad21139d99f7990a7"),
    ("045_review.sql", "sha256:87aadc8285970108e51a1c304d78530dbea0fba2555bb38e55f44c02857871f7"),
    ("050_feedback.sql", "sha256:48cc129e3d5384529b585f73a2cc09e1e41d0a0d735c66764da779f8c70adbed"),
    ("060_recall.sql", "sha256:8561d4aa2e88b1d0b1547df3b1919606f46960edb62f4c5dcfc91d2e9e4c9dfc"),
    ("070_retention.sql", "sha256:8c5da3e35ee4ed71996b550e3a53d39c0cb05c09dd04d2d5ca417d3912e927da"),
    ("080_audit.sql", "sha256:3d5fd380e495eab9ec99e95cc621c27f671482a1a160cac4e8098cd69cb65dcf"),
)
# end frozen


def upgrade() -> None:
    execute_frozen(__file__, FROZEN)


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
