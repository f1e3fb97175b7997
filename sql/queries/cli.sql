-- The CLI's queries: `memgov up`, `migrate` and the revisions (memgov_pg.migrate,
-- memgov_pg.revisions), deploy, shadows and evaluate (memgov_pg.deploy), the reviewers'
-- commands (memgov_pg.review), `make demo`, `memgov status`, retention and pg_cron
-- (memgov_pg.retention, memgov_pg.pgcron), tenants and the standby logger. A block starts
-- with "-- name: <name>" and runs to the next header (memgov_pg/resources.py parses every
-- file of sql/queries/; a name is defined in one file only).

-- name: server_info
-- What `memgov up` and `memgov status` report about the server.
SELECT current_setting('server_version')            AS server_version,
       current_database()                           AS database,
       current_user                                 AS "user",
       -- a superuser, or a role with memgov_admin's privileges: who may read what status shows
       EXISTS (SELECT FROM pg_catalog.pg_roles r
                WHERE r.rolname = 'memgov_admin' AND pg_catalog.pg_has_role(r.oid, 'USAGE')) AS admin;

-- name: login_roles
-- Who the connecting login is, for the error that names the role a command needs.
SELECT current_user::text AS "user", r.rolsuper AS superuser,
       EXISTS (SELECT FROM pg_catalog.pg_roles a
                WHERE a.rolname = 'memgov_admin' AND pg_catalog.pg_has_role(a.oid, 'USAGE')) AS admin
  FROM pg_catalog.pg_roles r
 WHERE r.rolname = current_user;

-- name: schema_objects
-- The memgov objects, for `memgov migrate` and `make demo` to show what exists.
SELECT c.relname AS name,
       CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' ELSE c.relkind::text END AS kind,
       pg_catalog.obj_description(c.oid, 'pg_class') AS description
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'memgov' AND c.relkind IN ('r', 'v')
 ORDER BY c.relname;

-- name: memgov_roles
SELECT rolname AS name, rolcanlogin AS can_login
  FROM pg_catalog.pg_roles
 WHERE rolname LIKE 'memgov\_%'
 ORDER BY rolname;

-- name: create_extension_pg_cron
CREATE EXTENSION IF NOT EXISTS pg_cron;

-- name: database_exists
SELECT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = %(name)s) AS exists;

-- name: version_table_exists
-- Whether an Alembic version table exists (memgov's own or a host's), by qualified name.
SELECT to_regclass(%(table)s) IS NOT NULL AS exists;

-- name: grant_version_table
-- memgov's own version table, readable by memgov_admin (memgov status); {table} is memgov's own.
GRANT SELECT ON {table} TO memgov_admin;

-- name: version_table_granted
-- Whether memgov_admin may read memgov's own version table already.
SELECT pg_catalog.has_table_privilege('memgov_admin', %(table)s, 'SELECT') AS granted;

-- name: current_revision
-- Every revision a version table records. memgov's own table holds only memgov's; a
-- host's also holds the host's own (memgov_pg.migrate.locate tells them apart).
SELECT version_num FROM {table} ORDER BY version_num;

-- name: regex_check_timeout
-- How long PostgreSQL may take to compile a policy's pattern (MAX_REGEX_COMPILE_MS), for the
-- rest of the check's transaction or savepoint, which is then undone.
SELECT pg_catalog.set_config('statement_timeout', %(timeout)s, true);

-- name: check_regex
-- Whether PostgreSQL can compile a policy's regex (raises 2201B when not).
SELECT '' ~ %(pattern)s;

-- name: rollback_policy
SELECT memgov.rollback_policy(%(org_id)s, %(to)s);

-- name: start_shadow
-- Shadow a version staged in the same transaction (`memgov deploy --shadow`).
SELECT memgov.start_shadow(%(org_id)s, %(version)s);

-- name: shadow_report
SELECT memgov.shadow_report(%(org_id)s, %(examples)s);

-- name: promote_shadow
SELECT memgov.promote_shadow(%(org_id)s);

-- name: stop_shadow
SELECT memgov.stop_shadow(%(org_id)s);

-- name: replay
-- Re-decide the writes of the last %(since)s under a version staged in the same transaction.
SELECT memgov.replay(%(org_id)s, %(version)s, %(since)s::interval, %(examples)s);

-- name: undeploy_policy
-- Undo the latest activation of a version (a policy revision's downgrade).
SELECT memgov.undeploy_policy(%(org_id)s, %(version)s);

-- name: memgov_policy_engine_installed
-- Whether this database has memgov's deploy functions (a policy revision runs after them).
SELECT to_regprocedure('memgov.undeploy_policy(text, text)') IS NOT NULL AS installed;

-- name: evaluate
SELECT memgov.evaluate(%(item)s, %(operation)s);

-- name: explain
SELECT memgov.explain(%(item)s, %(operation)s);

-- review: `memgov approvals` / `memgov quarantine` (memgov_pg.review) and the engines ------

-- name: release_quarantine
SELECT memgov.release_quarantine(%(quarantine_id)s::uuid);

-- name: purge_quarantine
SELECT memgov.purge_quarantine(%(quarantine_id)s::uuid);

-- name: review_caller
-- Who the login is and whether it may review (a member of memgov_reviewer or memgov_admin;
-- a superuser is a member of every role).
SELECT session_user::text AS login,
       pg_catalog.pg_has_role('memgov_admin', 'MEMBER') AS admin,
       pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') AS reviewer;

-- name: session_tenant
-- The tenant this session acts in: NULL when memgov.org_id is unset, or names a tenant
-- the login is not bound to.
SELECT memgov.session_tenant();

-- name: approvals_list
-- The approval requests the login may read (row level security: a reviewer its session's
-- tenant, an admin every tenant), oldest first, with the logged decision that held each
-- and, for a held update, the memory as it is now (as the login may read it).
SELECT r.request_id, r.org_id, r.operation::text AS operation, r.status::text AS status, r.memory_id,
       r.payload, r.requested_at, r.requested_by, r.requested_login, r.decided_at, r.decided_by,
       r.decided_login, r.note, r.decision_id, r.policy_version,
       CASE WHEN d.decision_id IS NOT NULL THEN jsonb_build_object(
           'action', d.action, 'reason_codes', d.reason_codes, 'matched_rule_ids', d.matched_rule_ids,
           'policy_version', d.policy_version, 'mode', d.mode, 'enforced', d.enforced,
           'risk_score', d.risk_score, 'risk_level', d.risk_level, 'decision_id', d.decision_id) END AS decision,
       (SELECT to_jsonb(m) - 'search_config' - 'search_vector' FROM memgov.long_term_memory_items m
         WHERE r.operation = 'update' AND m.memory_id = r.memory_id AND m.org_id = r.org_id) AS current
  FROM memgov.approval_requests r
  LEFT JOIN memgov.decision_log d ON d.org_id = r.org_id AND d.decision_id = r.decision_id
 WHERE (%(org_id)s::text IS NULL OR r.org_id = %(org_id)s::text)
   AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
   AND (%(id)s::uuid IS NULL OR r.request_id = %(id)s::uuid)
 ORDER BY r.requested_at, r.request_id
 LIMIT %(limit)s;

-- name: quarantine_list
-- The quarantine entries the login may read (row level security as approvals_list), oldest
-- first, with the decision that diverted each and, for an update, the memory as it is now.
SELECT q.quarantine_id, q.org_id, q.operation::text AS operation, q.status::text AS status, q.memory_id,
       q.payload, q.decision, q.decision_id, q.quarantined_at, q.quarantined_by, q.quarantined_login,
       q.resolved_at, q.resolved_by, q.resolved_login,
       (SELECT to_jsonb(m) - 'search_config' - 'search_vector' FROM memgov.long_term_memory_items m
         WHERE q.operation = 'update' AND m.memory_id = q.memory_id AND m.org_id = q.org_id) AS current
  FROM memgov.quarantine q
 WHERE (%(org_id)s::text IS NULL OR q.org_id = %(org_id)s::text)
   AND (%(status)s::text IS NULL OR q.status = %(status)s::text)
   AND (%(id)s::uuid IS NULL OR q.quarantine_id = %(id)s::uuid)
 ORDER BY q.quarantined_at, q.quarantine_id
 LIMIT %(limit)s;

-- name: last_maintenance_summary
SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1;

-- name: demo_reset
-- memgov demo: forget the demo tenant's previous story (run as memgov_owner). Its decisions
-- stay: the decision log is append-only (demo_decisions shows this run's).
WITH requests AS (DELETE FROM memgov.approval_requests WHERE org_id = %(org_id)s),
     held AS (DELETE FROM memgov.quarantine WHERE org_id = %(org_id)s),
     feedback AS (DELETE FROM memgov.feedback_events WHERE org_id = %(org_id)s),
     deletions AS (DELETE FROM memgov.deletion_log WHERE org_id = %(org_id)s)
DELETE FROM memgov.long_term_memory_items WHERE org_id = %(org_id)s;

-- name: demo_backdate
-- memgov demo: let eight days pass for one memory (run as memgov_owner).
UPDATE memgov.long_term_memory_items
   SET created_at = created_at - interval '8 days', updated_at = updated_at - interval '8 days'
 WHERE memory_id = %(memory_id)s::uuid;

-- name: demo_recall
-- memgov demo: what the agent recalls, best first.
SELECT fact_text, score FROM memgov.search(%(query)s);

-- name: demo_last_decision
SELECT coalesce(max(decision_id), 0) AS decision_id FROM memgov.decision_log WHERE org_id = %(org_id)s;

-- name: demo_decisions
-- This run's decisions: those after demo_last_decision.
SELECT decision_id, operation, action, enforced, matched_rule_ids, reason_codes, actor
  FROM memgov.decision_log
 WHERE org_id = %(org_id)s AND decision_id > %(after)s
 ORDER BY decision_id;

-- name: demo_memories
SELECT fact_text, category, confidence, status, retention_policy
  FROM memgov.long_term_memory_items
 WHERE org_id = %(org_id)s
 ORDER BY created_at, fact_text;

-- name: memgov_schema_exists
-- Whether schema memgov exists at all (a migration must never try to create it again), and
-- its comment, which names the revision it is at (0001_initial's names none).
SELECT to_regnamespace('memgov') IS NOT NULL AS exists,
       pg_catalog.obj_description(to_regnamespace('memgov'), 'pg_namespace') AS comment;

-- name: memgov_schema_installed
-- Whether this database has the memgov engine (the retention procedure in particular); read
-- from the catalog, so that a role without USAGE on schema memgov gets an answer too.
SELECT EXISTS (SELECT FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'memgov' AND p.proname = 'run_maintenance'
                  AND p.proargtypes = '16'::pg_catalog.oidvector) AS installed;  -- (boolean)

-- name: status_overdue
-- `memgov status --check`: pending approvals older than their tenant's approval_ttl (the sweep
-- expires them), and quarantined writes held longer than it too: "quarantine growing" means
-- nobody resolves them.
SELECT (SELECT count(*) FROM memgov.approval_requests r WHERE memgov.approval_expired(r)) AS approvals,
       (SELECT count(*) FROM memgov.quarantine q
         WHERE q.status = 'held'
           AND q.quarantined_at <= pg_catalog.now() - memgov.retention_interval(q.org_id, 'approval_ttl'))
           AS quarantine;

-- name: cron_settings_seen
-- pg_cron's settings as this role reads them (memgov_pg/pgcron.py): NULL when pg_cron is not
-- loaded, and for a role that may not read superuser-only settings (reads_settings false), which
-- may ask memgov.cron_settings() instead when it can (asks_memgov: memgov_admin). A config file
-- may still set cron.database_name after pg_cron left shared_preload_libraries: that is a
-- placeholder of context 'user', pg_cron's own setting is a 'postmaster' one.
SELECT (SELECT s.setting FROM pg_catalog.pg_settings s
         WHERE s.name = 'cron.database_name' AND s.context = 'postmaster') AS cron_database,
       (SELECT s.setting FROM pg_catalog.pg_settings s
         WHERE s.name = 'cron.log_run' AND s.context = 'postmaster')       AS log_run,
       current_database()                                                 AS governed_database,
       current_user::text                                                 AS "user",
       pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')            AS reads_settings,
       n.oid IS NOT NULL                                                  AS has_schema,
       coalesce(pg_catalog.has_schema_privilege(n.oid, 'USAGE')
                AND EXISTS (SELECT FROM pg_catalog.pg_proc p
                             WHERE p.pronamespace = n.oid AND p.proname = 'cron_settings' AND p.pronargs = 0
                               AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')), false) AS asks_memgov,
       EXISTS (SELECT FROM pg_catalog.pg_roles r
                WHERE r.rolname = 'memgov_admin' AND pg_catalog.pg_has_role(r.oid, 'USAGE')) AS is_admin
  FROM (SELECT NULL) AS one
  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = 'memgov';

-- name: cron_settings_asked
-- pg_cron's settings through memgov.cron_settings() (memgov_admin).
SELECT cron_database, log_run, readable FROM memgov.cron_settings();

-- name: cron_setting_probe
-- Raises 42501 when pg_cron defined cron.database_name (it is loaded) and this role may not read it.
SELECT pg_catalog.current_setting('cron.database_name', true) AS cron_database;

-- name: pg_cron_access
-- Run in the cron database: no row when CREATE EXTENSION pg_cron was not done there; else
-- what this role may do: use schema cron (a superuser's GRANT USAGE), create jobs
-- (EXECUTE on cron.schedule_in_database), see every role's jobs (pg_cron's row security
-- shows others only their own).
SELECT e.extversion,
       current_user::text                                              AS "user",
       pg_catalog.has_schema_privilege(n.oid, 'USAGE')                AS uses_schema,
       EXISTS (SELECT FROM pg_catalog.pg_proc p
                WHERE p.pronamespace = n.oid AND p.proname = 'schedule_in_database'
                  AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS may_schedule,
       (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
         WHERE r.rolname = current_user)                               AS sees_all_jobs
  FROM pg_catalog.pg_extension e
  JOIN pg_catalog.pg_namespace n ON n.nspname = 'cron'  -- pg_cron's script makes it (extnamespace is public)
 WHERE e.extname = 'pg_cron';

-- name: default_schedule
-- The maintenance schedule of the active global policy (retention.schedule), else the default.
SELECT memgov.policy_setting('*', 'retention', 'schedule') AS schedule;

-- name: setting_defaults
-- The engine's defaults: what applies to a feedback or retention setting a policy leaves out,
-- and the limits memgov.settings starts with (memgov_admin).
SELECT memgov.setting_defaults() AS defaults;

-- name: cron_find_job
-- Run in the cron database: the maintenance job(s) of one governed database, by name.
SELECT jobid, jobname, schedule, command, database, username, active
  FROM cron.job
 WHERE jobname = %(job_name)s
 ORDER BY jobid;

-- name: cron_schedule_job
-- Run in the cron database: creates the job, or updates the one of that name (pg_cron >= 1.4).
SELECT cron.schedule_in_database(%(job_name)s, %(schedule)s, %(command)s, %(database)s) AS jobid;

-- name: cron_unschedule_job
SELECT cron.unschedule(%(jobid)s::bigint) AS unscheduled;

-- name: cron_last_run
-- Run in the cron database: the latest run of a job (pg_cron shows non-superusers their own runs only).
SELECT runid, status, start_time, end_time, return_message
  FROM cron.job_run_details
 WHERE jobid = %(jobid)s
 ORDER BY runid DESC
 LIMIT 1;

-- name: maintenance_last_run_id
SELECT coalesce(max(run_id), 0) AS run_id FROM memgov.maintenance_runs WHERE org_id = '*';

-- name: maintenance_run_after
-- The run a `memgov retention run` started: the first one after the id it saw before.
SELECT run_id, status, dry_run, started_at, finished_at, summary
  FROM memgov.maintenance_runs
 WHERE org_id = '*' AND run_id > %(after)s
 ORDER BY run_id
 LIMIT 1;

-- name: retention_run
-- `memgov retention run` (autocommit: the procedure commits each batch).
CALL memgov.run_maintenance(false);

-- name: retention_run_dry
CALL memgov.run_maintenance(true);

-- name: maintenance_due_ttl
-- How many memories the TTL sweep has to delete now (the total of its progress bar).
SELECT count(*) AS due
  FROM memgov.long_term_memory_items m
 WHERE memgov.ttl_due(m);

-- name: maintenance_lock_holder
-- The backend whose run holds the maintenance lease of this database, if any.
SELECT a.pid, a.backend_start, a.application_name
  FROM pg_catalog.pg_stat_activity a
 WHERE a.pid = memgov.maintenance_holder();

-- name: status_policies
-- `memgov status`: the live policy version of each tenant ('*' = global).
SELECT org_id, version, mode, deployed_at, deployed_by
  FROM memgov.policy_versions
 WHERE active
 ORDER BY org_id COLLATE "C";

-- name: status_shadows
-- `memgov status`: the running shadow deployments and the decisions each has seen.
SELECT s.org_id, s.version, s.started_at,
       (SELECT count(*) FROM memgov.shadow_decisions d WHERE d.shadow_id = s.shadow_id) AS decisions
  FROM memgov.policy_shadows s
 WHERE s.ended_at IS NULL
 ORDER BY s.org_id COLLATE "C";

-- name: status_pending_approvals
SELECT org_id, count(*) AS pending, min(requested_at) AS oldest
  FROM memgov.approval_requests
 WHERE status = 'pending'
 GROUP BY org_id
 ORDER BY org_id COLLATE "C";

-- name: status_quarantine
SELECT org_id, count(*) AS held
  FROM memgov.quarantine
 WHERE status = 'held'
 GROUP BY org_id
 ORDER BY org_id COLLATE "C";

-- name: status_last_maintenance_run
-- The latest real (not dry) maintenance run.
SELECT run_id, status, started_at, finished_at, run_by, summary
  FROM memgov.maintenance_runs
 WHERE org_id = '*' AND NOT dry_run
 ORDER BY run_id DESC
 LIMIT 1;

-- name: status_last_setting_change
-- `memgov status`: the latest change of memgov.settings (memgov_admin).
SELECT changed_at, login, actor, name, old_value, new_value
  FROM memgov.settings_changes
 ORDER BY change_id DESC
 LIMIT 1;

-- name: status_decisions_24h
SELECT action, count(*) AS decisions
  FROM memgov.decision_log
 WHERE decided_at >= now() - interval '24 hours'
 GROUP BY action
 ORDER BY action;

-- tenants ---------------------------------------------------------------------------

-- name: tenant_grant
-- `memgov tenant grant ROLE ORG` (memgov_admin only; unknown role 42704, bad tenant id 22023).
SELECT memgov.grant_tenant(%(role)s, %(org_id)s) AS result;

-- name: tenant_revoke
SELECT memgov.revoke_tenant(%(role)s, %(org_id)s) AS result;

-- name: tenant_list
-- `memgov tenant list`: the bindings, whether the role still exists, and the logins bound through it.
SELECT g.role_name AS role, g.org_id, g.granted_at, g.granted_by,
       to_regrole(quote_ident(g.role_name)) IS NOT NULL AS role_exists,
       array(SELECT r.rolname::text
               FROM pg_catalog.pg_roles r
              WHERE r.rolcanlogin AND NOT r.rolsuper
                AND pg_catalog.pg_has_role(r.oid, to_regrole(quote_ident(g.role_name)), 'MEMBER')
              ORDER BY 1) AS logins
  FROM memgov.tenant_grants g
 WHERE %(role)s::text IS NULL OR g.role_name = %(role)s
 ORDER BY g.role_name COLLATE "C", g.org_id COLLATE "C";

-- name: schema_routines
-- Every routine of schema memgov as PostgreSQL prints it, in creation order, for
-- scripts/revision-sql (memgov_pg/revisions.py). Compiled policies are data, not schema.
SELECT p.oid::pg_catalog.regprocedure::text                             AS signature,
       CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END     AS kind,
       pg_catalog.pg_get_functiondef(p.oid)                             AS definition,
       coalesce(pg_catalog.pg_get_function_result(p.oid), '')           AS result,
       pg_catalog.pg_get_function_arguments(p.oid)                      AS arguments,
       pg_catalog.pg_get_userbyid(p.proowner)                           AS owner,
       coalesce((SELECT array_agg(CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                  ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END ORDER BY a.n)
                   FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)))
                        WITH ORDINALITY AS a (grantor, grantee, privilege_type, is_grantable, n)
                  WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner), '{}') AS grantees,
       pg_catalog.obj_description(p.oid, 'pg_proc')                     AS comment
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'memgov'::regnamespace
   AND p.proname !~ '^policy_[0-9a-f]{16}'
 ORDER BY p.oid;

-- name: standby_logger_setup
-- memgov standby-logger setup: the standby logger's server, login and user mapping
-- (sql/065_standby_reads.sql), on the primary, as a superuser.
SELECT memgov.setup_standby_logger(%(host)s, %(port)s, %(dbname)s, %(login)s, %(password)s) AS setup;

-- name: standby_logger_remove
-- memgov standby-logger remove: the server and user mapping go; standbys refuse governed reads again.
SELECT memgov.remove_standby_logger() AS removed;
