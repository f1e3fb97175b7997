-- memgov: roles, the schema and who may use it.
--
-- Roles are cluster-wide, so they are created only when missing: several
-- governed databases in one cluster share them. All seven are NOLOGIN;
-- deployments grant memgov_writer, memgov_reviewer and memgov_admin to their own
-- login roles, never the others (but memgov_standby_logger: `memgov standby-logger
-- setup` grants it to a login of its own).
--
--   memgov_owner     owns every memgov object; SECURITY DEFINER functions run as it
--   memgov_policy    owns the compiled policy functions, which run as it: no table privileges
--   memgov_writer    agents: read/write items, remember, forget
--   memgov_reviewer  the user-facing application and human reviewers
--   memgov_admin     deploy, rollback, schedule, bind tenants; reads across tenants
--   memgov_settings_reader  owns memgov.cron_settings() alone, which runs as it: holds
--                    pg_read_all_settings to read pg_cron's superuser-only settings
--   memgov_standby_logger  may call memgov.log_standby_read() alone: the login a standby's
--                    user mapping holds is its member (memgov standby-logger setup)

DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['memgov_owner', 'memgov_policy', 'memgov_writer', 'memgov_reviewer', 'memgov_admin',
                                  'memgov_settings_reader', 'memgov_standby_logger'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;

-- memgov_owner creates the compiled policy functions and hands them to memgov_policy
GRANT memgov_policy TO memgov_owner;
-- pg_cron's cron.database_name and cron.log_run are superuser-only settings: memgov_admin
-- reads those two through memgov.cron_settings(), which runs as this role (sql/071_run_maintenance.sql)
GRANT pg_read_all_settings TO memgov_settings_reader;

-- btree_gin (contrib; trusted since PostgreSQL 13): a GIN index may then lead with a plain
-- column, so the full-text index leads with the tenant and a search reads its own tenant's
-- matches only (sql/010_schema.sql). One per database: where it is installed already it
-- stays where it is; else it gets a schema of its own, which no client may use (the index
-- calls its functions by oid).
DO $btree_gin$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'btree_gin') THEN
        CREATE SCHEMA memgov_btree_gin;
        REVOKE ALL ON SCHEMA memgov_btree_gin FROM PUBLIC;
        CREATE EXTENSION btree_gin SCHEMA memgov_btree_gin;
    END IF;
END
$btree_gin$;

CREATE SCHEMA memgov AUTHORIZATION memgov_owner;
-- The revision it is at ends the comment: memgov_pg.migrate.locate reads it where a host's
-- Alembic history records memgov's revision only through a host revision's depends_on.
COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0004_tenant_check)';

SET ROLE memgov_owner;

-- No function memgov_owner creates is executable by PUBLIC unless granted: every
-- engine-internal function stays out of clients' reach by default. (The global form:
-- per-schema default privileges can only add to the global ones.)
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Who may use the schema: the client roles, and memgov_policy, which owns the compiled
-- policy functions here; it holds CREATE (which ALTER ... OWNER needs) only inside
-- memgov.hand_to_policy_role(). What each role may do with each object is granted next
-- to the object.
REVOKE ALL ON SCHEMA memgov FROM PUBLIC;
GRANT USAGE ON SCHEMA memgov TO memgov_policy;
GRANT USAGE ON SCHEMA memgov TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;
