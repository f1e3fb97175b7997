-- `memgov doctor`'s queries (memgov_pg.doctor), the policy drift check and the sealed
-- decision log's (memgov_pg.audit, memgov_pg.probes). A block starts with
-- "-- name: <name>" and runs to the next header (memgov_pg/resources.py parses every file of
-- sql/queries/; a name is defined in one file only).

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
