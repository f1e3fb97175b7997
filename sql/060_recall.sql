-- memgov: governed reads. What an agent recalls is decided by the active policy, the
-- way a write is (docs/recall.md):
--
--   memgov.search(query)   the session tenant's memories that match a query, best first:
--                          the search is decided once (operation search), then every
--                          candidate (operation get); the candidates a get decision
--                          refuses are withheld and counted
--   memgov.get(memory_id)  one memory, decided as a get
--   SELECT                 row level security shows a writer or reviewer only the rows a
--                          get decision allows, and pending rows to reviewers only
--
-- A policy decides reads only when one of its rules names search or get
-- (memgov.reads_governed, generated from the settings' "reads"): under any other
-- policy every active memory of the tenant is readable, as before reads were governed,
-- and no get decision is taken. Each search and each get is logged (one row, with a
-- salted fingerprint of the query instead of its text, and the counts returned and
-- withheld). Pending, quarantined and expired memories are never recalled.
--
-- SQLSTATEs: MG403 read denied (error), MG203 read held for approval (notice),
-- MG204 read quarantined (notice): a held or quarantined read returns nothing and
-- is filed for reviewers to see (never replayed); 22023 a malformed query; 42501
-- no tenant.

SET ROLE memgov_owner;

-- What memgov.search and memgov.get return: a memory's columns (not the engine's search
-- columns) and its score (memgov.recall_score; NULL from get).
CREATE TYPE memgov.recalled AS (
    memory_id          uuid,
    org_id             text,
    project_id         text,
    agent_id           text,
    subject_id         text,
    session_id         text,
    category           text,
    fact_text          text,
    source             text,
    confidence         numeric(4,3),
    is_sensitive       boolean,
    retention_policy   text,
    context_source     text,
    metadata           jsonb,
    created_at         timestamptz,
    updated_at         timestamptz,
    last_confirmed_at  timestamptz,
    expires_at         timestamptz,
    policy_version     text,
    decision_id        bigint,
    score              double precision
);

CREATE FUNCTION memgov.recalled_of(p_item memgov.long_term_memory_items, p_score double precision)
RETURNS memgov.recalled
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id, p_item.subject_id,
               p_item.session_id, p_item.category, p_item.fact_text, p_item.source, p_item.confidence,
               p_item.is_sensitive, p_item.retention_policy, p_item.context_source, p_item.metadata,
               p_item.created_at, p_item.updated_at, p_item.last_confirmed_at, p_item.expires_at,
               p_item.policy_version, p_item.decision_id, p_score)::memgov.recalled
$$;

-- A search result's score: how well the text matches (ts_rank_cd, normalised to 0..1 by
-- rank / (rank + 1); 1 for a search without text), weighted by confidence (0.5 at
-- confidence 0, 1 at confidence 1) and by freshness (halved every 30 days since the memory
-- last changed or was confirmed). (SQL, so that the planner inlines it into the ranking.)
CREATE FUNCTION memgov.recall_score(
    p_rank real, p_confidence numeric, p_updated_at timestamptz, p_last_confirmed_at timestamptz)
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_rank::float8
           * (0.5 + 0.5 * p_confidence::float8)
           * pg_catalog.power(0.5::float8,
                 GREATEST(pg_catalog.date_part('epoch', pg_catalog.now() - GREATEST(p_updated_at, p_last_confirmed_at)), 0)
                 / 2592000.0)
$$;

-- The tenant a recall reads: the session's (memgov.org_id), which the caller may act in.
CREATE FUNCTION memgov.recall_tenant()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id  text := nullif(current_setting('memgov.org_id', true), '');
BEGIN
    IF v_org_id IS NULL THEN
        RAISE EXCEPTION 'memgov: a recall reads the session''s tenant, and memgov.org_id is not set'
            USING ERRCODE = '42501',
                  HINT = 'SET memgov.org_id to the tenant you act in';
    END IF;
    RETURN memgov.check_tenant(v_org_id);
END
$$;

-- A recall query, checked and normalised: keys project_id, agent_id, subject_id,
-- session_id, context_source, text (strings), categories (a list of strings, or one),
-- min_confidence (0..1), limit (1..1000, default 20). A key whose value is null is left
-- out; every other malformed query raises 22023 naming the key.
CREATE FUNCTION memgov.recall_query(p_query jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_keys    constant text[] := ARRAY['project_id', 'agent_id', 'subject_id', 'session_id', 'context_source',
                                       'text', 'categories', 'min_confidence', 'limit'];
    v_query   jsonb := jsonb_strip_nulls(coalesce(p_query, '{}'::jsonb));
    v_key     text;
    v_value   jsonb;
BEGIN
    IF jsonb_typeof(v_query) <> 'object' THEN
        RAISE EXCEPTION 'memgov: a recall query must be a JSON object, got %', jsonb_typeof(v_query)
            USING ERRCODE = '22023', HINT = 'e.g. {"text": "coffee", "project_id": "atlas", "limit": 5}';
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(v_query) AS e LOOP
        IF v_key <> ALL (v_keys) THEN
            RAISE EXCEPTION 'memgov: unknown key "%" in a recall query', v_key
                USING ERRCODE = '22023', HINT = 'the keys are ' || array_to_string(v_keys, ', ');
        END IF;
        IF v_key = 'categories' THEN
            IF jsonb_typeof(v_value) = 'string' THEN
                v_value := jsonb_build_array(v_value);
                v_query := jsonb_set(v_query, '{categories}', v_value);
            END IF;
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0
               OR EXISTS (SELECT FROM jsonb_array_elements(v_value) AS c WHERE jsonb_typeof(c) <> 'string') THEN
                RAISE EXCEPTION 'memgov: categories in a recall query must be a non-empty list of strings'
                    USING ERRCODE = '22023', HINT = 'e.g. "categories": ["preference", "user_fact"]';
            END IF;
        ELSIF v_key = 'min_confidence' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::numeric NOT BETWEEN 0 AND 1 THEN
                RAISE EXCEPTION 'memgov: min_confidence in a recall query must be a number from 0 to 1, got %', v_value
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_key = 'limit' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::numeric <> trunc(v_value::numeric)
               OR v_value::numeric NOT BETWEEN 1 AND 1000 THEN
                RAISE EXCEPTION 'memgov: limit in a recall query must be a whole number from 1 to 1000, got %', v_value
                    USING ERRCODE = '22023';
            END IF;
            v_query := jsonb_set(v_query, '{limit}', to_jsonb(v_value::numeric::integer));  -- 5.0 is 5
        ELSIF jsonb_typeof(v_value) <> 'string' THEN
            RAISE EXCEPTION 'memgov: % in a recall query must be a string, got %', v_key, jsonb_typeof(v_value)
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    RETURN jsonb_build_object('limit', 20) || v_query;
END
$$;

-- The item a search is decided on: the query's scope, context and min_confidence as the
-- item's columns, its text as fact_text (what the detectors read), its category when it
-- names exactly one; no source.
CREATE FUNCTION memgov.search_item(p_org_id text, p_query jsonb)
RETURNS memgov.long_term_memory_items
LANGUAGE sql STABLE
AS $$
    SELECT memgov.item_from_json(jsonb_build_object(
        'org_id', p_org_id,
        'project_id', p_query ->> 'project_id',
        'agent_id', p_query ->> 'agent_id',
        'subject_id', p_query ->> 'subject_id',
        'session_id', p_query ->> 'session_id',
        'context_source', p_query ->> 'context_source',
        'category', CASE WHEN jsonb_array_length(p_query -> 'categories') = 1 THEN p_query -> 'categories' ->> 0 END,
        'fact_text', p_query ->> 'text',
        'confidence', p_query -> 'min_confidence'))
$$;

-- The decision on a read: the active policy's when it governs reads, else an allow that
-- says so (READS_NOT_GOVERNED), with the tenant's policy version and mode.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.read_decision(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_settings  jsonb;
BEGIN
    IF memgov.reads_governed(p_item.org_id) THEN
        RETURN memgov.decide(p_item, p_operation, p_actor);
    END IF;
    v_settings := memgov.policy_settings(p_item.org_id);
    RETURN memgov.ungoverned_read(v_settings ->> 'version', v_settings ->> 'mode');
END
$$;

-- A query's fingerprint in the log: sha256 of the database's secret and the normalised
-- query, so that equal queries share it and nobody outside the database can test a guess.
CREATE FUNCTION memgov.query_fingerprint(p_query jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(s.secret || ':' || p_query::text, 'UTF8')), 'hex')
      FROM memgov.channel_secret s
$$;

-- What the last recall of this transaction did, for clients that cannot read the log:
-- memgov.last_recall holds {"decision_id", "action", "enforced", "returned", "withheld", ...}
-- ("withheld" is null for a role that cannot read the log, where reads are governed).
CREATE FUNCTION memgov.note_recall(p_outcome jsonb)
RETURNS void
LANGUAGE sql
AS $$
    SELECT FROM pg_catalog.set_config('memgov.last_recall', p_outcome::text, true)
$$;

-- A governed read writes its decision-log row, which a read-only transaction cannot. On a
-- hot standby (pg_is_in_recovery()) whose standby logger is set up
-- (memgov.standby_logger_ready, sql/065_standby_reads.sql) the primary writes it for the
-- standby: the read goes on. Anywhere else read-only (a standby without the logger, a READ
-- ONLY transaction) it is refused up front with SQLSTATE 25006 and the remedy, rather than
-- fail in the middle on the log's INSERT. (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.refuse_read_only(p_operation text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        RETURN;
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        IF memgov.standby_logger_ready() THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'memgov: % is a governed read: it logs its decision, and this server is a standby (read-only) without a standby logger',
                        p_operation
            USING ERRCODE = '25006',
                  HINT = 'send memgov.search and memgov.get to the primary, or let the primary log this standby''s reads: '
                         'memgov standby-logger setup, run on the primary (docs/operations.md, "Reads on a standby")';
    END IF;
    RAISE EXCEPTION 'memgov: % is a governed read: it logs its decision, and this transaction is read-only', p_operation
        USING ERRCODE = '25006',
              HINT = 'run it in a read-write transaction (default_transaction_read_only, SET TRANSACTION READ WRITE)';
END
$$;

-- The session tenant's memories that match a query, best first (memgov.recall_score),
-- each allowed by a get decision. Examines candidates in score order until `limit` are
-- allowed or the matches run out.
CREATE FUNCTION memgov.search(query jsonb DEFAULT '{}')
RETURNS SETOF memgov.recalled
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id       text := memgov.recall_tenant();
    v_query        jsonb := memgov.recall_query(query);
    v_actor        text := memgov.invoker_role();
    v_governed     boolean := memgov.reads_governed(v_org_id);
    v_limit        integer := (v_query ->> 'limit')::integer;
    v_categories   text[] := ARRAY(SELECT jsonb_array_elements_text(v_query -> 'categories'));
    v_min          numeric := (v_query ->> 'min_confidence')::numeric;
    v_project_id   text := v_query ->> 'project_id';
    v_agent_id     text := v_query ->> 'agent_id';
    v_subject_id   text := v_query ->> 'subject_id';
    v_session_id   text := v_query ->> 'session_id';
    v_asked        memgov.long_term_memory_items := memgov.search_item(v_org_id, v_query);
    v_shadow       memgov.shadow_verdict;
    v_text         tsquery;
    v_decision     memgov.decision;
    v_get          memgov.decision;
    v_cursor       refcursor;
    v_candidate    record;
    v_offset       integer := 0;
    v_batch        integer;
    v_examined     integer;
    v_returned     integer := 0;
    v_withheld     integer := 0;
    v_id           bigint;
    v_outcome      jsonb;
BEGIN
    PERFORM memgov.refuse_read_only('memgov.search');
    v_decision := memgov.read_decision(v_asked, 'search', v_actor);
    v_shadow := memgov.judge_shadow('search', v_asked, NULL, v_actor);
    IF v_decision.enforced AND v_decision.action <> 'allow' THEN
        -- logged, filed and announced (MG403 raises; a hold or quarantine returns nothing)
        v_outcome := (memgov.govern('search', v_asked, v_actor, v_decision, v_shadow,
                                    p_payload => jsonb_build_object('query', v_query),
                                    p_fingerprint => memgov.query_fingerprint(v_query),
                                    p_returned => 0, p_withheld => 0)).decision;
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    IF v_query ? 'text' THEN
        v_text := websearch_to_tsquery(memgov.search_config(v_org_id), v_query ->> 'text');
    END IF;

    -- candidates are read in batches, best first, until `limit` are allowed or the matches
    -- run out: never fewer because of how many rows were withheld (a cap on the candidates
    -- examined would make what a search returns tell of the rows it may not return)
    v_batch := v_limit;
    -- a text without a word to match matches nothing
    WHILE v_text IS NULL OR numnode(v_text) > 0 LOOP
        -- two static queries, so that each keeps its plan: with a text the index finds the matches
        IF v_text IS NULL THEN
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(1, m.confidence, m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        ELSE
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(ts_rank_cd(m.search_vector, v_text, 32), m.confidence,
                                           m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.search_vector @@ v_text
                   AND m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        END IF;
        v_examined := 0;
        LOOP
            FETCH v_cursor INTO v_candidate;
            EXIT WHEN NOT FOUND;
            v_examined := v_examined + 1;
            IF v_governed THEN
                v_get := memgov.decide(v_candidate.item, 'get', v_actor);
                IF v_get.action <> 'allow' THEN
                    v_withheld := v_withheld + 1;
                    -- monitor mode returns it and counts what would have been withheld
                    CONTINUE WHEN v_get.enforced;
                END IF;
            END IF;
            v_returned := v_returned + 1;
            RETURN NEXT memgov.recalled_of(v_candidate.item, v_candidate.score);
            EXIT WHEN v_returned = v_limit;
        END LOOP;
        CLOSE v_cursor;
        v_offset := v_offset + v_examined;
        EXIT WHEN v_returned = v_limit OR v_examined < v_batch;
        v_batch := v_batch * 2;  -- the rows past a withheld stretch, in ever larger batches
    END LOOP;

    v_id := (memgov.govern('search', v_asked, v_actor, v_decision, v_shadow,
                           p_fingerprint => memgov.query_fingerprint(v_query),
                           p_returned => v_returned, p_withheld => v_withheld)).decision_id;
    -- how many candidates were withheld tells of rows the caller may not read (a search for
    -- a word, or a min_confidence, per probe): only a role that reads the log is told, and
    -- everyone where reads are not governed (nothing is withheld: the count is always 0)
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'returned', v_returned,
                              'withheld', CASE WHEN NOT v_governed
                                                    OR pg_catalog.has_table_privilege(v_actor, 'memgov.decision_log', 'SELECT')
                                               THEN v_withheld END));
END
$$;

-- One memory of the session's tenant, decided as a get: its row, or no row when there is
-- no such active memory (another tenant's, a pending or an expired one included).
CREATE FUNCTION memgov.get(memory_id uuid)
RETURNS SETOF memgov.recalled
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id    text := memgov.recall_tenant();
    v_actor     text := memgov.invoker_role();
    v_item      memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_allowed   boolean;
    v_outcome   jsonb;
BEGIN
    PERFORM memgov.refuse_read_only('memgov.get');
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = get.memory_id AND m.org_id = v_org_id AND m.status = 'active'
       AND (m.expires_at IS NULL OR m.expires_at > now());
    IF NOT FOUND THEN
        PERFORM memgov.note_recall(jsonb_build_object('decision_id', NULL, 'returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    v_decision := memgov.read_decision(v_item, 'get', v_actor);
    v_shadow := memgov.judge_shadow('get', v_item, NULL, v_actor);
    v_allowed := NOT v_decision.enforced OR v_decision.action = 'allow';
    -- logged; a refusal also filed and announced (MG403 raises)
    v_outcome := (memgov.govern('get', v_item, v_actor, v_decision, v_shadow,
                                p_payload => jsonb_build_object('memory_id', v_item.memory_id),
                                p_returned => CASE WHEN v_allowed THEN 1 ELSE 0 END,
                                p_withheld => CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END)).decision;
    IF NOT v_allowed THEN
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 1));
        RETURN;
    END IF;
    PERFORM memgov.note_recall(v_outcome
        || jsonb_build_object('returned', 1, 'withheld', CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END));
    RETURN NEXT memgov.recalled_of(v_item, NULL);
END
$$;

-- Row level security of a direct SELECT ------------------------------------------------

-- The mark the write trigger leaves on a row that its writer may not read back (a pending
-- memory, or one the tenant's get rules withhold), so that the INSERT or UPDATE ...
-- RETURNING of that very row still sees it: a hash, under the session's secret
-- (memgov.session_key), of the row version as the trigger let it through (tenant,
-- memory_id, and the decision_id that only this write's decision has), in a
-- transaction-local setting. A client can set the setting, never compute a valid value.
-- The mark opens that row version only: a row another session commits under the same
-- memory_id (an upsert that lost, a write rolled back to a savepoint) names another
-- decision, and so does the existing row an INSERT ... ON CONFLICT DO UPDATE would change.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.row_token(p_item memgov.long_term_memory_items, p_key bigint)
RETURNS text
LANGUAGE sql IMMUTABLE
RETURN pg_catalog.hashtextextended(p_item.decision_id::text || ':' || p_item.memory_id::text || ':' || p_item.org_id,
                                   p_key)::text;

-- Whether this row version is the one this transaction's write trigger just let through.
-- (A session without a key has no mark: whatever a client set is not one.)
CREATE FUNCTION memgov.written_here(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mark  text := current_setting('memgov.written', true);
BEGIN
    IF v_mark IS NULL OR v_mark = '' THEN
        RETURN false;
    END IF;
    RETURN v_mark = memgov.row_token(p_item, pg_catalog.currval('memgov.session_key'));
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN false;
END
$$;

-- Whether the active policy lets the querying role read a row of the session's tenant
-- (a get decision; monitor mode lets everything through). Row level security calls it
-- only for a tenant whose policy governs reads; a row of another tenant is never readable
-- (so that it tells a client nothing about another tenant's policy).
CREATE FUNCTION memgov.get_allowed(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_decision  memgov.decision;
BEGIN
    IF p_item.org_id IS DISTINCT FROM memgov.session_tenant() THEN
        RETURN false;
    END IF;
    v_decision := memgov.decide(p_item, 'get', memgov.invoker_role());
    RETURN NOT v_decision.enforced OR v_decision.action = 'allow';
END
$$;

-- Whether a writer or reviewer may read a row of its tenant: pending rows are the
-- reviewers' (and the RETURNING of the write that made one), the tenant's get rules decide
-- the others. Everything it asks is a function of the row (the row's tenant, not the
-- session's setting, which a statement may change while it runs; tenant_isolation has
-- fixed the tenant for the statement already). Under a policy that does not govern reads,
-- reads_governed is the constant false and the test costs next to nothing. A SQL-standard
-- body (its names bound when it was created, whatever the caller's search_path), which
-- the planner inlines into the row level security policies below; p_item is read only
-- where a get decision is asked for.
CREATE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN p_status = 'pending_approval'
            THEN pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') OR memgov.written_here(p_item)
            WHEN memgov.reads_governed(p_org_id)
            THEN memgov.get_allowed(p_item) OR memgov.written_here(p_item)
            ELSE true
       END;

-- Read classes: a get decision depends on the row (its columns, detectors, risk score) and,
-- through context.actor conditions only, on who reads. A policy whose reads can be decided
-- ahead (memgov_pg/read_compiler.py: no rule that compares a time with now(), at most two
-- context.actor conditions) has a compiled function memgov.policy_<h>_read that gives a
-- row its read class, a mask of 4 bits (bit r: a reader of class r may read it), and a
-- reader its class (0..3: which of those conditions it meets). The write trigger stores
-- memgov.read_class(row) with every row it lets through, engine writes included:
-- read_class = epoch << 32 | mask, the epoch naming the policy version that decided it
-- (policy_versions.read_epoch, never reused). A client never writes it (no column grant,
-- and the trigger computes it over whatever a statement says).
--
-- Row level security then asks, per row, whether its read_class is one of the classes the
-- querying role may read in its tenant under the tenant's current version, or one it may
-- not (memgov.read_classes, once per statement): both lists carry the current epoch, so a
-- class decided by another version (a deploy, a rollback, a tenant override since) is in
-- neither, and that row is decided as before (memgov.readable) until the deploy's
-- recomputation reaches it. Pending rows, rows without a class, and rows of another tenant
-- than the session's are decided by memgov.readable alone, and so is every row where reads
-- are not governed: there reads_governed is the constant false, and the planner reduces
-- this test to readable's constant CASE, which never reads read_class (the table's last
-- column, which a scan would otherwise unpack every column of a row to reach). A
-- SQL-standard body the planner inlines; each list and the tenant come from an
-- uncorrelated subquery (an initPlan, evaluated once per statement), named once in the
-- body so that it stays inlinable.
CREATE FUNCTION memgov.read_allowed(p_status text, p_org_id text, p_read_class bigint,
                                    p_item memgov.long_term_memory_items,
                                    p_tenant text, p_allowed bigint[], p_refused bigint[])
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN NOT memgov.reads_governed(p_org_id)  -- a constant where no policy sets tenants apart
                 OR p_read_class IS NULL OR p_status = 'pending_approval' OR p_org_id IS DISTINCT FROM p_tenant
            THEN memgov.readable(p_status, p_org_id, p_item)
            WHEN p_read_class = ANY (p_allowed) THEN true
            WHEN p_read_class = ANY (p_refused) THEN memgov.written_here(p_item)
            ELSE memgov.readable(p_status, p_org_id, p_item)
       END;

-- On top of tenant_isolation (sql/010_schema.sql): a writer or reviewer reads only the
-- rows it may read, and changes only those (else an UPDATE without a WHERE clause, which
-- row level security lets through unread, would reach a row its writer cannot see).
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.read_allowed(status, org_id, read_class, long_term_memory_items, (SELECT memgov.session_tenant()),
                               (SELECT memgov.read_classes(true)), (SELECT memgov.read_classes(false))));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.read_allowed(status, org_id, read_class, long_term_memory_items, (SELECT memgov.session_tenant()),
                               (SELECT memgov.read_classes(true)), (SELECT memgov.read_classes(false))))
    WITH CHECK (true);
-- An expired memory is gone for its readers from the moment it expires, swept or not
-- (memgov.search and memgov.get skip it themselves): a writer's or reviewer's SELECT does not
-- see it, and an UPDATE does not reach it (a write would start its TTL again, sql/075_ttl.sql).
CREATE POLICY unexpired_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (expires_at IS NULL OR expires_at > pg_catalog.now());
CREATE POLICY unexpired_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (expires_at IS NULL OR expires_at > pg_catalog.now())
    WITH CHECK (true);

-- Privileges: recall is every memgov role's; row level security calls read_allowed,
-- readable, reads_governed (executable, to be inlined), get_allowed, written_here and
-- read_classes as the querying role. Everything else here is the engine's.
GRANT EXECUTE ON FUNCTION memgov.search(jsonb), memgov.get(uuid)
    TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.readable(text, text, memgov.long_term_memory_items),
                          memgov.reads_governed(text), memgov.get_allowed(memgov.long_term_memory_items),
                          memgov.written_here(memgov.long_term_memory_items),
                          memgov.read_allowed(text, text, bigint, memgov.long_term_memory_items, text, bigint[], bigint[]),
                          memgov.read_classes(boolean)
    TO memgov_writer, memgov_reviewer;

RESET ROLE;
