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
