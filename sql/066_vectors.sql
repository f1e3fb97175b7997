-- memgov: semantic search of a LangGraph store (memgov_pg.langgraph_index, docs/langgraph.md)
-- without pgvector. A store with an index embeds the fields of each put (its embedding model
-- runs in the client) and keeps one vector per indexed path here, as real[]; a search ranks
-- the items of its tenant and namespace by the distance to the query's vector, computed in SQL.
--
-- Vectors live outside the memory row: a 500-dimension vector is 2 KB, over the 16 KB cap of
-- the other columns together long before a few paths are indexed (max_other_bytes).
--
-- A vector belongs to a content, not only to a memory: content_hash is the sha256 of the
-- fact_text it embeds, and a vector counts only while the memory holds that text. So a held
-- update's vectors (stored when it is put, of the text the reviewer has not approved yet)
-- rank nothing until the approval makes that text the memory's; a denied one's never do, and
-- a text changed outside the store (an edit) leaves no stale vector ranking it. A held
-- INSERT's row is pending: no search reads it until it is approved. Vectors go with their
-- memory: forget, forget_where, the sweep, a denied held INSERT (memgov.drop_vectors).
--
-- Who: a writer stores vectors only through memgov.store_vectors, for a memory of its
-- session's tenant that it may write (the row level security of long_term_memory_items,
-- checked there), and only in the transaction whose write memgov decided: of the text that
-- write stored or held. Vectors steer what a search returns, so they are part of the
-- decided write, never a side door around it (a writer whose update the policy refuses
-- cannot re-rank the memory instead). A search runs as
-- its caller, under row level security: the tenant's rows, and only the rows its get rules
-- let it read; a vector row is visible only with its memory, and only while it embeds the
-- memory's current text (so a held update's vectors are no one's to read).
--
-- SQLSTATEs: MG404 no such memory in the tenant (or one the caller may not see), 22023 a
-- malformed call (shape, dimensions, non-finite values), 42501 a text no write of this
-- transaction stored or held.

SET ROLE memgov_owner;

CREATE TABLE memgov.memory_vectors (
    memory_id     uuid             NOT NULL,
    org_id        text             NOT NULL,
    -- sha256 of the fact_text the vector embeds (UTF-8)
    content_hash  bytea            NOT NULL,
    -- the indexed field, as LangGraph names it ("$" the whole value, "a.b", "list[*].c.0")
    path          text             NOT NULL,
    vector        real[]           NOT NULL,
    -- its euclidean norm, so that a cosine or L2 distance is one dot product at search time
    norm          double precision NOT NULL,
    created_at    timestamptz      NOT NULL DEFAULT now(),
    -- no foreign key: ON DELETE CASCADE runs one query per deleted memory, vectors or not
    -- (measured: a DELETE of 20,000 memories took 200 ms with it, 18 ms without); the
    -- statement trigger drop_vectors removes them in one join instead. A vector row whose
    -- memory is gone is never read: every search and the row level security join the memory.
    PRIMARY KEY (memory_id, org_id, content_hash, path),
    -- pgvector's bound; a search compares only vectors of its query's dimensions
    CHECK (array_ndims(vector) = 1 AND cardinality(vector) BETWEEN 1 AND 16000)
)
-- a vector stays in its row, uncompressed, up to ~2,000 dimensions (8 KB): random floats do
-- not compress, and a TOAST fetch per vector would cost more than its dot product
WITH (toast_tuple_target = 8160);
ALTER TABLE memgov.memory_vectors ALTER COLUMN vector SET STORAGE MAIN;
COMMENT ON TABLE memgov.memory_vectors IS
    'Embeddings of LangGraph store items (one per indexed path), counted while the memory holds the text they embed';

-- Readers: a writer or reviewer sees the vectors of the memories it may read (the memory
-- table's own row level security applies inside the subquery), of their current text only.
-- Nobody but memgov's functions writes here.
GRANT SELECT ON memgov.memory_vectors TO memgov_writer, memgov_reviewer, memgov_admin;
ALTER TABLE memgov.memory_vectors ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.memory_vectors
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY governed_reads ON memgov.memory_vectors
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (EXISTS (SELECT FROM memgov.long_term_memory_items m
                    WHERE m.memory_id = memory_vectors.memory_id AND m.org_id = memory_vectors.org_id
                      AND pg_catalog.sha256(pg_catalog.convert_to(m.fact_text, 'UTF8')) = memory_vectors.content_hash));
CREATE POLICY admin_read ON memgov.memory_vectors TO memgov_admin USING (true);

-- Removes the vectors of the memories a DELETE statement removed (forget, forget_where,
-- the sweep, a refused held INSERT): one join over the statement's rows.
CREATE FUNCTION memgov.drop_vectors()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE memgov.memory_vectors;
    ELSE
        DELETE FROM memgov.memory_vectors v
         USING gone g
         WHERE v.memory_id = g.memory_id AND v.org_id = g.org_id;
    END IF;
    RETURN NULL;
END
$$;

-- Every role's DELETE and TRUNCATE, replica mode included (ENABLE ALWAYS): like the write
-- triggers, nothing switches them off.
CREATE TRIGGER drop_vectors AFTER DELETE ON memgov.long_term_memory_items
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.drop_vectors();
CREATE TRIGGER drop_vectors_truncated AFTER TRUNCATE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.drop_vectors();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER drop_vectors;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER drop_vectors_truncated;

-- Stores the vectors of one store item: row i of vectors (a two-dimensional array, one row
-- per path) embeds the field paths[i] of fact_text. Only a memory of the session's tenant the
-- caller may write: a pending one only in the transaction that wrote it (memgov.written_here),
-- an active one when the tenant's get rules let the caller read it (row level security's
-- governed_updates). Only in the transaction of the put: fact_text is the text a decision
-- logged in this transaction stored (the memory's decision_id) or held (a pending update's
-- request). Replaces the vectors of that text, and drops those of texts the memory no longer
-- holds nor waits for. Returns the count stored.
CREATE FUNCTION memgov.store_vectors(memory_id uuid, fact_text text, paths text[], vectors real[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_memory_id  uuid := $1;
    v_text       text := $2;
    v_paths      text[] := $3;
    v_vectors    real[] := $4;
    v_org        text := memgov.session_tenant();
    v_item       memgov.long_term_memory_items;
    v_hash       bytea;
    v_held       bytea[];
    v_decided    boolean;
    v_xact       bigint := pg_current_xact_id()::text::bigint;
    v_count      integer;
BEGIN
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = v_memory_id AND m.org_id = v_org
       FOR UPDATE;
    -- what the caller may not see looks like what does not exist (as for a SELECT)
    IF v_item.memory_id IS NULL
       OR (v_item.status = 'pending_approval' AND NOT memgov.written_here(v_item))
       OR (v_item.status = 'active' AND memgov.reads_governed(v_org)
           AND NOT memgov.get_allowed(v_item) AND NOT memgov.written_here(v_item)) THEN
        PERFORM memgov.check_found('memory', v_memory_id, NULL);
    END IF;
    IF v_text IS NULL OR v_paths IS NULL OR v_vectors IS NULL THEN
        RAISE EXCEPTION 'memgov: store_vectors needs a text, paths and vectors' USING ERRCODE = '22023';
    END IF;
    v_hash := sha256(convert_to(v_text, 'UTF8'));
    -- the texts of the memory's held updates: what it may hold once a reviewer approves
    SELECT coalesce(array_agg(sha256(convert_to(r.payload ->> 'fact_text', 'UTF8'))), '{}') INTO v_held
      FROM memgov.approval_requests r
     WHERE r.memory_id = v_memory_id AND r.org_id = v_org AND r.status = 'pending'
       AND r.operation = 'update' AND r.payload ? 'fact_text';
    IF cardinality(v_paths) > 0 AND (array_ndims(v_vectors) IS DISTINCT FROM 2
                                     OR array_length(v_vectors, 1) <> cardinality(v_paths)
                                     OR array_length(v_vectors, 2) > 16000) THEN
        RAISE EXCEPTION 'memgov: vectors must be one row per path (% paths), of at most 16000 dimensions',
                        cardinality(v_paths)
            USING ERRCODE = '22023';
    END IF;
    IF array_position(v_paths, NULL) IS NOT NULL
       OR (SELECT count(DISTINCT p) <> count(*) FROM unnest(v_paths) AS p)
       OR EXISTS (SELECT FROM unnest(v_vectors) AS x
                   WHERE x IS NULL OR x IN ('NaN'::real, 'Infinity'::real, '-Infinity'::real)) THEN
        RAISE EXCEPTION 'memgov: paths must be distinct and not NULL, vectors finite numbers'
            USING ERRCODE = '22023';
    END IF;
    -- the write this transaction's decision stored (the row's decision) or held (a request's)
    IF v_text = v_item.fact_text THEN
        v_decided := EXISTS (SELECT FROM memgov.decision_log d
                              WHERE d.org_id = v_org AND d.decision_id = v_item.decision_id AND d.xact_id = v_xact);
    END IF;
    IF NOT coalesce(v_decided, false) THEN
        v_decided := EXISTS (SELECT FROM memgov.approval_requests r
                               JOIN memgov.decision_log d ON d.org_id = r.org_id AND d.decision_id = r.decision_id
                              WHERE r.memory_id = v_memory_id AND r.org_id = v_org AND r.status = 'pending'
                                AND r.operation = 'update' AND r.payload ->> 'fact_text' = v_text
                                AND d.xact_id = v_xact);
    END IF;
    IF NOT v_decided THEN
        RAISE EXCEPTION 'memgov: no write of this transaction stored or held this text of memory %', v_memory_id
            USING ERRCODE = '42501',
                  HINT = 'a put stores its vectors in its own transaction, right after the write memgov decided';
    END IF;
    -- the previous vectors of this text, and those of texts that can no longer be the memory's
    DELETE FROM memgov.memory_vectors v
     WHERE v.memory_id = v_memory_id AND v.org_id = v_org
       AND (v.content_hash = v_hash
            OR NOT (v.content_hash = sha256(convert_to(v_item.fact_text, 'UTF8')) OR v.content_hash = ANY (v_held)));
    INSERT INTO memgov.memory_vectors (memory_id, org_id, content_hash, path, vector, norm)
    SELECT v_memory_id, v_org, v_hash, v_paths[i], r.vector,
           (SELECT sqrt(coalesce(sum(x::float8 * x), 0)) FROM unnest(r.vector) AS x)
      FROM generate_subscripts(v_paths, 1) AS i
     CROSS JOIN LATERAL (SELECT v_vectors[i:i][:] AS slice) s
     CROSS JOIN LATERAL (SELECT ARRAY(SELECT unnest(s.slice)) AS vector) r;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- A semantic search of the session's tenant's store items under a namespace prefix ('' for
-- all; whole labels) that pass every filter (as the store's search: {path, op, val}, $eq $ne
-- by JSON equality, $gt $gte $lt $lte between values of the same JSON type), ranked by the
-- best of each item's vectors of its current text against query (the query's dimensions
-- only), best first; ties newest first. score as PostgresStore reports it: cosine
-- similarity (0 for a zero vector), the inner product, or minus the L2 distance. Runs as its
-- caller: row level security holds it to the tenant and its get rules, and the tenant and
-- namespace narrow the rows before a distance is computed.
CREATE FUNCTION memgov.store_vector_search(
    prefix text, query double precision[], distance text DEFAULT 'cosine',
    filters jsonb DEFAULT '[]', "limit" integer DEFAULT 10, "offset" integer DEFAULT 0)
RETURNS TABLE (namespace text, key text, value text, created_at timestamptz, updated_at timestamptz,
               score double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_prefix    text := coalesce($1, '');
    v_query     double precision[] := $2;
    v_distance  text := $3;
    v_filters   jsonb := coalesce($4, '[]');
    v_org       text := memgov.session_tenant();
    v_qnorm     double precision;
    v_dims      integer := cardinality($2);
BEGIN
    IF v_distance IS NULL OR v_distance NOT IN ('cosine', 'inner_product', 'l2') THEN
        RAISE EXCEPTION 'memgov: distance must be cosine, inner_product or l2, not %', v_distance
            USING ERRCODE = '22023';
    END IF;
    IF array_ndims(v_query) IS DISTINCT FROM 1 OR array_position(v_query, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'memgov: the query vector must be one row of numbers' USING ERRCODE = '22023';
    END IF;
    v_qnorm := (SELECT sqrt(sum(x * x)) FROM unnest(v_query) AS x);
    -- Each vector's dot product with the query is a scalar subquery over the two arrays side
    -- by side (measured: half the cost of the same sum as a LATERAL join); an item's score is
    -- the best of its vectors of its current text.
    RETURN QUERY
    SELECT s.namespace, s.item_key, s.fact_text, s.created_at, s.updated_at, s.score
      FROM (SELECT m.namespace, m.item_key, m.fact_text, m.created_at, m.updated_at,
                   (SELECT max(CASE v_distance
                               WHEN 'cosine' THEN CASE WHEN d.norm > 0 AND v_qnorm > 0
                                                       THEN d.dot / (d.norm * v_qnorm) ELSE 0 END
                               WHEN 'inner_product' THEN d.dot
                               -- |v - q|² = |v|² + |q|² - 2 v·q, never below 0 by rounding
                               ELSE -sqrt(greatest(d.norm * d.norm + v_qnorm * v_qnorm - 2 * d.dot, 0))
                               END)
                      FROM (SELECT v.norm, (SELECT sum(e.x * e.y) FROM unnest(v.vector, v_query) AS e(x, y)) AS dot
                              FROM memgov.memory_vectors v
                             WHERE v.memory_id = m.memory_id AND v.org_id = m.org_id
                               AND v.content_hash = sha256(convert_to(m.fact_text, 'UTF8'))
                               AND cardinality(v.vector) = v_dims) d) AS score
              FROM memgov.long_term_memory_items m
             WHERE m.org_id = v_org AND m.namespace IS NOT NULL
               AND (v_prefix = '' OR m.namespace = v_prefix OR starts_with(m.namespace, v_prefix || '.'))
               AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
               AND NOT EXISTS (
                   SELECT FROM jsonb_to_recordset(v_filters) AS f(path text, op text, val jsonb)
                    CROSS JOIN LATERAL (SELECT (m.fact_text::jsonb) -> f.path AS x) j
                    WHERE NOT coalesce(CASE f.op
                                           WHEN '$eq' THEN j.x = f.val
                                           WHEN '$ne' THEN j.x <> f.val
                                           WHEN '$gt' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x > f.val
                                           WHEN '$gte' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x >= f.val
                                           WHEN '$lt' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x < f.val
                                           WHEN '$lte' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x <= f.val
                                       END, false))
            OFFSET 0) s  -- a fence: pulled up, the score would be computed twice (output, filter)
     WHERE s.score IS NOT NULL
     ORDER BY s.score DESC, s.updated_at DESC, s.namespace, s.item_key
     LIMIT $5 OFFSET $6;
END
$$;

-- Writers store vectors of their puts; every client role searches (as itself).
GRANT EXECUTE ON FUNCTION memgov.store_vectors(uuid, text, text[], real[]) TO memgov_writer;
GRANT EXECUTE ON FUNCTION memgov.store_vector_search(text, double precision[], text, jsonb, integer, integer)
    TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;
