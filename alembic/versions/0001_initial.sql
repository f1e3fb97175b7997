-- The initial revision. Its upgrade is the sql/ files pinned in 0001_initial.py
-- until the first release, when scripts/freeze-migration --release copies them
-- here as a `-- migrate:upgrade` section.

-- migrate:downgrade
-- Roles are cluster-wide and may serve other databases: they are kept.
DROP SCHEMA memgov CASCADE;
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
