-- Every query the Python layer sends, by name (see memgov_pg/queries.py).
-- A block starts with "-- name: <name>" and runs to the next header.

-- name: server_info
-- What `memgov up` and `memgov status` report about the server.
SELECT current_setting('server_version')            AS server_version,
       current_database()                           AS database,
       current_user                                 AS "user",
       coalesce(current_setting('cron.database_name', true), '') AS cron_database;

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
SELECT to_regclass('public.memgov_alembic_version') IS NOT NULL AS exists;

-- name: current_revision
-- The Alembic revision of the memgov schema.
SELECT version_num FROM public.memgov_alembic_version;

-- name: check_regex
-- Whether PostgreSQL can compile a policy's regex (raises 2201B when not).
SELECT '' ~ %(pattern)s;

-- name: rollback_policy
SELECT memgov.rollback_policy(%(org_id)s, %(to)s);

-- name: evaluate
SELECT memgov.evaluate(%(item)s, %(operation)s);

-- name: explain
SELECT memgov.explain(%(item)s, %(operation)s);

-- name: set_tenant
-- MemoryPolicyEngine: the tenant of this transaction (row level security reads it).
SELECT set_config('memgov.org_id', %(org_id)s, true);

-- name: remember
SELECT memgov.remember(%(item)s);

-- name: forget
SELECT memgov.forget(%(memory_id)s::uuid);

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

-- name: last_maintenance_summary
SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1;

-- name: demo_reset
-- memgov demo: forget the demo tenant's previous story (run as memgov_owner).
WITH requests AS (DELETE FROM memgov.approval_requests WHERE org_id = %(org_id)s),
     held AS (DELETE FROM memgov.quarantine WHERE org_id = %(org_id)s),
     feedback AS (DELETE FROM memgov.feedback_events WHERE org_id = %(org_id)s),
     decisions AS (DELETE FROM memgov.decision_log WHERE org_id = %(org_id)s),
     deletions AS (DELETE FROM memgov.deletion_log WHERE org_id = %(org_id)s)
DELETE FROM memgov.long_term_memory_items WHERE org_id = %(org_id)s;

-- name: demo_backdate
-- memgov demo: let eight days pass for one memory (run as memgov_owner).
UPDATE memgov.long_term_memory_items
   SET created_at = created_at - interval '8 days', updated_at = updated_at - interval '8 days'
 WHERE memory_id = %(memory_id)s::uuid;

-- name: demo_decisions
SELECT decision_id, operation, action, enforced, matched_rule_ids, reason_codes, actor
  FROM memgov.decision_log
 WHERE org_id = %(org_id)s
 ORDER BY decision_id;

-- name: demo_memories
SELECT fact_text, category, confidence, status, retention_policy
  FROM memgov.long_term_memory_items
 WHERE org_id = %(org_id)s
 ORDER BY created_at, fact_text;

-- name: memgov_schema_installed
-- Whether this database has the memgov engine (the retention procedure in particular).
SELECT to_regprocedure('memgov.run_maintenance(boolean)') IS NOT NULL AS installed;

-- name: cron_database_name
-- The database pg_cron lives in; NULL when the server has not loaded pg_cron.
SELECT current_setting('cron.database_name', true) AS cron_database,
       current_database()                          AS governed_database;

-- name: pg_cron_installed
-- Run in the cron database: whether CREATE EXTENSION pg_cron was done there.
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pg_cron';

-- name: default_schedule
-- The maintenance schedule of the active global policy (retention.schedule).
SELECT coalesce(memgov.policy_settings('*') #>> '{retention,schedule}', '*/10 * * * *') AS schedule;

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
  FROM memgov.long_term_memory_items
 WHERE expires_at <= now() AND retention_policy <> 'permanent_until_revoked';

-- name: maintenance_lock_holder
-- The backend that holds the maintenance lock of this database, if any.
SELECT l.pid, a.backend_start, a.application_name
  FROM pg_catalog.pg_locks l
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted
   AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
   AND l.classid = ((hashtext('memgov.run_maintenance')::bigint >> 32) & 4294967295)::oid
   AND l.objid = (hashtext('memgov.run_maintenance')::bigint & 4294967295)::oid
   AND l.objsubid = 1
 LIMIT 1;

-- name: status_policies
-- `memgov status`: the live policy version of each tenant ('*' = global).
SELECT org_id, version, mode, deployed_at, deployed_by
  FROM memgov.policy_versions
 WHERE active
 ORDER BY org_id COLLATE "C";

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

-- name: status_decisions_24h
SELECT action, count(*) AS decisions
  FROM memgov.decision_log
 WHERE decided_at >= now() - interval '24 hours'
 GROUP BY action
 ORDER BY action;
