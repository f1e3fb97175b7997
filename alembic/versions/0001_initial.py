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
    ("000_roles.sql", "sha256:68bb6623dee904fd3382617ecf2f6af051bf7f83fba535f91a0ef4ff5b3d2ee8"),
    ("010_schema.sql", "sha256:284bdd51d5dc15af9320c65e46a84da79993281fe4d3b85a529b0c9ee0fd8abe"),
    ("015_tenants.sql", "sha256:dca42fb4312587c5d9938e31fa887eb72c2e9d8586a3e2c52a6a34fbc299a171"),
    ("020_detectors.sql", "sha256:067c9afe52544b0cabea7b152158047759ccb00ac8cc35b8a420759c5cbe843b"),
    ("030_policy.sql", "sha256:e56a327261c7ce0e2bf3634a53847b6782d7f1a00cacb221f222bd591001f291"),
    ("040_enforce.sql", "sha256:e12ae546659bb75dfb85628dc317617d3f9e6469a233697b58d31f0171efb02d"),
    ("050_feedback.sql", "sha256:cd096be10cc1d2443f77bd1845f51819dcc8e643ae7866c17b03c7188c742637"),
    ("060_security.sql", "sha256:4ec938d2b3a89c014f436059add6066f2df8d683dca7ab85dbf2f96d0a4313c0"),
    ("070_retention.sql", "sha256:7cc87dce75003e158dec7cc375b6c798bf6daa7e98b6dd27f02c4b07fc4ab22b"),
    ("080_audit.sql", "sha256:c691d39ea9d34ad750e06bdb39eb3b43565b29e14c2efc93dbb81ae765f5564a"),
)
# end frozen


def upgrade() -> None:
    execute_frozen(__file__, FROZEN)


def downgrade() -> None:
    execute_revision_sql(__file__, "downgrade")
