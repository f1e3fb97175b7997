-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- memgov_settings_reader: owns memgov.cron_settings() alone, and reads pg_cron's
-- superuser-only settings for it (sql/000_roles.sql, sql/070_retention.sql)
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'memgov_settings_reader') THEN
        CREATE ROLE memgov_settings_reader NOLOGIN;
    END IF;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;
GRANT pg_read_all_settings TO memgov_settings_reader;

-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

GRANT EXECUTE ON FUNCTION memgov.retention_interval(text,text) TO memgov_admin;

GRANT EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) TO memgov_admin;

RESET ROLE;
CREATE OR REPLACE FUNCTION memgov.cron_settings(OUT cron_database text, OUT log_run text, OUT readable boolean)
 RETURNS record
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    -- a config file may still set cron.* after pg_cron left shared_preload_libraries: such a
    -- placeholder has context 'user'; pg_cron's own settings are 'postmaster' ones
    SELECT (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.database_name' AND s.context = 'postmaster'),
           (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.log_run' AND s.context = 'postmaster'),
           pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')
$function$;
ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader;
REVOKE ALL ON FUNCTION memgov.cron_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO memgov_admin;
SET ROLE memgov_owner;

RESET ROLE;
-- generated routines: end

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

REVOKE EXECUTE ON FUNCTION memgov.retention_interval(text,text) FROM memgov_admin;

REVOKE EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) FROM memgov_admin;

RESET ROLE;
DROP FUNCTION memgov.cron_settings();
SET ROLE memgov_owner;

RESET ROLE;
-- generated routines: end
-- memgov_settings_reader is kept: roles are cluster-wide and may serve other databases
