-- The engines' queries: MemoryPolicyEngine's (memgov_pg.engine: the tenant, remember,
-- forget, search, get, feedback and review calls) and the LangGraph store's
-- (memgov_pg.langgraph). A block starts with "-- name: <name>" and runs to the next header
-- (memgov_pg/resources.py parses every file of sql/queries/; a name is defined in one file only).

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
