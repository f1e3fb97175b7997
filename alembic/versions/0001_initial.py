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
    ("010_schema.sql", "sha256:2305da30d6036dd9228544eda6aa339439a0a48266b600d8e9393e40cf6c34fa"),
    ("020_detectors.sql", "sha256:fd4244c627da347bb819f222e3b96b505e25745660ba9c56ee050f3da59bc8eb"),
    ("030_policy.sql", "sha256:46647eaad4d0d91ef24c5284bed548345f8358f6d9409298604a3e4858779182"),
    ("040_enforce.sql", "sha256:d55adce997249e164bf04db81a85bffeaee1fd7637e9ceb68d5a4a6e1c674876"),
    ("045_review.sql", "sha256:84623222472b1247e6f89d0b3acc0a6ae8bd40df99eb3ecb50c75e50d2e5c282"),
    ("050_feedback.sql", "sha256:a834ca64fbb3f3c9dc27485f4810fa97709d60314ea2d8afe5a4376046a86189"),
    ("060_recall.sql", "sha256:24dcb34747893a832715b9ceb8d941d3d4cb4d10fa1df952db70a7b881c42c65"),
    ("070_retention.sql", "sha256:8c5da3e35ee4ed71996b550e3a53d39c0cb05c09dd04d2d5ca417d3912e927da"),
    ("080_audit.sql", "sha256:3d5fd380e495eab9ec99e95cc621c27f671482a1a160cac4e8098cd69cb65dcf"),
)
# end frozen


def upgrade() -> None:
    execute_frozen(__file__, FROZEN)


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
