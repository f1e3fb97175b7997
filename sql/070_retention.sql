-- memgov: retention (docs/retention.md). What is deleted, and when:
--
--   ttl_7d / ttl_30d, a ttl_minutes   expires_at (memgov.item_expiry) has passed   memgov.ttl_due
--   confidence_based    below the policy's confidence_floor for confidence_grace  memgov.confidence_due
--   any but permanent   an auto_delete rule of the tenant's active policy matches  memgov.auto_delete_due
--   permanent_until_revoked   never by any automatic process
--
-- unless a forget rule holds the memory (memgov.retention_held). The sweep, its dry run
-- (memgov.retention_preview) and memgov.apply_retention ask those same functions.
--
-- CALL memgov.run_maintenance() runs the sweep in batches of retention.batch_size,
-- each committed on its own (FOR UPDATE SKIP LOCKED: writers are never blocked
-- for long), expires stale approval requests, prunes its own pg_cron history,
-- and records a JSON summary in memgov.maintenance_runs. A lease that only memgov
-- can take (memgov.claim_maintenance) lets one run at a time proceed (per database); killing a run loses nothing, the
-- next one finishes the work and marks the killed one interrupted. Deletions
-- are logged without the memory's content.

SET ROLE memgov_owner;

-- Every deletion by retention, feedback or forgetting: which memories, why, by which rule;
-- never the text. One row per batch of the sweep and tenant (and rule): the ids of the
-- memories it deleted, so that a sweep writes one log row per few thousand deletions, not one
-- per deletion; memgov.apply_retention, a reject's deletion and memgov.forget write a row of
-- one id, memgov.forget_where a row of every memory it deleted. The GIN index finds
-- a memory's row: WHERE memory_ids @> ARRAY[<memory_id>].
CREATE TABLE memgov.deletion_log (
    deletion_id     bigint       GENERATED ALWAYS AS IDENTITY,
    deleted_at      timestamptz  NOT NULL DEFAULT now(),
    org_id          text         NOT NULL,
    reason          text         NOT NULL CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected', 'forgotten')),
    rule_id         text,
    policy_version  text,
    run_id          bigint,
    memory_count    integer      NOT NULL,
    memory_ids      uuid[]       NOT NULL,
    PRIMARY KEY (org_id, deletion_id),
    CHECK (memory_count = cardinality(memory_ids) AND memory_count > 0)
);
COMMENT ON TABLE memgov.deletion_log IS
    'Memories deleted by retention, rejection or forgetting, a row per batch and tenant: ids, reason, rule; '
    'never the content';
-- A batch's ids (16 random bytes each) do not compress: stored out of line as they are, not
-- after pglz has tried every array (a fifth of the log's INSERT, measured).
ALTER TABLE memgov.deletion_log ALTER COLUMN memory_ids SET STORAGE EXTERNAL;
CREATE INDEX deletion_log_deleted_at_idx ON memgov.deletion_log USING brin (deleted_at);
-- The GIN index takes a batch's ids into its pending list (cheap, sequential); merging that
-- list into the index is left to autovacuum, which the table's settings call for every 100
-- log rows (about half a million ids at the default batch_size), instead of to whichever
-- batch finds the list over the default 4 MB (a merge of some 130 000 ids inside a batch:
-- measured, a fifth of a 200 000-row sweep's time). A lookup reads the pending list whole:
-- at most 16 MB.
CREATE INDEX deletion_log_memory_ids_idx ON memgov.deletion_log USING gin (memory_ids)
    WITH (fastupdate = on, gin_pending_list_limit = 16384);
ALTER TABLE memgov.deletion_log SET (autovacuum_vacuum_insert_threshold = 100,
                                    autovacuum_vacuum_insert_scale_factor = 0);

-- One row per maintenance run, with its JSON summary (global: org_id '*').
CREATE TABLE memgov.maintenance_runs (
    org_id       text        NOT NULL DEFAULT '*',
    run_id       bigint      GENERATED ALWAYS AS IDENTITY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    status       text        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'finished', 'interrupted')),
    dry_run      boolean     NOT NULL DEFAULT false,
    run_by       text        NOT NULL DEFAULT current_user,
    summary      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (org_id, run_id)
);
COMMENT ON TABLE memgov.maintenance_runs IS 'Retention sweeps: when, by whom, and what each deleted or expired';

ALTER TABLE memgov.deletion_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.deletion_log
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.deletion_log TO memgov_admin USING (true);
GRANT SELECT ON memgov.deletion_log TO memgov_reviewer, memgov_admin;
-- the runs count every tenant's deletions: admins only
GRANT SELECT ON memgov.maintenance_runs TO memgov_admin;

-- When each kind of memory is due. These are SQL without a SET clause, so that the
-- planner inlines them into the sweep's queries (and uses the indexes on expires_at and
-- low_confidence_since).

-- Whether a memory's TTL has run out: its retention policy's, or the ttl_minutes its writer gave it.
CREATE FUNCTION memgov.ttl_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.expires_at <= pg_catalog.now() AND (p_item.retention_policy <> 'permanent_until_revoked' OR p_item.ttl_minutes IS NOT NULL)
$$;

-- Whether a confidence_based memory has been below its tenant's confidence_floor for the
-- tenant's confidence_grace, and still is (a new policy may have lowered the floor).
CREATE FUNCTION memgov.confidence_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.retention_policy = 'confidence_based'
           AND p_item.low_confidence_since
               <= pg_catalog.now() - memgov.retention_interval(p_item.org_id, 'confidence_grace')
           AND p_item.confidence < memgov.confidence_floor(p_item.org_id)
$$;

-- Whether an auto_delete rule of the tenant's active policy matches a memory.
CREATE FUNCTION memgov.auto_delete_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.retention_policy <> 'permanent_until_revoked' AND memgov.retention_rule(p_item) IS NOT NULL
$$;

-- Whether a pending approval request has waited longer than its tenant's approval_ttl.
CREATE FUNCTION memgov.approval_expired(p_request memgov.approval_requests)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_request.status = 'pending'
           AND p_request.requested_at <= pg_catalog.now() - memgov.retention_interval(p_request.org_id, 'approval_ttl')
$$;

-- Why a memory is due for deletion now ('ttl', 'confidence', 'auto_delete'), or NULL.
CREATE FUNCTION memgov.due_reason(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN memgov.ttl_due(p_item) THEN 'ttl'
        WHEN memgov.confidence_due(p_item) THEN 'confidence'
        WHEN memgov.auto_delete_due(p_item) THEN 'auto_delete'
    END
$$;

-- Whether a forget rule holds a memory against automatic deletion, memgov.retention_held(item),
-- is generated with the dispatchers (sql/031_dispatch.sql): its tenant's active policy, deciding
-- `forget` for it, denies by a rule (a legal hold). Retention and a rejection's deletion skip
-- such memories; on_policy_miss and holds for approval do not stop them (the retention
-- schedule is itself the policy's decision). Where the active policy has no deny rule that
-- can decide a forget (memgov.policy_may_hold), it decides nothing per row and is false.

-- Records one deletion made outside the sweep (apply_retention, rejection, forget): a row of one id.
CREATE FUNCTION memgov.log_deletion(p_item memgov.long_term_memory_items, p_reason text, p_run_id bigint)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
    VALUES (p_item.org_id, p_reason,
            CASE WHEN p_reason = 'auto_delete' THEN memgov.retention_rule(p_item) END,
            memgov.policy_settings(p_item.org_id) ->> 'version', p_run_id, 1, ARRAY[p_item.memory_id])
$$;

-- Deletes one batch of due memories of one kind and logs the deletions; returns how many
-- rows it took (fewer than p_batch_size: that kind is done for this run).
--
-- Each kind picks and locks its batch (FOR UPDATE SKIP LOCKED: a row someone holds waits
-- for the next run, the sweep never waits for it), and reads what the log needs from the
-- rows it locks: their ids, tenants and (auto_delete) rules. A second statement deletes the
-- locked rows by ctid (a TID scan: no second index probe, no join against the whole table);
-- the rows are ours until the commit, so it deletes each of them, as its count checks. The
-- log is then written from the locked rows: one deletion_log row per tenant (and
-- auto_delete rule) holding the batch's ids, a tenant's policy version looked up once per
-- batch, not per row. Reading the deleted rows back instead (DELETE ... RETURNING feeding
-- the log's INSERT) cost some 0.6 µs more a deleted row (measured).
CREATE FUNCTION memgov.sweep_batch(p_run_id bigint, p_kind text, p_batch_size integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_batch    tid[];     -- the locked rows, and what the log says of each
    v_ids      uuid[];
    v_orgs     text[];
    v_rules    text[];
    v_taken    integer := 0;
    v_deleted  integer := 0;
    v_more     boolean;
    v_path     text[];
    v_cutoff   timestamptz;
BEGIN
    PERFORM memgov.check_lease();
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE memgov.ttl_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.expires_at
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'confidence' THEN
        -- the loosest grace of any active policy (or the default, for tenants that have
        -- none) bounds the index scan; each row is then held to its own tenant's grace and floor
        SELECT now() - least((memgov.setting_defaults() #>> '{retention,confidence_grace}')::interval,
                             min(memgov.retention_interval(v.org_id, 'confidence_grace')))
          INTO v_cutoff
          FROM memgov.policy_versions v
         WHERE v.active;
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE d.low_confidence_since <= v_cutoff
                   AND memgov.confidence_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.low_confidence_since
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'auto_delete' THEN
        -- the rows the rules may match, from the index ranges that hold them, else the whole
        -- table in physical order (memgov.auto_delete_batch, sql/072_retention_candidates.sql)
        SELECT a.batch, a.ids, a.orgs, a.rules, a.more INTO v_batch, v_ids, v_orgs, v_rules, v_more
          FROM memgov.auto_delete_batch(p_run_id, p_batch_size) AS a;
    ELSIF p_kind = 'approvals' THEN
        -- expired requests, each locked without waiting, and a held INSERT's with the pending row
        -- its decision stored (decision_id), locked the same way: a request or row that a session
        -- holds (a client's SELECT ... FOR UPDATE, a call inside its open transaction) waits for a
        -- later run, and another pending row under the same memory_id is never this request's
        SELECT array_agg(b.request_id), array_agg(b.org_id), array_agg(b.ctid)
          INTO v_ids, v_orgs, v_batch
          FROM (SELECT r.request_id, r.org_id, m.ctid
                  FROM memgov.approval_requests r
                  JOIN memgov.long_term_memory_items m
                    ON m.memory_id = r.memory_id AND m.org_id = r.org_id
                   AND m.status = 'pending_approval' AND m.decision_id = r.decision_id
                 WHERE r.operation = 'remember' AND memgov.approval_expired(r)
                 LIMIT p_batch_size
                   FOR UPDATE OF r, m SKIP LOCKED) AS b;
        -- the others: held updates, forgets and reads, and held INSERTs whose row is gone
        SELECT coalesce(v_ids, '{}') || coalesce(array_agg(b.request_id), '{}'),
               coalesce(v_orgs, '{}') || coalesce(array_agg(b.org_id), '{}')
          INTO v_ids, v_orgs
          FROM (SELECT r.request_id, r.org_id
                  FROM memgov.approval_requests r
                 WHERE memgov.approval_expired(r)
                   AND (r.operation <> 'remember'
                        OR NOT EXISTS (SELECT FROM memgov.long_term_memory_items m
                                        WHERE m.memory_id = r.memory_id AND m.org_id = r.org_id
                                          AND m.status = 'pending_approval' AND m.decision_id = r.decision_id))
                 LIMIT p_batch_size - coalesce(cardinality(v_batch), 0)
                   FOR UPDATE SKIP LOCKED) AS b;
        UPDATE memgov.approval_requests r
           SET status = 'expired', decided_at = now(), decided_by = 'memgov', note = 'approval_ttl passed'
          FROM unnest(v_ids, v_orgs) AS e (request_id, org_id)
         WHERE r.request_id = e.request_id AND r.org_id = e.org_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        -- a held INSERT that nobody approved goes with its request
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        v_taken := v_deleted;
    ELSE
        RAISE EXCEPTION 'unknown sweep kind %', p_kind USING ERRCODE = '22023';
    END IF;

    IF p_kind <> 'approvals' THEN
        -- the batch through a subquery, whose size the planner cannot see: it looks the tids up
        -- (a TID scan); shown an array of thousands of tids, it would scan the whole table
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> coalesce(cardinality(v_batch), 0) THEN
            RAISE EXCEPTION 'memgov: the sweep deleted % of the % rows it had locked', v_deleted, cardinality(v_batch)
                USING ERRCODE = 'XX000';
        END IF;
        -- the ids in order: the GIN index sorts a row's ids before it stores them, and a sorted
        -- array costs that sort a single pass
        INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
        SELECT b.org_id, p_kind, b.rule_id, memgov.policy_settings(b.org_id) ->> 'version', p_run_id,
               count(*), array_agg(b.memory_id ORDER BY b.memory_id)
          FROM unnest(v_ids, v_orgs, v_rules) AS b (memory_id, org_id, rule_id)
         GROUP BY b.org_id, b.rule_id;
        -- auto_delete: a full batch while candidates remain, whatever it deleted
        v_taken := CASE WHEN p_kind <> 'auto_delete' THEN v_deleted
                        WHEN v_more THEN p_batch_size ELSE 0 END;
    END IF;

    v_path := CASE p_kind WHEN 'approvals' THEN ARRAY['expired', 'approvals'] ELSE ARRAY['deleted', p_kind] END;
    UPDATE memgov.maintenance_runs
       SET summary = jsonb_set(summary, v_path, to_jsonb(coalesce((summary #>> v_path)::bigint, 0) + v_deleted))
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_taken;
END
$$;

-- What a sweep would delete and expire now, without deleting anything.
CREATE FUNCTION memgov.retention_preview()
RETURNS jsonb
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'deleted', jsonb_build_object(
            'ttl',         count(*) FILTER (WHERE d.reason = 'ttl'),
            'confidence',  count(*) FILTER (WHERE d.reason = 'confidence'),
            'auto_delete', count(*) FILTER (WHERE d.reason = 'auto_delete')),
        'expired', jsonb_build_object(
            'approvals', (SELECT count(*) FROM memgov.approval_requests r WHERE memgov.approval_expired(r))))
      FROM (SELECT memgov.due_reason(m) AS reason
              FROM memgov.long_term_memory_items m
             WHERE m.retention_policy <> 'permanent_until_revoked' OR m.ttl_minutes IS NOT NULL) AS d
$$;

-- The backend whose run holds the maintenance lease now (NULL: none).
CREATE FUNCTION memgov.maintenance_holder()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.holder_pid
      FROM memgov.engine_locks e
     WHERE e.name = 'maintenance'
       AND EXISTS (SELECT FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.granted AND l.pid = e.holder_pid
                      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                      AND l.classid = e.lock_key[1]::oid AND l.objid = e.lock_key[2]::oid
                      AND l.objsubid = 2)
$$;

-- Claims the maintenance lease: returns the advisory-lock key this backend now holds for
-- the run, or NULL while another backend's run holds it. The key is random and chosen
-- here, so no other session can take it first and stall the sweep; a run that dies
-- releases its advisory lock, and with it the lease.
CREATE FUNCTION memgov.claim_maintenance()
RETURNS integer[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease  memgov.engine_locks;
    v_key    integer[];
BEGIN
    SELECT * INTO STRICT v_lease FROM memgov.engine_locks WHERE name = 'maintenance' FOR UPDATE;
    IF memgov.maintenance_holder() IS NOT NULL THEN
        RETURN NULL;
    END IF;
    LOOP
        v_key := ARRAY[(floor(random() * 4294967296) - 2147483648)::integer,
                       (floor(random() * 4294967296) - 2147483648)::integer];
        EXIT WHEN pg_try_advisory_lock(v_key[1], v_key[2]);
    END LOOP;
    UPDATE memgov.engine_locks
       SET holder_pid = pg_backend_pid(), lock_key = v_key, acquired_at = now()
     WHERE name = 'maintenance';
    RETURN v_key;
END
$$;

-- Raises 55P03 unless this backend holds the maintenance lease: the run's own steps
-- (start, batches, finish) are the lease holder's alone.
CREATE FUNCTION memgov.check_lease()
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF memgov.maintenance_holder() IS DISTINCT FROM pg_backend_pid() THEN
        RAISE EXCEPTION 'memgov: this session does not hold the maintenance lease'
            USING ERRCODE = '55P03', HINT = 'CALL memgov.run_maintenance() runs every step of a sweep';
    END IF;
END
$$;

-- Gives the maintenance lease back (the caller's run is over).
CREATE FUNCTION memgov.release_maintenance(p_key integer[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_advisory_unlock(p_key[1], p_key[2]);
    UPDATE memgov.engine_locks SET holder_pid = NULL, lock_key = NULL, acquired_at = NULL
     WHERE name = 'maintenance' AND lock_key = p_key AND holder_pid = pg_backend_pid();
END
$$;

-- Opens a run (after marking runs that were killed as interrupted); returns its id.
CREATE FUNCTION memgov.start_maintenance(p_dry_run boolean)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run  bigint;
BEGIN
    PERFORM memgov.check_lease();
    -- we hold the lease, so a run still marked running was killed
    UPDATE memgov.maintenance_runs SET status = 'interrupted', finished_at = now()
     WHERE status = 'running';
    INSERT INTO memgov.maintenance_runs (dry_run, run_by, summary)
    VALUES (p_dry_run, memgov.invoker_role(),
            jsonb_build_object('deleted', jsonb_build_object('ttl', 0, 'confidence', 0, 'auto_delete', 0),
                               'expired', jsonb_build_object('approvals', 0)))
    RETURNING run_id INTO v_run;
    RETURN v_run;
END
$$;

-- Deletes the replay samples older than their tenant's replay.keep, and any whose memory
-- is gone (a TRUNCATE); records the count in the run's summary (replay_samples_pruned).
CREATE FUNCTION memgov.prune_replay_samples(p_run_id bigint)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_pruned  bigint;
BEGIN
    PERFORM memgov.check_lease();
    DELETE FROM memgov.replay_samples s
     WHERE s.sampled_at < now() - memgov.policy_setting(s.org_id, 'replay', 'keep')::interval
        OR NOT EXISTS (SELECT FROM memgov.long_term_memory_items m
                        WHERE m.memory_id = s.memory_id AND m.org_id = s.org_id);
    GET DIAGNOSTICS v_pruned = ROW_COUNT;
    UPDATE memgov.maintenance_runs SET summary = summary || jsonb_build_object('replay_samples_pruned', v_pruned)
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_pruned;
END
$$;

-- Closes a run with its summary (p_preview: a dry run's counts; p_cron_pruned: pg_cron history rows pruned).
CREATE FUNCTION memgov.finish_maintenance(p_run_id bigint, p_preview jsonb DEFAULT NULL, p_cron_pruned bigint DEFAULT 0)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_summary  jsonb;
    v_now      timestamptz := clock_timestamp();  -- a dry run's preview ran in this transaction
BEGIN
    PERFORM memgov.check_lease();
    UPDATE memgov.maintenance_runs
       SET status = 'finished', finished_at = v_now,
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks' - 'range')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
    RETURNING summary INTO v_summary;
    RETURN v_summary;
END
$$;

RESET ROLE;
