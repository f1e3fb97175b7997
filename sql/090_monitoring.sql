-- memgov: monitoring views, for what a DBA asks at 3 a.m. (docs/monitoring.md). Each is
-- read through an index or a bounded range (no scan of the memory table, none of the whole
-- decision log) and answers across tenants: they are memgov_admin's and pg_monitor's (the
-- role postgres_exporter and other monitoring agents run as), and nobody else's.
--
--   memgov.monitor_decisions   decisions of the last minute and hour, by tenant, operation,
--                              action and whether enforced
--   memgov.monitor_approvals   pending approval requests by tenant, and the oldest one's age
--   memgov.monitor_quarantine  quarantine held by tenant, and the oldest entry's age
--   memgov.monitor_sweep       the last finished sweep: end, duration, deletions; the running
--                              one; runs since that did not finish; the schedule
--   memgov.monitor_seal        the seal lag: unsealed log rows, the oldest one's age
--   memgov.monitor_shadows     running shadows, their decisions and divergences
--   memgov.monitor_policies    the active policy version of each scope, and since when
--
-- The views are owned by memgov_owner and read their tables as it (not security_invoker):
-- a monitoring role needs no right on the tables, and sees counts and ages, never a
-- memory, a payload or a query. Ages are in seconds (double precision), as Prometheus wants.

SET ROLE memgov_owner;

-- Decisions of the last hour (decided_at: BRIN decision_log_xact_id_decided_at_idx).
-- memories counts what a bulk statement's shared decision covers (memory_count).
CREATE VIEW memgov.monitor_decisions AS
SELECT d.org_id,
       d.operation,
       d.action,
       d.enforced,
       count(*) FILTER (WHERE d.decided_at > pg_catalog.now() - interval '1 minute') AS decisions_last_minute,
       count(*) AS decisions_last_hour,
       coalesce(sum(coalesce(d.memory_count, 1)) FILTER (WHERE d.decided_at > pg_catalog.now() - interval '1 minute'),
                0)::bigint AS memories_last_minute,
       sum(coalesce(d.memory_count, 1))::bigint AS memories_last_hour
  FROM memgov.decision_log d
 WHERE d.decided_at > pg_catalog.now() - interval '1 hour'
 GROUP BY d.org_id, d.operation, d.action, d.enforced;
COMMENT ON VIEW memgov.monitor_decisions IS
    'Decisions of the last minute and hour by tenant, operation, action and enforced (monitor mode: false)';

-- Pending approval requests (index approval_requests_pending_idx).
CREATE VIEW memgov.monitor_approvals AS
SELECT r.org_id,
       count(*) AS pending,
       min(r.requested_at) AS oldest_requested_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - min(r.requested_at)) AS oldest_age_seconds
  FROM memgov.approval_requests r
 WHERE r.status = 'pending'
 GROUP BY r.org_id;
COMMENT ON VIEW memgov.monitor_approvals IS 'Pending approval requests by tenant, and the age of the oldest';

-- Quarantine held (index quarantine_held_idx).
CREATE VIEW memgov.monitor_quarantine AS
SELECT q.org_id,
       count(*) AS held,
       min(q.quarantined_at) AS oldest_quarantined_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - min(q.quarantined_at)) AS oldest_age_seconds
  FROM memgov.quarantine q
 WHERE q.status = 'held'
 GROUP BY q.org_id;
COMMENT ON VIEW memgov.monitor_quarantine IS 'Quarantine entries held by tenant, and the age of the oldest';

-- The sweep (memgov.run_maintenance), from memgov's own record of its runs: one row. The
-- last finished run (not a dry run) by the primary key, newest first; the runs after it
-- that are interrupted (killed, or failed: the next run marks them) or still running; the
-- schedule of the active global policy (retention.schedule) and its period in seconds
-- when it is a plain one (every N seconds / minutes, hourly, daily; else NULL).
CREATE VIEW memgov.monitor_sweep AS
WITH last_run AS (
    SELECT r.run_id, r.started_at, r.finished_at, r.summary
      FROM memgov.maintenance_runs r
     WHERE r.org_id = '*' AND r.status = 'finished' AND NOT r.dry_run
     ORDER BY r.run_id DESC
     LIMIT 1
), later AS (
    SELECT count(*) FILTER (WHERE r.status = 'interrupted') AS interrupted,
           min(r.started_at) FILTER (WHERE r.status = 'running') AS running_since
      FROM memgov.maintenance_runs r
     WHERE r.org_id = '*' AND NOT r.dry_run
       AND r.run_id > coalesce((SELECT l.run_id FROM last_run l), 0)
), schedule AS (
    SELECT coalesce((SELECT v.settings #>> '{retention,schedule}'
                       FROM memgov.policy_versions v
                      WHERE v.org_id = '*' AND v.active),
                    memgov.setting_defaults() #>> '{retention,schedule}') AS schedule
)
SELECT l.run_id AS last_run_id,
       l.started_at AS last_started_at,
       l.finished_at AS last_finished_at,
       pg_catalog.date_part('epoch', l.finished_at - l.started_at) AS last_duration_seconds,
       pg_catalog.date_part('epoch', pg_catalog.now() - l.finished_at) AS last_finished_age_seconds,
       coalesce((l.summary #>> '{deleted,ttl}')::bigint, 0)
           + coalesce((l.summary #>> '{deleted,confidence}')::bigint, 0)
           + coalesce((l.summary #>> '{deleted,auto_delete}')::bigint, 0) AS last_deleted,
       coalesce((l.summary #>> '{expired,approvals}')::bigint, 0) AS last_expired_approvals,
       coalesce((l.summary ->> 'sealed')::bigint, 0) AS last_sealed,
       coalesce(a.interrupted, 0) AS interrupted_since,
       a.running_since,
       pg_catalog.date_part('epoch', pg_catalog.now() - a.running_since) AS running_seconds,
       s.schedule,
       CASE
           WHEN s.schedule ~ '^\s*[1-5]?[0-9]\s+seconds?\s*$'
               THEN (pg_catalog.substring(s.schedule, '[0-9]+'))::double precision
           WHEN s.schedule ~ '^\*\s+\*\s+\*\s+\*\s+\*$' THEN 60
           WHEN s.schedule ~ '^\*/[0-9]+\s+\*\s+\*\s+\*\s+\*$'
               THEN 60 * (pg_catalog.substring(s.schedule, '^\*/([0-9]+)'))::double precision
           WHEN s.schedule ~ '^[0-9]+\s+\*\s+\*\s+\*\s+\*$' THEN 3600
           WHEN s.schedule ~ '^[0-9]+\s+\*/[0-9]+\s+\*\s+\*\s+\*$'
               THEN 3600 * (pg_catalog.substring(s.schedule, '^[0-9]+\s+\*/([0-9]+)'))::double precision
           WHEN s.schedule ~ '^[0-9]+\s+[0-9]+\s+\*\s+\*\s+\*$' THEN 86400
       END AS schedule_seconds
  FROM schedule s
  LEFT JOIN last_run l ON true
 CROSS JOIN later a;
COMMENT ON VIEW memgov.monitor_sweep IS
    'The last finished sweep (end, duration, deletions), runs after it interrupted or running, and the schedule';

-- The seal lag: the log's rows after the chain's end (its last seal, else the last archive
-- record), by the BRIN index on xact_id; none sealed yet: every row.
CREATE VIEW memgov.monitor_seal AS
WITH bounds AS (
    SELECT e.seal_id, e.xact_id, e.decision_id, e.sealed_at
      FROM ((SELECT 1 AS pick, s.seal_id, s.last_xact_id AS xact_id, s.last_decision_id AS decision_id, s.sealed_at
               FROM memgov.decision_log_seals s
              WHERE s.org_id = '*'
              ORDER BY s.seal_id DESC
              LIMIT 1)
            UNION ALL
            (SELECT 2, a.last_seal_id, a.last_xact_id, a.last_decision_id, a.archived_at
               FROM memgov.decision_log_archives a
              WHERE a.org_id = '*'
              ORDER BY a.archive_id DESC
              LIMIT 1)
            UNION ALL
            SELECT 3, NULL, 0, 0, NULL) AS e
     ORDER BY e.pick
     LIMIT 1
), unsealed AS (
    SELECT count(*) AS rows, min(d.decided_at) AS oldest
      FROM memgov.decision_log d, bounds b
     WHERE d.xact_id >= b.xact_id
       AND (d.xact_id, d.decision_id) > (b.xact_id, b.decision_id)
)
SELECT b.seal_id AS last_seal_id,
       b.sealed_at AS last_sealed_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - b.sealed_at) AS last_sealed_age_seconds,
       u.rows AS unsealed_rows,
       u.oldest AS oldest_unsealed_at,
       coalesce(pg_catalog.date_part('epoch', pg_catalog.now() - u.oldest), 0) AS oldest_unsealed_age_seconds
  FROM bounds b, unsealed u;
COMMENT ON VIEW memgov.monitor_seal IS
    'The decision log''s seal lag: rows after the last seal, and the age of the oldest of them';

-- Running shadows (index policy_shadows_running_idx) and what their candidate decided
-- (shadow_decisions by its primary key's shadow_id: a global shadow's are every tenant's).
CREATE VIEW memgov.monitor_shadows AS
SELECT s.org_id,
       s.version,
       s.started_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - s.started_at) AS running_seconds,
       count(d.decision_id) AS decisions,
       count(d.decision_id) FILTER (WHERE d.candidate_action <> d.active_action) AS divergences
  FROM memgov.policy_shadows s
  LEFT JOIN memgov.shadow_decisions d ON d.shadow_id = s.shadow_id
 WHERE s.ended_at IS NULL
 GROUP BY s.org_id, s.shadow_id, s.version, s.started_at;
COMMENT ON VIEW memgov.monitor_shadows IS 'Running shadows: their decisions so far and how many diverge';

-- The active version of each scope ('*' = global; index policy_versions_one_active_idx)
-- and its latest activation (policy_activations by its primary key).
CREATE VIEW memgov.monitor_policies AS
SELECT v.org_id,
       v.version,
       v.mode,
       v.sha256,
       v.deployed_at,
       a.activated_at,
       pg_catalog.date_part('epoch', coalesce(a.activated_at, v.deployed_at)) AS activated_epoch
  FROM memgov.policy_versions v
  LEFT JOIN LATERAL (
      SELECT p.activated_at
        FROM memgov.policy_activations p
       WHERE p.org_id = v.org_id AND p.version = v.version
       ORDER BY p.activation_id DESC
       LIMIT 1) a ON true
 WHERE v.active;
COMMENT ON VIEW memgov.monitor_policies IS 'The active policy version of each scope (''*'' = global) and when it was activated';

-- Who reads them: admins, and monitoring roles (pg_monitor: postgres_exporter's role joins
-- it). pg_monitor may use the schema for these views alone: it holds no other right here;
-- monitor_sweep reads the engine's default schedule.
GRANT SELECT ON memgov.monitor_decisions, memgov.monitor_approvals, memgov.monitor_quarantine,
                memgov.monitor_sweep, memgov.monitor_seal, memgov.monitor_shadows, memgov.monitor_policies
    TO memgov_admin, pg_monitor;
GRANT EXECUTE ON FUNCTION memgov.setting_defaults() TO pg_monitor;

GRANT USAGE ON SCHEMA memgov TO pg_monitor;

RESET ROLE;
