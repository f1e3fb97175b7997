-- Feedback (confirm, reject, edit, forget) and retention (the sweep, deletion log, maintenance runs).
-- Frozen copy of sql/050_feedback.sql and sql/070_retention.sql as of this revision.

-- migrate:upgrade
-- memgov: the user's feedback on a memory (SPEC §4).
--
-- confirm, reject and edit are the user's acts: the application calls them on
-- the user's behalf as memgov_reviewer; agents (memgov_writer) cannot.
-- forget is a governed DELETE that writers may call too. Every call locks
-- the row (concurrent feedback never loses an update), works in exact
-- numeric clamped to [0, 1], and is recorded in memgov.feedback_events.
--
-- The deltas come from the `feedback:` section of the tenant's active policy.

SET ROLE memgov_owner;

-- Locks a memory for feedback; raises MG404 when it does not exist in the caller's tenant.
CREATE FUNCTION memgov.memory_for_feedback(p_memory_id uuid)
RETURNS memgov.long_term_memory_items
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items;
BEGIN
    SELECT * INTO v_item FROM memgov.long_term_memory_items
     WHERE memory_id = p_memory_id
       FOR UPDATE;
    IF NOT FOUND
       OR (NOT pg_has_role(memgov.invoker_role(), 'memgov_admin', 'MEMBER')
           AND v_item.org_id IS DISTINCT FROM current_setting('memgov.org_id', true)) THEN
        RAISE EXCEPTION 'memgov: memory % does not exist in tenant %', p_memory_id,
                        coalesce(current_setting('memgov.org_id', true), '(memgov.org_id unset)')
            USING ERRCODE = 'MG404',
                  HINT = 'SET memgov.org_id to the memory''s tenant; feedback never reaches another tenant';
    END IF;
    RETURN v_item;
END
$$;

-- A feedback setting of the tenant's active policy (feedback.confirm_delta, ...).
CREATE FUNCTION memgov.feedback_setting(p_org_id text, p_key text, p_default numeric)
RETURNS numeric
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((memgov.policy_settings(p_org_id) -> 'feedback' ->> p_key)::numeric, p_default)
$$;

-- Records one feedback event and returns it as the function's result.
CREATE FUNCTION memgov.record_feedback(
    p_item memgov.long_term_memory_items, p_kind text, p_after numeric, p_outcome text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event  bigint;
BEGIN
    INSERT INTO memgov.feedback_events (memory_id, org_id, kind, confidence_before, confidence_after, actor)
    VALUES (p_item.memory_id, p_item.org_id, p_kind, p_item.confidence, p_after, memgov.invoker_role())
    RETURNING event_id INTO v_event;
    RETURN jsonb_build_object('memory_id', p_item.memory_id, 'kind', p_kind, 'event_id', v_event,
                              'confidence_before', p_item.confidence, 'confidence_after', p_after,
                              'outcome', p_outcome);
END
$$;

-- Closes the pending approval request of a held INSERT the user confirmed or rejected.
CREATE FUNCTION memgov.close_held_insert(p_item memgov.long_term_memory_items, p_status text, p_note text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    FOR v_request IN
        SELECT * FROM memgov.approval_requests r
         WHERE r.memory_id = p_item.memory_id AND r.org_id = p_item.org_id
           AND r.status = 'pending' AND r.operation = 'remember'
           FOR UPDATE
    LOOP
        PERFORM memgov.close_request(v_request, p_status, memgov.invoker_role(), p_note);
    END LOOP;
END
$$;

-- The user confirms a memory: confidence += confirm_delta; a pending memory becomes active.
CREATE FUNCTION memgov.confirm(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(confirm.memory_id);
    v_after    numeric(4,3);
BEGIN
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta', 0.1)));
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now(), status = 'active'
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    IF v_item.status = 'pending_approval' THEN
        -- the user's confirmation is the approval the memory was waiting for
        PERFORM memgov.close_held_insert(v_item, 'approved', 'confirmed by the user');
    END IF;
    RETURN memgov.record_feedback(v_item, 'confirm', v_after,
        CASE WHEN v_item.status = 'pending_approval' THEN 'approved' ELSE 'confirmed' END);
END
$$;

-- The user rejects a memory: confidence += reject_delta, deleted below reject_delete_below;
-- a pending memory is refused (its request denied, the row removed).
CREATE FUNCTION memgov.reject(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(reject.memory_id);
    v_after    numeric(4,3);
BEGIN
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta', -0.3)));
    IF v_item.status = 'pending_approval' THEN
        PERFORM memgov.close_held_insert(v_item, 'denied', 'rejected by the user');
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        RETURN memgov.record_feedback(v_item, 'reject', NULL, 'refused');
    END IF;
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below', 0.0) THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.log_deletion(v_item, 'rejected', NULL);
        RETURN memgov.record_feedback(v_item, 'reject', v_after, 'deleted');
    END IF;
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'reject', v_after, 'lowered');
END
$$;

-- The user corrects a memory's text: confidence = edit_confidence. The new text is
-- decided as an `update` (a secret in it is denied with MG403 and the old text stays).
CREATE FUNCTION memgov.edit(memory_id uuid, new_text text)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(edit.memory_id);
    v_after    numeric(4,3) := least(1, greatest(0,
                   memgov.feedback_setting(v_item.org_id, 'edit_confidence', 0.8)));
    v_outcome  jsonb;
BEGIN
    IF new_text IS NULL THEN
        RAISE EXCEPTION 'memgov: new_text must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- the trigger decides this UPDATE on the caller's behalf, as any other update
    PERFORM set_config('memgov.govern_as', memgov.invoker_role(), true);
    PERFORM set_config('memgov.capture', 'on', true);
    PERFORM set_config('memgov.last_outcome', '', true);
    UPDATE memgov.long_term_memory_items AS m
       SET fact_text = new_text, confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    v_outcome := nullif(current_setting('memgov.last_outcome', true), '')::jsonb;
    PERFORM set_config('memgov.govern_as', '', true);
    PERFORM set_config('memgov.capture', '', true);
    RETURN v_outcome || memgov.record_feedback(v_item, 'edit',
        CASE WHEN v_outcome ->> 'action' = 'allow' THEN v_after ELSE v_item.confidence END,
        v_outcome ->> 'action');
END
$$;

-- Forgets a memory: the same governed path as a DELETE, on behalf of the caller.
CREATE FUNCTION memgov.forget(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(forget.memory_id);
    v_outcome  jsonb;
BEGIN
    PERFORM set_config('memgov.govern_as', memgov.invoker_role(), true);
    PERFORM set_config('memgov.capture', 'on', true);
    PERFORM set_config('memgov.last_outcome', '', true);
    DELETE FROM memgov.long_term_memory_items AS m
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    v_outcome := nullif(current_setting('memgov.last_outcome', true), '')::jsonb;
    PERFORM set_config('memgov.govern_as', '', true);
    PERFORM set_config('memgov.capture', '', true);
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome ->> 'action');
    RETURN v_outcome;
END
$$;

REVOKE EXECUTE ON FUNCTION
    memgov.memory_for_feedback(uuid),
    memgov.record_feedback(memgov.long_term_memory_items, text, numeric, text),
    memgov.close_held_insert(memgov.long_term_memory_items, text, text),
    memgov.confirm(uuid),
    memgov.reject(uuid),
    memgov.edit(uuid, text),
    memgov.forget(uuid)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.confirm(uuid), memgov.reject(uuid), memgov.edit(uuid, text)
    TO memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.forget(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: retention (SPEC §4). What is deleted, and when:
--
--   ttl_7d / ttl_30d    expires_at (created_at + 7 / 30 days) has passed
--   confidence_based    below the policy's confidence_floor for confidence_grace
--   any but permanent   an auto_delete rule of the tenant's active policy matches
--   permanent_until_revoked   never by any automatic process
--
-- CALL memgov.run_maintenance() runs the sweep in batches of retention.batch_size,
-- each committed on its own (FOR UPDATE SKIP LOCKED: writers are never blocked
-- for long), expires stale approval requests, prunes its own pg_cron history,
-- and records a JSON summary in memgov.maintenance_runs. An advisory lock lets
-- one run at a time proceed (per database); killing a run loses nothing, the
-- next one finishes the work and marks the killed one interrupted. Deletions
-- are logged without the memory's content.

SET ROLE memgov_owner;

-- Every deletion by retention or feedback: who, why, by which rule; never the text.
CREATE TABLE memgov.deletion_log (
    deletion_id     bigint       GENERATED ALWAYS AS IDENTITY,
    deleted_at      timestamptz  NOT NULL DEFAULT now(),
    memory_id       uuid         NOT NULL,
    org_id          text         NOT NULL,
    reason          text         NOT NULL CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected')),
    rule_id         text,
    policy_version  text,
    run_id          bigint,
    PRIMARY KEY (org_id, deletion_id)
);
COMMENT ON TABLE memgov.deletion_log IS 'Memories deleted by retention or rejection: id, reason, rule; never the content';
CREATE INDEX deletion_log_deleted_at_idx ON memgov.deletion_log USING brin (deleted_at);

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
    USING (org_id = current_setting('memgov.org_id', true));
CREATE POLICY admin_all ON memgov.deletion_log TO memgov_admin USING (true) WITH CHECK (true);
GRANT SELECT ON memgov.deletion_log TO memgov_reviewer, memgov_admin;
GRANT SELECT ON memgov.maintenance_runs TO memgov_reviewer, memgov_admin;

-- A retention setting of a tenant's active policy, as an interval or a number.
CREATE FUNCTION memgov.retention_interval(p_org_id text, p_key text, p_default interval)
RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce((memgov.policy_settings(p_org_id) -> 'retention' ->> p_key)::interval, p_default)
$$;

-- Why a memory is due for deletion now ('ttl', 'confidence', 'auto_delete'), or NULL.
CREATE FUNCTION memgov.due_reason(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_item.retention_policy = 'permanent_until_revoked' THEN NULL
        WHEN p_item.expires_at <= now() THEN 'ttl'
        WHEN p_item.retention_policy = 'confidence_based'
             AND p_item.low_confidence_since
                 <= now() - memgov.retention_interval(p_item.org_id, 'confidence_grace', interval '30 days')
             -- still below the floor of the active policy (a new policy may have lowered it)
             AND p_item.confidence
                 < coalesce((memgov.policy_settings(p_item.org_id) #>> '{retention,confidence_floor}')::numeric, 0.3)
             THEN 'confidence'
        WHEN memgov.retention_rule(p_item) IS NOT NULL THEN 'auto_delete'
    END
$$;

-- Records deletions made by retention or rejection.
CREATE FUNCTION memgov.log_deletion(p_item memgov.long_term_memory_items, p_reason text, p_run_id bigint)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO memgov.deletion_log (memory_id, org_id, reason, rule_id, policy_version, run_id)
    VALUES (p_item.memory_id, p_item.org_id, p_reason,
            CASE WHEN p_reason = 'auto_delete' THEN memgov.retention_rule(p_item) END,
            memgov.policy_settings(p_item.org_id) ->> 'version', p_run_id)
$$;

-- Deletes one batch of due memories of one kind and logs each deletion; returns how many
-- rows it took (fewer than p_batch_size: that kind is done for this run).
--
-- Every kind locks its batch first (FOR UPDATE SKIP LOCKED: a row someone holds waits for
-- the next run, the sweep never waits for it), then deletes the locked rows by ctid (a TID
-- scan: no second index probe, no join against the whole table) and logs what was deleted;
-- a tenant's policy version is looked up once per batch, not once per row.
CREATE FUNCTION memgov.sweep_batch(p_run_id bigint, p_kind text, p_batch_size integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_taken    integer := 0;
    v_deleted  integer := 0;
    v_cursor   bigint;
    v_blocks   bigint;
    v_step     bigint;
    v_path     text[];
    v_cutoff   timestamptz;
BEGIN
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        WITH gone AS (
            DELETE FROM memgov.long_term_memory_items m
             WHERE m.ctid = ANY (ARRAY(
                   SELECT d.ctid FROM memgov.long_term_memory_items d
                    WHERE d.expires_at <= now() AND d.retention_policy <> 'permanent_until_revoked'
                    ORDER BY d.expires_at
                    LIMIT p_batch_size
                      FOR UPDATE SKIP LOCKED))
            RETURNING m.memory_id, m.org_id
        ), versions AS (
            SELECT t.org_id, memgov.policy_settings(t.org_id) ->> 'version' AS version
              FROM (SELECT DISTINCT gone.org_id FROM gone) AS t
        )
        INSERT INTO memgov.deletion_log (memory_id, org_id, reason, policy_version, run_id)
        SELECT g.memory_id, g.org_id, 'ttl', v.version, p_run_id
          FROM gone g JOIN versions v ON v.org_id = g.org_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        v_taken := v_deleted;
    ELSIF p_kind = 'confidence' THEN
        -- the loosest cutoff of any active policy bounds the index scan; each row is then
        -- held to its own tenant's grace and floor
        SELECT now() - least(interval '30 days',
                             min((v.settings #>> '{retention,confidence_grace}')::interval))
          INTO v_cutoff
          FROM memgov.policy_versions v
         WHERE v.active;
        WITH gone AS (
            DELETE FROM memgov.long_term_memory_items m
             WHERE m.ctid = ANY (ARRAY(
                   SELECT d.ctid FROM memgov.long_term_memory_items d
                    WHERE d.retention_policy = 'confidence_based'
                      AND d.low_confidence_since <= v_cutoff
                      AND d.low_confidence_since
                          <= now() - memgov.retention_interval(d.org_id, 'confidence_grace', interval '30 days')
                      AND d.confidence
                          < coalesce((memgov.policy_settings(d.org_id) #>> '{retention,confidence_floor}')::numeric, 0.3)
                    ORDER BY d.low_confidence_since
                    LIMIT p_batch_size
                      FOR UPDATE SKIP LOCKED))
            RETURNING m.memory_id, m.org_id
        ), versions AS (
            SELECT t.org_id, memgov.policy_settings(t.org_id) ->> 'version' AS version
              FROM (SELECT DISTINCT gone.org_id FROM gone) AS t
        )
        INSERT INTO memgov.deletion_log (memory_id, org_id, reason, policy_version, run_id)
        SELECT g.memory_id, g.org_id, 'confidence', v.version, p_run_id
          FROM gone g JOIN versions v ON v.org_id = g.org_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        v_taken := v_deleted;
    ELSIF p_kind = 'auto_delete' THEN
        -- no active policy has an auto_delete rule: nothing to walk
        IF NOT EXISTS (SELECT FROM memgov.memory_policy_rules r
                         JOIN memgov.policy_versions v
                           ON v.org_id = r.org_id AND v.version = r.policy_version
                        WHERE v.active AND r.action = 'auto_delete') THEN
            RETURN 0;
        END IF;
        -- auto_delete rules are arbitrary predicates: walk the table once per run in
        -- physical order (a TID range scan), about p_batch_size rows' worth of blocks per
        -- batch, up to the size the table had when the walk began
        SELECT (r.summary ->> 'cursor')::bigint, (r.summary ->> 'blocks')::bigint
          INTO v_cursor, v_blocks
          FROM memgov.maintenance_runs r WHERE r.org_id = '*' AND r.run_id = p_run_id;
        IF v_cursor IS NULL THEN
            v_cursor := 0;
            v_blocks := pg_relation_size('memgov.long_term_memory_items')
                        / current_setting('block_size')::bigint;
        END IF;
        SELECT greatest(1, ceil(p_batch_size / CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                                    THEN c.reltuples / c.relpages ELSE 50 END))::bigint
          INTO v_step
          FROM pg_class c WHERE c.oid = 'memgov.long_term_memory_items'::regclass;
        WITH gone AS (
            DELETE FROM memgov.long_term_memory_items m
             WHERE m.ctid = ANY (ARRAY(
                   SELECT d.ctid FROM memgov.long_term_memory_items d
                    WHERE d.ctid >= ('(' || v_cursor || ',0)')::tid
                      AND d.ctid < ('(' || (v_cursor + v_step) || ',0)')::tid
                      AND d.retention_policy <> 'permanent_until_revoked'
                      AND memgov.retention_rule(d) IS NOT NULL
                      FOR UPDATE SKIP LOCKED))
            RETURNING m AS item
        ), versions AS (
            SELECT t.org_id, memgov.policy_settings(t.org_id) ->> 'version' AS version
              FROM (SELECT DISTINCT (gone.item).org_id FROM gone) AS t
        )
        INSERT INTO memgov.deletion_log (memory_id, org_id, reason, rule_id, policy_version, run_id)
        SELECT (g.item).memory_id, (g.item).org_id, 'auto_delete', memgov.retention_rule(g.item),
               v.version, p_run_id
          FROM gone g JOIN versions v ON v.org_id = (g.item).org_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        v_cursor := v_cursor + v_step;
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('cursor', v_cursor, 'blocks', v_blocks)
         WHERE org_id = '*' AND run_id = p_run_id;
        -- a full batch while blocks remain; the last one ends the walk
        v_taken := CASE WHEN v_cursor < v_blocks THEN p_batch_size ELSE 0 END;
    ELSIF p_kind = 'approvals' THEN
        WITH stale AS (
            SELECT r.request_id, r.org_id FROM memgov.approval_requests r
             WHERE r.status = 'pending'
               AND r.requested_at <= now() - memgov.retention_interval(r.org_id, 'approval_ttl', interval '7 days')
             LIMIT p_batch_size
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            UPDATE memgov.approval_requests r
               SET status = 'expired', decided_at = now(), decided_by = 'memgov', note = 'approval_ttl passed'
              FROM stale
             WHERE r.request_id = stale.request_id AND r.org_id = stale.org_id
            RETURNING r.memory_id, r.org_id, r.operation
        ), dropped AS (
            -- a held INSERT that nobody approved goes with its request
            DELETE FROM memgov.long_term_memory_items m USING expired e
             WHERE e.operation = 'remember' AND m.memory_id = e.memory_id AND m.org_id = e.org_id
               AND m.status = 'pending_approval'
            RETURNING 1
        )
        SELECT count(*) INTO v_deleted FROM expired;
        v_taken := v_deleted;
    ELSE
        RAISE EXCEPTION 'unknown sweep kind %', p_kind USING ERRCODE = '22023';
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
            'approvals', (SELECT count(*) FROM memgov.approval_requests r
                           WHERE r.status = 'pending'
                             AND r.requested_at <= now() - memgov.retention_interval(r.org_id, 'approval_ttl', interval '7 days'))))
      FROM (SELECT memgov.due_reason(m) AS reason
              FROM memgov.long_term_memory_items m
             WHERE m.retention_policy <> 'permanent_until_revoked') AS d
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
    -- we hold the lock, so a run still marked running was killed
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
    UPDATE memgov.maintenance_runs
       SET status = 'finished', finished_at = v_now,
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id
    RETURNING summary INTO v_summary;
    RETURN v_summary;
END
$$;

-- The sweep: one idempotent entry point for pg_cron and the CLI. Each batch commits on its own.
-- No SECURITY DEFINER and no SET clause: either would forbid the COMMITs. It runs as its
-- caller, which is also what lets it prune the caller's own pg_cron history.
CREATE PROCEDURE memgov.run_maintenance(dry_run boolean DEFAULT false)
LANGUAGE plpgsql
AS $$
DECLARE
    v_lock     bigint := pg_catalog.hashtext('memgov.run_maintenance');
    -- how much the sweep yields to the database's other sessions: while one of them is
    -- busy, it pauses after each batch for this many times the batch's duration (at most
    -- 1 s), which leaves writers the WAL bandwidth their commits wait for (0: never pauses)
    v_yield    float8 := coalesce(nullif(pg_catalog.current_setting('memgov.maintenance_yield', true), '')::float8, 5.0);
    v_run      bigint;
    v_batch    integer;
    v_kind     text;
    v_taken    integer;
    v_started  timestamptz;
    v_pruned   bigint := 0;
BEGIN
    -- a second run while one is going returns at once (the lock is per database)
    IF NOT pg_catalog.pg_try_advisory_lock(v_lock) THEN
        RAISE NOTICE 'memgov: another maintenance run is in progress; this one does nothing'
            USING ERRCODE = 'MG409';
        RETURN;
    END IF;
    -- the lock belongs to the session: every step that can fail releases it before re-raising,
    -- so that a failed run in a long-lived session does not block the runs that follow
    BEGIN
        v_batch := greatest(1, coalesce((memgov.policy_settings('*') #>> '{retention,batch_size}')::integer, 5000));
        v_run := memgov.start_maintenance(dry_run);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_catalog.pg_advisory_unlock(v_lock);
        RAISE;
    END;
    COMMIT;
    IF dry_run THEN
        BEGIN
            PERFORM memgov.finish_maintenance(v_run, memgov.retention_preview());
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM pg_catalog.pg_advisory_unlock(v_lock);
            RAISE;
        END;
    ELSE
        FOREACH v_kind IN ARRAY ARRAY['ttl', 'confidence', 'auto_delete', 'approvals'] LOOP
            LOOP
                v_started := pg_catalog.clock_timestamp();
                BEGIN
                    v_taken := memgov.sweep_batch(v_run, v_kind, v_batch);
                EXCEPTION WHEN OTHERS OR query_canceled THEN
                    PERFORM pg_catalog.pg_advisory_unlock(v_lock);
                    RAISE;
                END;
                COMMIT;
                EXIT WHEN v_taken < v_batch;
                -- other sessions are at work here: leave them WAL and CPU (a backend whose
                -- state the caller may not see counts as busy)
                IF v_yield > 0 AND EXISTS (
                       SELECT FROM pg_catalog.pg_stat_activity a
                        WHERE a.datname = pg_catalog.current_database()
                          AND a.pid <> pg_catalog.pg_backend_pid()
                          AND a.backend_type = 'client backend'
                          AND a.state IS DISTINCT FROM 'idle') THEN
                    PERFORM pg_catalog.pg_sleep(LEAST(1.0, v_yield
                        * pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - v_started)));
                END IF;
            END LOOP;
        END LOOP;
        -- this database's own pg_cron history, when it lives here and the caller may see it
        -- (pg_cron's row security shows each user its own jobs' runs)
        BEGIN
            IF pg_catalog.to_regclass('cron.job_run_details') IS NOT NULL THEN
                -- dynamic: the cron schema exists in pg_cron's database only
                EXECUTE pg_catalog.format($sql$
                    DELETE FROM %I.job_run_details d
                     USING %I.job j
                     WHERE d.jobid = j.jobid
                       AND j.database = pg_catalog.current_database()
                       AND j.command LIKE '%%memgov.run_maintenance%%'
                       AND d.end_time < pg_catalog.now() - interval '7 days'
                $sql$, 'cron', 'cron');
                GET DIAGNOSTICS v_pruned = ROW_COUNT;
            END IF;
        EXCEPTION WHEN insufficient_privilege OR undefined_table OR invalid_schema_name THEN
            v_pruned := 0;  -- not ours to prune
        END;
        BEGIN
            PERFORM memgov.finish_maintenance(v_run, NULL, v_pruned);
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM pg_catalog.pg_advisory_unlock(v_lock);
            RAISE;
        END;
    END IF;
    COMMIT;
    PERFORM pg_catalog.pg_advisory_unlock(v_lock);
END
$$;

-- Applies the sweep's rules to one memory now; returns whether it was deleted and why.
CREATE FUNCTION memgov.apply_retention(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item    memgov.long_term_memory_items := memgov.memory_for_feedback(apply_retention.memory_id);
    v_reason  text := memgov.due_reason(v_item);
BEGIN
    IF v_reason IS NOT NULL THEN
        PERFORM memgov.log_deletion(v_item, v_reason, NULL);
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', v_reason IS NOT NULL,
                              'reason', v_reason,
                              'rule_id', CASE WHEN v_reason = 'auto_delete' THEN memgov.retention_rule(v_item) END);
END
$$;

REVOKE EXECUTE ON FUNCTION
    memgov.log_deletion(memgov.long_term_memory_items, text, bigint),
    memgov.sweep_batch(bigint, text, integer),
    memgov.retention_preview(),
    memgov.start_maintenance(boolean),
    memgov.finish_maintenance(bigint, jsonb, bigint),
    memgov.apply_retention(uuid)
    FROM PUBLIC;
REVOKE EXECUTE ON PROCEDURE memgov.run_maintenance(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    memgov.sweep_batch(bigint, text, integer),
    memgov.retention_preview(),
    memgov.start_maintenance(boolean),
    memgov.finish_maintenance(bigint, jsonb, bigint)
    TO memgov_admin;
GRANT EXECUTE ON PROCEDURE memgov.run_maintenance(boolean) TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.apply_retention(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- migrate:downgrade
DO $drop$
DECLARE
    v_routine regprocedure;
BEGIN
    FOR v_routine IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           AND p.proname = ANY (ARRAY[
               'run_maintenance', 'apply_retention', 'finish_maintenance', 'start_maintenance',
               'retention_preview', 'sweep_batch', 'log_deletion', 'due_reason', 'retention_interval',
               'forget', 'edit', 'reject', 'confirm', 'record_feedback', 'feedback_setting',
               'memory_for_feedback', 'close_held_insert'])
    LOOP
        EXECUTE pg_catalog.format('DROP ROUTINE %s', v_routine);
    END LOOP;
END
$drop$;
DROP TABLE memgov.maintenance_runs;
DROP TABLE memgov.deletion_log;
