-- Every query the Python layer sends, by name (memgov_pg/resources.py parses this file:
-- resources.query(name)). A block starts with "-- name: <name>" and runs to the next header.

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

-- name: set_tenant
-- MemoryPolicyEngine: the tenant of this transaction (row level security reads it).
SELECT set_config('memgov.org_id', %(org_id)s, true);

-- name: set_tenant_session
-- memgov_pg.sqlalchemy.install(engine, org_id): the tenant of every transaction of a new connection.
SELECT set_config('memgov.org_id', %(org_id)s, false);

-- name: remember
SELECT memgov.remember(%(item)s);

-- name: forget
SELECT memgov.forget(%(memory_id)s::uuid);

-- name: forget_where
-- Forgets every memory a filter matches, each decided as a forget (a dry run changes nothing).
SELECT memgov.forget_where(%(filter)s::jsonb, %(dry_run)s::boolean);

-- name: forget_caller
-- Who the login is and whether it may forget (a member of memgov_writer, memgov_reviewer or
-- memgov_admin; a superuser is a member of every role).
SELECT session_user::text AS login,
       pg_catalog.pg_has_role('memgov_writer', 'MEMBER') OR pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER')
       OR pg_catalog.pg_has_role('memgov_admin', 'MEMBER') AS may_forget;

-- name: pin_search_path
-- memgov test: its transaction resolves names as the engine's own functions do, whatever the
-- caller's search_path (a compiled policy pins none: docs/security.md).
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

-- name: memory_columns
-- memgov test: the columns an item may name.
SELECT attname::text FROM pg_catalog.pg_attribute
 WHERE attrelid = 'memgov.long_term_memory_items'::regclass AND attnum > 0 AND NOT attisdropped;

-- name: search
SELECT * FROM memgov.search(%(query)s);

-- name: get
SELECT * FROM memgov.get(%(memory_id)s::uuid);

-- name: last_recall
-- What the last memgov.search / memgov.get of this transaction decided, returned and withheld.
SELECT coalesce(nullif(current_setting('memgov.last_recall', true), ''), '{}')::jsonb;

-- name: confirm
SELECT memgov.confirm(%(memory_id)s::uuid);

-- name: reject
SELECT memgov.reject(%(memory_id)s::uuid);

-- name: edit
SELECT memgov.edit(%(memory_id)s::uuid, %(new_text)s);

-- name: approve
SELECT memgov.approve(%(request_id)s::uuid, %(note)s);

-- name: deny
SELECT memgov.deny(%(request_id)s::uuid, %(note)s);

-- name: apply_retention
SELECT memgov.apply_retention(%(memory_id)s::uuid);

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

-- doctor ----------------------------------------------------------------------------
-- `memgov doctor` reads only catalogs and memgov.tenant_grants; memgov_pg/doctor.py judges.

-- name: doctor_session
-- Names come out schema-qualified (regprocedure, regclass) whatever the caller's search_path.
SET search_path = pg_catalog;

-- name: doctor_schema_installed
-- Whether the database has a memgov schema (asked of the catalog: no USAGE needed).
SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'memgov') AS installed;

-- name: doctor_monitoring_views
-- The monitoring views (sql/090_monitoring.sql): whether each is there, and whether
-- memgov_admin and pg_monitor may read it (pg_monitor through USAGE on schema memgov too).
SELECT v.name,
       c.oid IS NOT NULL AS present,
       c.oid IS NOT NULL AND pg_catalog.has_table_privilege('memgov_admin', c.oid, 'SELECT') AS admin_reads,
       c.oid IS NOT NULL AND pg_catalog.has_table_privilege('pg_monitor', c.oid, 'SELECT') AS monitor_reads,
       pg_catalog.has_schema_privilege('pg_monitor', 'memgov', 'USAGE') AS monitor_uses_schema
  FROM pg_catalog.unnest(%(views)s::text[]) WITH ORDINALITY AS v(name, n)
  LEFT JOIN pg_catalog.pg_class c
    ON c.relname = v.name AND c.relnamespace = 'memgov'::regnamespace AND c.relkind = 'v'
 ORDER BY v.n;

-- name: doctor_replication_role
-- Grants of SET / ALTER SYSTEM on session_replication_role to non-superusers ('replica'
-- switches memgov's triggers off), and the non-superuser logins each one reaches (the
-- grants has_parameter_privilege(role, 'session_replication_role', 'SET') reads, with
-- SET ROLE counted too).
SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee,
       a.privilege_type AS privilege,
       array(SELECT r.oid::regrole::text
               FROM pg_catalog.pg_roles r
              WHERE r.rolcanlogin AND NOT r.rolsuper
                AND (a.grantee = 0 OR pg_catalog.pg_has_role(r.oid, a.grantee, 'MEMBER'))
              ORDER BY 1) AS logins
  FROM pg_catalog.pg_parameter_acl p
 CROSS JOIN LATERAL pg_catalog.aclexplode(p.paracl) a
 WHERE p.parname = 'session_replication_role'
   AND a.privilege_type IN ('SET', 'ALTER SYSTEM')
   AND (a.grantee = 0 OR NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = a.grantee))
 ORDER BY 1, 2;

-- name: doctor_owners
-- The memgov schema and the objects in it (tables, views, sequences not owned by a column,
-- functions, procedures, types, domains) with their owners.
WITH objects AS (
    SELECT 'schema' AS kind, pg_catalog.quote_ident(n.nspname) AS object, n.nspowner AS owner
      FROM pg_catalog.pg_namespace n
     WHERE n.nspname = 'memgov'
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                          WHEN 'f' THEN 'foreign table' ELSE 'table' END,
           c.oid::regclass::text, c.relowner
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace = 'memgov'::regnamespace
       AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
       -- serial and identity sequences follow their table's owner
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                        WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                          AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
    UNION ALL
    SELECT CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' ELSE 'function' END,
           p.oid::regprocedure::text, p.proowner
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'memgov'::regnamespace
    UNION ALL
    SELECT CASE t.typtype WHEN 'd' THEN 'domain' ELSE 'type' END, t.oid::regtype::text, t.typowner
      FROM pg_catalog.pg_type t
     WHERE t.typnamespace = 'memgov'::regnamespace
       AND t.typtype IN ('c', 'd', 'e', 'r')
       -- a table's row type follows the table
       AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')
)
SELECT o.kind, o.object, o.owner::regrole::text AS owner, r.rolcanlogin AS owner_can_login,
       r.rolsuper AS owner_is_superuser
  FROM objects o
  JOIN pg_catalog.pg_roles r ON r.oid = o.owner
 ORDER BY o.kind, o.object;

-- name: doctor_engine_roles
-- memgov's own roles: which exist, and whether one can log in.
SELECT r.rolname AS role, r.rolcanlogin AS can_login, r.rolsuper AS superuser
  FROM pg_catalog.pg_roles r
 WHERE r.rolname IN ('memgov_owner', 'memgov_policy', 'memgov_writer', 'memgov_reviewer', 'memgov_admin',
                     'memgov_settings_reader')
 ORDER BY 1;

-- name: doctor_owner_members
-- Non-superuser logins that are members of memgov_owner, memgov_policy or
-- memgov_settings_reader, and the direct grants of that role they come through.
SELECT l.oid::regrole::text AS login, g.rolname AS engine_role,
       array(SELECT m.member::regrole::text
               FROM pg_catalog.pg_auth_members m
              WHERE m.roleid = g.oid AND pg_catalog.pg_has_role(l.oid, m.member, 'MEMBER')
              ORDER BY 1) AS via
  FROM pg_catalog.pg_roles l
 CROSS JOIN pg_catalog.pg_roles g
 WHERE g.rolname IN ('memgov_owner', 'memgov_policy', 'memgov_settings_reader')
   AND l.rolcanlogin AND NOT l.rolsuper AND l.oid <> g.oid
   AND pg_catalog.pg_has_role(l.oid, g.oid, 'MEMBER')
   -- a member of memgov_owner is a member of memgov_policy too (memgov_owner is): say it once
   AND NOT (g.rolname = 'memgov_policy' AND pg_catalog.pg_has_role(l.oid, 'memgov_owner', 'MEMBER'))
 ORDER BY 1, 2;

-- name: doctor_clients
-- The client roles: memgov_writer, memgov_reviewer, and the logins in them that are not
-- superusers nor members of memgov_admin or memgov_owner (those are trusted). The other
-- doctor queries take their oids as %(clients)s.
SELECT r.oid, r.oid::regrole::text AS role, r.rolcanlogin AS login, r.rolcreaterole AS createrole,
       r.rolbypassrls AS bypassrls,
       pg_catalog.pg_has_role(r.oid, 'memgov_reviewer', 'MEMBER') AS reviewer
  FROM pg_catalog.pg_roles r
 WHERE r.rolname IN ('memgov_writer', 'memgov_reviewer')
    OR (r.rolcanlogin AND NOT r.rolsuper
        AND (pg_catalog.pg_has_role(r.oid, 'memgov_writer', 'MEMBER')
             OR pg_catalog.pg_has_role(r.oid, 'memgov_reviewer', 'MEMBER'))
        AND NOT pg_catalog.pg_has_role(r.oid, 'memgov_admin', 'MEMBER')
        AND NOT pg_catalog.pg_has_role(r.oid, 'memgov_owner', 'MEMBER'))
 ORDER BY 1;

-- name: doctor_client_grants
-- Every grant that reaches a client (PUBLIC, or a role a client is a member of) on a memgov
-- function, table, view, sequence or column, and TEMPORARY / CREATE on this database and
-- CREATE on its schemas: one row per grant and client. The owner's own entry is left out.
WITH clients AS (
    SELECT 0::oid AS oid, 'PUBLIC'::text AS name, false AS login, false AS reviewer
    UNION ALL
    SELECT r.oid, r.oid::regrole::text, r.rolcanlogin, pg_catalog.pg_has_role(r.oid, 'memgov_reviewer', 'MEMBER')
      FROM pg_catalog.pg_roles r
     WHERE r.oid = ANY (%(clients)s::oid[])
),
objects AS (
    SELECT CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END AS kind,
           p.oid::regprocedure::text AS object, NULL::text AS column_name,
           coalesce(p.proacl, pg_catalog.acldefault('f'::"char", p.proowner)) AS acl, p.proowner AS owner,
           NULL::boolean AS row_security, NULL::boolean AS has_org_id
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'memgov'::regnamespace
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'view' ELSE 'table' END,
           c.oid::regclass::text, NULL,
           coalesce(c.relacl, pg_catalog.acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner)),
           c.relowner,
           -- a view reads its tables as its owner unless it is security_invoker
           CASE WHEN c.relkind IN ('v', 'm') THEN coalesce('security_invoker=true' = ANY (c.reloptions), false)
                ELSE c.relrowsecurity END,
           EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped)
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace = 'memgov'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
    UNION ALL
    SELECT 'column', c.oid::regclass::text, a.attname::text, a.attacl, c.relowner, NULL, NULL
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = 'memgov'::regnamespace AND a.attacl IS NOT NULL
       AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'database', pg_catalog.quote_ident(d.datname), NULL,
           coalesce(d.datacl, pg_catalog.acldefault('d'::"char", d.datdba)), d.datdba, NULL, NULL
      FROM pg_catalog.pg_database d
     WHERE d.datname = pg_catalog.current_database()
    UNION ALL
    SELECT 'schema', pg_catalog.quote_ident(n.nspname), NULL,
           coalesce(n.nspacl, pg_catalog.acldefault('n'::"char", n.nspowner)), n.nspowner, NULL, NULL
      FROM pg_catalog.pg_namespace n
     WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
)
SELECT o.kind, o.object, o.column_name, o.row_security, o.has_org_id,
       a.privilege_type AS privilege,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee,
       c.name AS client, c.login, c.reviewer
  FROM objects o
 CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) a
  JOIN clients c ON a.grantee = 0 OR (c.oid <> 0 AND pg_catalog.pg_has_role(c.oid, a.grantee, 'MEMBER'))
 WHERE a.grantee <> o.owner
   AND CASE o.kind
           WHEN 'function' THEN a.privilege_type = 'EXECUTE'
           WHEN 'procedure' THEN a.privilege_type = 'EXECUTE'
           WHEN 'database' THEN a.privilege_type IN ('TEMPORARY', 'CREATE')
           WHEN 'schema' THEN a.privilege_type = 'CREATE'
           ELSE true
       END
 ORDER BY o.kind, o.object, o.column_name, grantee, privilege, c.name;

-- name: doctor_definer_search_path
-- SECURITY DEFINER functions in schema memgov and the search_path their SET clause pins (NULL: none).
-- Left out: the decision functions memgov_policy owns (memgov.decide and the compiled
-- policies), which only memgov_owner may call, from functions that pin search_path, and
-- whose calls therefore run under it; a SET clause would double the cost of a decision.
-- (Who may execute them is checked with every other engine-private function.)
SELECT p.oid::regprocedure::text AS function,
       CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END AS kind,
       (SELECT substr(c, length('search_path=') + 1)
          FROM unnest(p.proconfig) AS c
         WHERE c LIKE 'search\_path=%') AS search_path
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'memgov'::regnamespace AND p.prosecdef
   AND p.proowner <> 'memgov_policy'::regrole
 ORDER BY 1;

-- name: doctor_cron_jobs
-- Run in the cron database: the pg_cron jobs that run memgov.run_maintenance in one database.
SELECT jobid, jobname, schedule, command, username, active
  FROM cron.job
 WHERE database = %(database)s AND command ~* 'memgov\.run_maintenance'
 ORDER BY jobid;

-- name: doctor_tenant_binding
-- Tenant grants (and those whose role is gone), the client logins no grant binds, and
-- whether row security's flag (memgov.binding_on()) agrees with the grants.
SELECT (SELECT count(*) FROM memgov.tenant_grants) AS grants,
       memgov.binding_on() AS binding_on,
       array(SELECT DISTINCT g.role_name FROM memgov.tenant_grants g
              WHERE to_regrole(pg_catalog.quote_ident(g.role_name)) IS NULL
              ORDER BY 1) AS missing_roles,
       array(SELECT r.oid::regrole::text
               FROM pg_catalog.pg_roles r
              WHERE r.rolcanlogin AND r.oid = ANY (%(clients)s::oid[])
                AND NOT EXISTS (SELECT FROM memgov.tenant_grants g
                                 WHERE coalesce(pg_catalog.pg_has_role(
                                           r.oid, to_regrole(pg_catalog.quote_ident(g.role_name)), 'MEMBER'), false))
              ORDER BY 1) AS unbound_logins;

-- name: policy_drift_installed
SELECT to_regprocedure('memgov.policy_drift()') IS NOT NULL AS installed;

-- name: policy_drift
-- The deployed policy functions (and memgov.decide) whose live code is not what their
-- deploy recorded: `memgov doctor` (policy-drift) and `memgov verify-log` (memgov_admin).
SELECT org_id, version, function_name, problem FROM memgov.policy_drift();

-- audit -----------------------------------------------------------------------------
-- The sealed decision log (sql/080_audit.sql); memgov_pg/audit.py.

-- name: audit_installed
SELECT to_regprocedure('memgov.verify_decision_log(bigint, text)') IS NOT NULL AS installed;

-- name: verify_decision_log
-- `memgov verify-log`: the hash chain recomputed, with an optional anchor (memgov_admin).
SELECT memgov.verify_decision_log(%(anchor_seal_id)s::bigint, %(anchor_hash)s::text) AS report;

-- name: xid_counter_behind
-- Whether this cluster's transaction counter is behind the decision log: a logical copy
-- (pg_dump / pg_restore) carries the rows' xact_id and the seals' horizon into a cluster
-- whose counter starts lower. needed_xact_id is the first transaction id a new row may take
-- (past the last seal's horizon, the last archive's last row and every row in the log);
-- NULL when the counter is past it, as on every cluster the log was written on.
-- data_directory: NULL unless the caller may read it (pg_settings hides it from others).
SELECT n.next_xact_id,
       CASE WHEN n.next_xact_id < x.needed THEN x.needed END AS needed_xact_id,
       (SELECT s.setting FROM pg_catalog.pg_settings s WHERE s.name = 'data_directory') AS data_directory
  FROM (SELECT pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint AS next_xact_id) AS n
 CROSS JOIN LATERAL (
       SELECT greatest(
                  (SELECT s.horizon_xact_id FROM memgov.decision_log_seals s ORDER BY s.seal_id DESC LIMIT 1),
                  (SELECT a.last_xact_id + 1 FROM memgov.decision_log_archives a ORDER BY a.archive_id DESC LIMIT 1),
                  (SELECT max(d.xact_id) + 1 FROM memgov.decision_log d WHERE d.xact_id >= n.next_xact_id)
              ) AS needed) AS x;

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

-- LangGraph store (memgov_pg.langgraph, docs/langgraph.md) ---------------------------------
-- Every read runs as the store's login under row level security: its tenant only, and where
-- the tenant's policy governs reads, only the rows a get decision allows (governed_reads).
-- An item's value is its fact_text, the JSON text of what was put.

-- name: store_ready
-- MemgovStore.setup(): whether the schema has the store's columns, and the login may write.
SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = pg_catalog.to_regclass('memgov.long_term_memory_items')
                  AND a.attname = 'item_key' AND NOT a.attisdropped) AS has_columns,
       pg_catalog.to_regprocedure('memgov.remember(jsonb)') IS NOT NULL
       AND pg_catalog.has_function_privilege('memgov.remember(jsonb)', 'EXECUTE') AS may_write;

-- name: store_get
-- GetOp: the items of one namespace by key, each a governed get (memgov.get: decided and logged);
-- memory_id and ttl_minutes say which to refresh (store_refresh_ttl).
SELECT m.item_key AS key, r.fact_text AS value, r.created_at, r.updated_at, m.memory_id, m.ttl_minutes
  FROM memgov.long_term_memory_items m
 CROSS JOIN LATERAL memgov.get(m.memory_id) r
 WHERE m.org_id = %(org_id)s AND m.namespace = %(namespace)s AND m.item_key = ANY (%(keys)s::text[])
   AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now());

-- name: store_find
-- PutOp: the memory that holds an item, if its writer can see it.
SELECT m.memory_id
  FROM memgov.long_term_memory_items m
 WHERE m.org_id = %(org_id)s AND m.namespace = %(namespace)s AND m.item_key = %(key)s;

-- name: store_capture
-- Before store_update: the write trigger reports its decision (memgov.last_outcome) and logs
-- a denial instead of raising it, as it does for memgov.remember.
SELECT set_config('memgov.capture', 'on', true), set_config('memgov.on_deny', 'skip', true),
       set_config('memgov.last_outcome', '', true);

-- name: store_update
-- PutOp of an existing item: an update, decided by the write trigger.
UPDATE memgov.long_term_memory_items m
   SET fact_text = %(fact_text)s, category = %(category)s, source = %(source)s,
       confidence = %(confidence)s, is_sensitive = %(is_sensitive)s, subject_id = %(subject_id)s,
       project_id = %(project_id)s, agent_id = %(agent_id)s, ttl_minutes = %(ttl_minutes)s
 WHERE m.memory_id = %(memory_id)s AND m.org_id = %(org_id)s;

-- name: store_last_outcome
-- The decision on the row store_update wrote (JSON), and the settings reset.
SELECT nullif(current_setting('memgov.last_outcome', true), '')::jsonb AS decision,
       set_config('memgov.capture', '', true), set_config('memgov.on_deny', '', true),
       set_config('memgov.last_outcome', '', true);

-- name: store_search
-- SearchOp: the items under a namespace prefix ('' for all) that pass every filter
-- ({path, op, val}: $eq $ne by JSON equality, $gt $gte $lt $lte between values of the same
-- JSON type, so numbers compare as numbers), newest first, or with a query the best
-- full-text matches first (score: ts_rank_cd normalised to 0..1).
SELECT m.namespace, m.item_key AS key, m.fact_text AS value, m.created_at, m.updated_at,
       m.memory_id, m.ttl_minutes,
       CASE WHEN %(query)s::text IS NOT NULL
            THEN ts_rank_cd(m.search_vector, websearch_to_tsquery(m.search_config, %(query)s::text), 32)::float8
       END AS score
  FROM memgov.long_term_memory_items m
 WHERE m.org_id = %(org_id)s AND m.namespace IS NOT NULL
   AND (%(prefix)s::text = '' OR m.namespace = %(prefix)s::text OR starts_with(m.namespace, %(prefix)s::text || '.'))
   AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
   AND (%(query)s::text IS NULL OR m.search_vector @@ websearch_to_tsquery(m.search_config, %(query)s::text))
   AND NOT EXISTS (
       SELECT FROM jsonb_to_recordset(%(filters)s::jsonb) AS f(path text, op text, val jsonb)
        CROSS JOIN LATERAL (SELECT (m.fact_text::jsonb) -> f.path AS x) v
        WHERE NOT coalesce(CASE f.op
                               WHEN '$eq' THEN v.x = f.val
                               WHEN '$ne' THEN v.x <> f.val
                               WHEN '$gt' THEN jsonb_typeof(v.x) = jsonb_typeof(f.val) AND v.x > f.val
                               WHEN '$gte' THEN jsonb_typeof(v.x) = jsonb_typeof(f.val) AND v.x >= f.val
                               WHEN '$lt' THEN jsonb_typeof(v.x) = jsonb_typeof(f.val) AND v.x < f.val
                               WHEN '$lte' THEN jsonb_typeof(v.x) = jsonb_typeof(f.val) AND v.x <= f.val
                           END, false))
 ORDER BY score DESC NULLS LAST, m.updated_at DESC, m.namespace, m.item_key
 LIMIT %(limit)s OFFSET %(offset)s;

-- name: store_list_namespaces
-- ListNamespacesOp: the distinct namespaces that match every pattern (POSIX regexes on the
-- dot-joined labels), cut to max_depth labels, in order.
SELECT DISTINCT array_to_string((string_to_array(m.namespace, '.'))[1:coalesce(%(max_depth)s::integer, 2147483647)], '.')
       AS namespace
  FROM memgov.long_term_memory_items m
 WHERE m.org_id = %(org_id)s AND m.namespace IS NOT NULL
   AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
   AND m.namespace ~ ALL (%(patterns)s::text[])
 ORDER BY 1
 LIMIT %(limit)s OFFSET %(offset)s;

-- name: standby_logger_setup
-- memgov standby-logger setup: the standby logger's server, login and user mapping
-- (sql/065_standby_reads.sql), on the primary, as a superuser.
SELECT memgov.setup_standby_logger(%(host)s, %(port)s, %(dbname)s, %(login)s, %(password)s) AS setup;

-- name: standby_logger_remove
-- memgov standby-logger remove: the server and user mapping go; standbys refuse governed reads again.
SELECT memgov.remove_standby_logger() AS removed;

-- name: doctor_recovery
-- Whether this server is a standby (in recovery).
SELECT pg_catalog.pg_is_in_recovery() AS standby;

-- name: doctor_exporter_roles
-- The exporter's role as named (%(role)s), or else the logins whose name looks like an
-- exporter's (exporter, prometheus): whether each may log in, is a superuser, is in pg_monitor.
SELECT r.rolname AS role, r.rolcanlogin AS can_login, r.rolsuper AS superuser,
       pg_catalog.pg_has_role(r.oid, 'pg_monitor', 'MEMBER') AS monitors
  FROM pg_catalog.pg_roles r
 WHERE CASE WHEN %(role)s::text IS NOT NULL THEN r.rolname = %(role)s::text
            ELSE r.rolcanlogin AND NOT r.rolsuper AND r.rolname ~* '(exporter|prometheus)' END
 ORDER BY r.rolname;

-- name: doctor_standby_logger
-- The standby logger as memgov.standby_logger_status() sees it (sql/065_standby_reads.sql),
-- asked only where the foreign server memgov_primary exists (NULL: not set up).
SELECT CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary')
            THEN memgov.standby_logger_status() END AS status;

-- name: store_refresh_ttl
-- A read with refresh_ttl: the TTL of the items it returned starts again (the engine sets
-- expires_at, never past the retention policy's; expired items stay expired).
SELECT memgov.refresh_ttl(%(memory_ids)s::uuid[]) AS refreshed;

-- name: store_sweep_expired
-- The store's TTL sweeper: one batch of its tenant's expired memories deleted and logged.
SELECT memgov.sweep_expired(%(batch_size)s) AS deleted;

-- name: store_vectors
-- PutOp with an index: the vectors of the text the put just wrote, one per indexed path
-- (memgov_pg.langgraph_index), in the put's transaction.
SELECT memgov.store_vectors(%(memory_id)s::uuid, %(fact_text)s::text, %(paths)s::text[], %(vectors)s::real[]);

-- name: store_vector_search
-- SearchOp with a query and an index: the items ranked by the distance to the query's vector
-- (computed in SQL: sql/066_vectors.sql), under row level security like store_search; with
-- each item's memory_id and ttl_minutes (a read that refreshes TTLs names them), by the
-- store's key: one memory per (tenant, namespace, key).
SELECT s.namespace, s.key, s.value, s.created_at, s.updated_at, s.score, m.memory_id, m.ttl_minutes
  FROM memgov.store_vector_search(%(prefix)s::text, %(vector)s::float8[], %(distance)s::text,
                                  %(filters)s::jsonb, %(limit)s::integer, %(offset)s::integer)
       WITH ORDINALITY AS s(namespace, key, value, created_at, updated_at, score, n)
  JOIN memgov.long_term_memory_items m
    ON m.org_id = %(org_id)s AND m.namespace = s.namespace AND m.item_key = s.key
 ORDER BY s.n;
