-- memgov: where the sweep finds the memories an auto_delete rule may match (sql/070_retention.sql
-- runs the sweep; this file says which rows each of its auto_delete batches reads).
--
-- auto_delete rules are arbitrary predicates, but nearly every one bounds what it deletes by
-- confidence ("confidence lt 0.3 and ...") or by age ("created_at older_than 30 days and ...").
-- Two partial indexes (sql/010_schema.sql) hold the rows such a rule can match:
--
--   long_term_memory_items_low_confidence_idx  (confidence, memory_id) where confidence <= 0.5
--   long_term_memory_items_created_at_idx      (created_at, memory_id)
--
-- both over the rows an automatic process may delete (not permanent_until_revoked). A rule
-- whose conditions must all hold (match all, or a single test) and that tests confidence
-- below a bound at most 0.5, or created_at before an instant, is anchored in one of them:
-- its rows lie in a range of that index. When every active auto_delete rule is anchored, a
-- run reads those ranges, in key order, and nothing else: its cost follows the candidates,
-- not the table. A rule that no index bounds (match any, a category alone, confidence above
-- 0.5, ...) makes the run walk the whole table in physical order instead, as before.

SET ROLE memgov_owner;

-- The highest confidence that an auto_delete rule of an active policy can match, NULL when
-- some such rule may match any: each rule that must pass all its tests (match all, or a
-- single test) and tests `confidence lt|lte X` is bounded by X. Read from the versions' rule
-- rows, it lets the walk pass over rows above it without calling the policy (the default
-- policy deletes below 0.3 only).
CREATE FUNCTION memgov.auto_delete_confidence_bound()
RETURNS numeric
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN bool_and(b.bound IS NOT NULL) THEN max(b.bound) END
      FROM (SELECT (SELECT min((c ->> 'value')::numeric)
                      FROM jsonb_array_elements(r.condition -> 'conditions') AS c
                     WHERE (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
                       AND c ->> 'field' = 'confidence' AND c ->> 'operator' IN ('lt', 'lte')
                       AND jsonb_typeof(c -> 'value') = 'number') AS bound
              FROM memgov.memory_policy_rules r
              JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
             WHERE v.active AND r.action = 'auto_delete') AS b
$$;

-- The index range that holds every memory each active auto_delete rule can match, a row per
-- rule: anchor 'confidence' (confidence <= confidence_bound), 'created_at' (created_at <=
-- created_bound) or NULL (no index bounds the rule: the table must be walked). Confidence is
-- preferred: its index is the smaller. A created_at bound is `now() - <older_than>` or the
-- instant the rule names; where a rule tests either field more than once, the tightest test bounds it.
CREATE FUNCTION memgov.auto_delete_anchors(OUT org_id text, OUT rule_id text, OUT anchor text,
                                           OUT confidence_bound numeric, OUT created_bound timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.org_id, r.rule_id,
           CASE WHEN c.bound <= 0.5 THEN 'confidence' WHEN t.bound IS NOT NULL THEN 'created_at' END,
           CASE WHEN c.bound <= 0.5 THEN c.bound END,
           CASE WHEN c.bound <= 0.5 THEN NULL ELSE t.bound END
      FROM memgov.memory_policy_rules r
      JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
     CROSS JOIN LATERAL (
           SELECT min((x ->> 'value')::numeric)
                      FILTER (WHERE x ->> 'field' = 'confidence' AND jsonb_typeof(x -> 'value') = 'number')
                      AS bound
             FROM jsonb_array_elements(r.condition -> 'conditions') AS x
            WHERE x ->> 'operator' IN ('lt', 'lte')) AS c
     CROSS JOIN LATERAL (
           SELECT min(CASE jsonb_typeof(x -> 'value')
                          WHEN 'object' THEN now() - (x -> 'value' ->> 'older_than')::interval
                          ELSE (x ->> 'value')::timestamptz END)
                      FILTER (WHERE x ->> 'field' = 'created_at'
                                AND (jsonb_typeof(x -> 'value') = 'string' OR x -> 'value' ? 'older_than'))
                      AS bound
             FROM jsonb_array_elements(r.condition -> 'conditions') AS x
            WHERE x ->> 'operator' IN ('lt', 'lte')) AS t
     WHERE v.active AND r.action = 'auto_delete'
       -- a rule whose tests are alternatives (match any) is bounded by none of them
       AND (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
    UNION ALL
    SELECT r.org_id, r.rule_id, NULL, NULL, NULL
      FROM memgov.memory_policy_rules r
      JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
     WHERE v.active AND r.action = 'auto_delete'
       AND NOT (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
$$;

-- Picks and locks one batch of the auto_delete step (for memgov.sweep_batch, which deletes and
-- logs it): the locked rows, their ids, tenants and rules, and whether the step goes on.
-- Where the run is lives in its summary (keys that memgov.finish_maintenance drops).
--
-- A range is read in its index's key order from that key on (a full batch's last row is
-- deleted when the next batch looks, so `>=` reads it again as a dead entry only); a batch
-- that comes back short ends its range. (sort off: a batch wants its first rows in key
-- order, which the index gives; a sort would read the whole range for every batch.)
CREATE FUNCTION memgov.auto_delete_batch(p_run_id bigint, p_batch_size integer,
                                         OUT batch tid[], OUT ids uuid[], OUT orgs text[], OUT rules text[],
                                         OUT more boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_sort = off
AS $$
DECLARE
    v_cursor   jsonb;
    v_walk     boolean;
    v_conf     numeric;
    v_cut      timestamptz;
    v_step     text;
    v_keys     numeric[];
    v_times    timestamptz[];
    v_block    bigint;
    v_blocks   bigint;
    v_width    bigint;
    v_bound    numeric;
BEGIN
    PERFORM memgov.check_lease();
    more := false;
    SELECT bool_or(a.anchor IS NULL), max(a.confidence_bound), max(a.created_bound)
      INTO v_walk, v_conf, v_cut
      FROM memgov.auto_delete_anchors() AS a;
    IF v_walk IS NULL THEN
        RETURN;  -- no active policy has an auto_delete rule: nothing to read
    END IF;
    -- where the run is: the index range being read and its last key ('range'), or the walk's
    -- block and the blocks it walks ('cursor', 'blocks', which `memgov retention run` shows)
    SELECT CASE WHEN v_walk THEN jsonb_build_object('block', r.summary -> 'cursor', 'blocks', r.summary -> 'blocks')
                ELSE r.summary -> 'range' END
      INTO v_cursor
      FROM memgov.maintenance_runs r WHERE r.org_id = '*' AND r.run_id = p_run_id;

    IF NOT v_walk THEN
        v_step := coalesce(v_cursor ->> 'step', CASE WHEN v_conf IS NOT NULL THEN 'confidence' ELSE 'created_at' END);
        IF v_step = 'confidence' AND v_conf IS NULL THEN
            v_step := 'created_at';  -- the policy changed during the run: start the other range
            v_cursor := NULL;
        END IF;
        IF v_step = 'confidence' THEN
            -- (the partial index's own predicate is repeated, so that the planner may use it)
            SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id),
                   array_agg(b.confidence)
              INTO batch, ids, orgs, rules, v_keys
              FROM (SELECT d.ctid, d.memory_id, d.org_id, d.confidence, memgov.retention_rule(d) AS rule_id
                      FROM memgov.long_term_memory_items d
                     WHERE d.retention_policy <> 'permanent_until_revoked' AND d.confidence <= 0.5
                       AND d.confidence <= v_conf
                       AND (d.confidence, d.memory_id)
                           >= (coalesce((v_cursor ->> 'key')::numeric, -1),
                               coalesce((v_cursor ->> 'memory_id')::uuid, '00000000-0000-0000-0000-000000000000'))
                       AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                     ORDER BY d.confidence, d.memory_id
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED) AS b;
            v_cursor := CASE WHEN cardinality(batch) >= p_batch_size
                             THEN jsonb_build_object('step', 'confidence', 'key', v_keys[cardinality(v_keys)],
                                                     'memory_id', ids[cardinality(ids)])
                             WHEN v_cut IS NOT NULL THEN jsonb_build_object('step', 'created_at') END;
        ELSE
            SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id),
                   array_agg(b.created_at)
              INTO batch, ids, orgs, rules, v_times
              FROM (SELECT d.ctid, d.memory_id, d.org_id, d.created_at, memgov.retention_rule(d) AS rule_id
                      FROM memgov.long_term_memory_items d
                     WHERE d.retention_policy <> 'permanent_until_revoked'
                       AND d.created_at <= v_cut
                       AND (d.created_at, d.memory_id)
                           >= (coalesce((v_cursor ->> 'key')::timestamptz, '-infinity'),
                               coalesce((v_cursor ->> 'memory_id')::uuid, '00000000-0000-0000-0000-000000000000'))
                       AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                     ORDER BY d.created_at, d.memory_id
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED) AS b;
            v_cursor := CASE WHEN cardinality(batch) >= p_batch_size
                             THEN jsonb_build_object('step', 'created_at', 'key', v_times[cardinality(v_times)],
                                                     'memory_id', ids[cardinality(ids)]) END;
        END IF;
    ELSE
        -- some rule no index bounds: walk the table once per run in physical order (a TID range
        -- scan), up to the size the table had when the walk began. A batch reads at most four
        -- times p_batch_size rows' worth of blocks (reading is cheap, a batch's commit and
        -- bookkeeping are not) and takes at most p_batch_size of them; a full batch ends the
        -- step at the block of its last row
        v_block := (v_cursor ->> 'block')::bigint;
        v_blocks := (v_cursor ->> 'blocks')::bigint;
        IF v_block IS NULL OR v_blocks IS NULL THEN
            v_block := 0;
            v_blocks := pg_relation_size('memgov.long_term_memory_items') / current_setting('block_size')::bigint;
        END IF;
        v_bound := memgov.auto_delete_confidence_bound();
        SELECT greatest(1, ceil(4.0 * p_batch_size / CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                                    THEN c.reltuples / c.relpages ELSE 50 END))::bigint
          INTO v_width
          FROM pg_class c WHERE c.oid = 'memgov.long_term_memory_items'::regclass;
        -- (the rule is named from the locked version of the row)
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id)
          INTO batch, ids, orgs, rules
          FROM (SELECT d.ctid, d.memory_id, d.org_id, memgov.retention_rule(d) AS rule_id
                  FROM memgov.long_term_memory_items d
                 WHERE d.ctid >= ('(' || v_block || ',0)')::tid
                   AND d.ctid < ('(' || (v_block + v_width) || ',0)')::tid
                   AND (v_bound IS NULL OR d.confidence <= v_bound)
                   AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
        -- a TID range scan returns rows in ctid order: a full batch resumes at its last row's
        -- block (its rows are deleted by then; the block's others are read again, so each full
        -- batch moves on by p_batch_size deletions), any other ends the step
        v_block := CASE WHEN cardinality(batch) >= p_batch_size
                        THEN (batch[cardinality(batch)]::text::point)[0]::bigint
                        ELSE v_block + v_width END;
        more := v_block < v_blocks;
        UPDATE memgov.maintenance_runs
           SET summary = CASE WHEN more THEN summary || jsonb_build_object('cursor', v_block, 'blocks', v_blocks)
                              ELSE summary - 'cursor' - 'blocks' END
         WHERE org_id = '*' AND run_id = p_run_id;
        RETURN;
    END IF;
    more := v_cursor IS NOT NULL;
    UPDATE memgov.maintenance_runs
       SET summary = CASE WHEN more THEN summary || jsonb_build_object('range', v_cursor) ELSE summary - 'range' END
     WHERE org_id = '*' AND run_id = p_run_id;
END
$$;

-- admins may ask what bounds the auto_delete step: each rule's index range, or the walk's
-- confidence bound (rule rows they read anyway; memgov.auto_delete_batch is the sweep's alone)
GRANT EXECUTE ON FUNCTION memgov.auto_delete_confidence_bound(), memgov.auto_delete_anchors() TO memgov_admin;

RESET ROLE;
