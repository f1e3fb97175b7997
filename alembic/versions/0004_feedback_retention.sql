-- Feedback (confirm, reject, edit, forget) and retention (the sweep, deletion log, maintenance runs).
-- Frozen copy of sql/050_feedback.sql, sql/070_retention.sql and sql/080_audit.sql as of this revision.

-- migrate:upgrade
-- memgov: the user's feedback on a memory (docs/retention.md).
--
-- confirm, reject and edit are the user's acts: the application calls them on
-- the user's behalf as memgov_reviewer; agents (memgov_writer) cannot.
-- forget is a governed DELETE that writers may call too. Every call locks
-- the row (concurrent feedback never loses an update), works in exact
-- numeric clamped to [0, 1], and is recorded in memgov.feedback_events.
--
-- The deltas come from the `feedback:` section of the tenant's active policy.

SET ROLE memgov_owner;

-- Locks a memory for feedback; raises MG404 when it does not exist in the caller's tenant
-- (another tenant's memories look the same as missing ones).
CREATE FUNCTION memgov.memory_for_feedback(p_memory_id uuid)
RETURNS memgov.long_term_memory_items
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items;
BEGIN
    -- an admin reaches every tenant; a memory_id two tenants share is then ambiguous
    -- unless the session names one
    SELECT * INTO STRICT v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = p_memory_id AND memgov.sees_tenant(m.org_id)
       AND (m.org_id = current_setting('memgov.org_id', true)
            OR coalesce(current_setting('memgov.org_id', true), '') = '')
       FOR UPDATE;
    RETURN v_item;
EXCEPTION
    WHEN no_data_found THEN
        RAISE EXCEPTION 'memgov: memory % does not exist in tenant %', p_memory_id,
                        coalesce(memgov.session_tenant(), '(memgov.org_id unset or not bound)')
            USING ERRCODE = 'MG404',
                  HINT = 'SET memgov.org_id to the memory''s tenant; feedback never reaches another tenant';
    WHEN too_many_rows THEN
        RAISE EXCEPTION 'memgov: memory % exists in several tenants', p_memory_id
            USING ERRCODE = 'MG409', HINT = 'SET memgov.org_id to the tenant you mean';
END
$$;

-- The pending approval request of a held INSERT, locked (MG404 when there is none).
CREATE FUNCTION memgov.held_insert_request(p_item memgov.long_term_memory_items)
RETURNS memgov.approval_requests
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.memory_id = p_item.memory_id AND r.org_id = p_item.org_id
       AND r.status = 'pending' AND r.operation = 'remember'
     ORDER BY r.requested_at
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: pending memory % has no open approval request', p_item.memory_id
            USING ERRCODE = 'MG404';
    END IF;
    RETURN v_request;
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
    INSERT INTO memgov.feedback_events
           (memory_id, org_id, kind, confidence_before, confidence_after, actor, login)
    VALUES (p_item.memory_id, p_item.org_id, p_kind, p_item.confidence, p_after, memgov.invoker_role(),
            session_user)
    RETURNING event_id INTO v_event;
    RETURN jsonb_build_object('memory_id', p_item.memory_id, 'kind', p_kind, 'event_id', v_event,
                              'confidence_before', p_item.confidence, 'confidence_after', p_after,
                              'outcome', p_outcome);
END
$$;

-- Refuses feedback that would change a memory while it waits for approval.
CREATE FUNCTION memgov.check_not_pending(p_item memgov.long_term_memory_items, p_what text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_item.status = 'pending_approval' THEN
        RAISE EXCEPTION 'memgov: memory % is pending approval; it cannot be %', p_item.memory_id, p_what
            USING ERRCODE = 'MG409',
                  HINT = 'confirm or reject it (or approve or deny its request) first';
    END IF;
END
$$;

-- Decides a write memgov applies on its caller's behalf (edit, forget), logs it, files
-- what it calls for, and raises MG403 for a denial. Returns the outcome with its decision.
CREATE FUNCTION memgov.govern_feedback_write(p_operation text, p_item memgov.long_term_memory_items)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_capture  text := current_setting('memgov.capture', true);
    v_outcome  memgov.write_outcome;
BEGIN
    PERFORM set_config('memgov.capture', 'on', true);
    v_outcome := memgov.record_write(p_operation, p_item, memgov.invoker_role(),
                                     memgov.decide(p_item, p_operation, memgov.invoker_role()));
    PERFORM set_config('memgov.capture', coalesce(v_capture, ''), true);
    CASE v_outcome.action
    WHEN 'deny' THEN
        PERFORM memgov.raise_denied(p_operation, v_outcome);
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
            USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
    WHEN 'quarantine' THEN
        RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
            USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
    ELSE
        NULL;
    END CASE;
    RETURN v_outcome;
END
$$;

-- The user confirms a memory: confidence += confirm_delta. A pending memory is the
-- approval it waits for: approved as memgov.approve() would (re-decided by the
-- active policy, logged, never by the login that asked for it), then confirmed.
CREATE FUNCTION memgov.confirm(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(confirm.memory_id);
    v_after    numeric(4,3);
    v_result   jsonb;
BEGIN
    IF v_item.status = 'pending_approval' THEN
        v_result := memgov.approve_request(memgov.held_insert_request(v_item), 'confirmed by the user');
        IF v_result ->> 'status' <> 'approved' THEN
            RETURN memgov.record_feedback(v_item, 'confirm', NULL, 'refused')
                   || jsonb_build_object('decision', v_result -> 'decision');
        END IF;
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta', 0.1)));
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now()
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'confirm', v_after,
        CASE WHEN v_item.status = 'pending_approval' THEN 'approved' ELSE 'confirmed' END);
END
$$;

-- The user rejects a memory: confidence += reject_delta, deleted below reject_delete_below
-- (unless a forget rule holds it: then only lowered); a pending memory is refused (its
-- request denied as memgov.deny() would, the row removed).
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
    IF v_item.status = 'pending_approval' THEN
        PERFORM memgov.deny_request(memgov.held_insert_request(v_item), 'rejected by the user');
        RETURN memgov.record_feedback(v_item, 'reject', NULL, 'refused');
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta', -0.3)));
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below', 0.0)
       AND NOT memgov.retention_held(v_item) THEN
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
    v_new      memgov.long_term_memory_items;
    v_outcome  memgov.write_outcome;
BEGIN
    IF new_text IS NULL THEN
        RAISE EXCEPTION 'memgov: new_text must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM memgov.check_not_pending(v_item, 'edited');
    PERFORM memgov.check_fact_size(new_text);
    v_new := v_item;
    v_new.fact_text := new_text;
    v_new.confidence := v_after;
    v_new.updated_at := now();
    v_outcome := memgov.govern_feedback_write('update', v_new);
    IF v_outcome.action = 'allow' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET fact_text = new_text, confidence = v_after,
               policy_version = v_outcome.policy_version, decision_id = v_outcome.decision_id
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    RETURN v_outcome.decision || memgov.record_feedback(v_item, 'edit',
        CASE WHEN v_outcome.action = 'allow' THEN v_after ELSE v_item.confidence END,
        v_outcome.action);
END
$$;

-- Forgets a memory: decided as a `forget` on behalf of the caller, as a DELETE would be.
CREATE FUNCTION memgov.forget(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(forget.memory_id);
    v_outcome  memgov.write_outcome;
BEGIN
    PERFORM memgov.check_not_pending(v_item, 'forgotten');
    v_outcome := memgov.govern_feedback_write('forget', v_item);
    IF v_outcome.action = 'allow' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$$;

GRANT EXECUTE ON FUNCTION memgov.confirm(uuid), memgov.reject(uuid), memgov.edit(uuid, text)
    TO memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.forget(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: retention (docs/retention.md). What is deleted, and when:
--
--   ttl_7d / ttl_30d    expires_at (created_at + 7 / 30 days) has passed
--   confidence_based    below the policy's confidence_floor for confidence_grace
--   any but permanent   an auto_delete rule of the tenant's active policy matches
--   permanent_until_revoked   never by any automatic process
--
-- CALL memgov.run_maintenance() runs the sweep in batches of retention.batch_size,
-- each committed on its own (FOR UPDATE SKIP LOCKED: writers are never blocked
-- for long), expires stale approval requests, prunes its own pg_cron history,
-- and records a JSON summary in memgov.maintenance_runs. A lease that only memgov
-- can take (memgov.claim_maintenance) lets one run at a time proceed (per database); killing a run loses nothing, the
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
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.deletion_log TO memgov_admin USING (true);
GRANT SELECT ON memgov.deletion_log TO memgov_reviewer, memgov_admin;
-- the runs count every tenant's deletions: admins only
GRANT SELECT ON memgov.maintenance_runs TO memgov_admin;

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

-- Whether a forget rule holds a memory against automatic deletion: its tenant's active
-- policy, deciding `forget` for it, denies by a rule (a legal hold). Retention and a
-- rejection's deletion skip such memories; on_policy_miss and holds for approval do not
-- stop them (the retention schedule is itself the policy's decision).
CREATE FUNCTION memgov.retention_held(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT d.enforced AND d.action = 'deny' AND cardinality(d.matched_rule_ids) > 0
      FROM memgov.decide(p_item, 'forget', 'memgov_owner') AS d
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
    PERFORM memgov.check_lease();
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        WITH gone AS (
            DELETE FROM memgov.long_term_memory_items m
             WHERE m.ctid = ANY (ARRAY(
                   SELECT d.ctid FROM memgov.long_term_memory_items d
                    WHERE d.expires_at <= now() AND d.retention_policy <> 'permanent_until_revoked'
                      AND NOT memgov.retention_held(d)
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
                      AND NOT memgov.retention_held(d)
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
                      AND NOT memgov.retention_held(d)
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
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
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
    v_lock     integer[];
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
    -- a second run while one is going returns at once (the lease is per database)
    v_lock := memgov.claim_maintenance();
    IF v_lock IS NULL THEN
        RAISE NOTICE 'memgov: another maintenance run is in progress; this one does nothing'
            USING ERRCODE = 'MG409';
        RETURN;
    END IF;
    -- the lease's lock belongs to the session: every step that can fail releases it before re-raising,
    -- so that a failed run in a long-lived session does not block the runs that follow
    BEGIN
        v_batch := greatest(1, coalesce((memgov.policy_settings('*') #>> '{retention,batch_size}')::integer, 5000));
        v_run := memgov.start_maintenance(dry_run);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM memgov.release_maintenance(v_lock);
        RAISE;
    END;
    COMMIT;
    IF dry_run THEN
        BEGIN
            PERFORM memgov.finish_maintenance(v_run, memgov.retention_preview());
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    ELSE
        FOREACH v_kind IN ARRAY ARRAY['ttl', 'confidence', 'auto_delete', 'approvals'] LOOP
            LOOP
                v_started := pg_catalog.clock_timestamp();
                BEGIN
                    v_taken := memgov.sweep_batch(v_run, v_kind, v_batch);
                EXCEPTION WHEN OTHERS OR query_canceled THEN
                    PERFORM memgov.release_maintenance(v_lock);
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
            -- seal the decision log's new rows into its hash chain (sql/080_audit.sql; summary key 'sealed')
            PERFORM memgov.seal_decision_log(p_run_id => v_run);
            PERFORM memgov.finish_maintenance(v_run, NULL, v_pruned);
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    END IF;
    COMMIT;
    PERFORM memgov.release_maintenance(v_lock);
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
    v_held    boolean := v_reason IS NOT NULL AND memgov.retention_held(v_item);
BEGIN
    IF v_held THEN
        -- due, but a forget rule holds it: like the sweep, apply_retention leaves it
        RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', false, 'reason', v_reason,
                                  'held', true);
    END IF;
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

GRANT EXECUTE ON FUNCTION
    memgov.maintenance_holder(),
    memgov.claim_maintenance(),
    memgov.release_maintenance(integer[]),
    memgov.sweep_batch(bigint, text, integer),
    memgov.retention_preview(),
    memgov.start_maintenance(boolean),
    memgov.finish_maintenance(bigint, jsonb, bigint)
    TO memgov_admin;
GRANT EXECUTE ON PROCEDURE memgov.run_maintenance(boolean) TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.apply_retention(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: the decision log is append-only and sealed into a hash chain.
--
-- A decision, once logged, is never changed or removed: UPDATE, DELETE and TRUNCATE of
-- memgov.decision_log, of its seals and of its archive records are refused for every role,
-- superusers and memgov_owner's own functions included (SQLSTATE 42501), by triggers that
-- fire even under session_replication_role = replica (ENABLE ALWAYS). Rows leave only
-- through memgov.archive_decision_log(before), which removes whole seals, oldest first, and
-- records what it removed.
--
-- Sealing costs a writer a column default and nothing else: each row records the
-- transaction that wrote it (xact_id). memgov.seal_decision_log(), run at the end of every
-- memgov.run_maintenance(), takes as its horizon the oldest transaction still running (its
-- snapshot's xmin): every transaction below it has committed or aborted, so no row of one
-- can appear later. It seals exactly those rows, in (xact_id, decision_id) order, after the
-- last row of the previous seal. A row whose transaction was still open waits for a later
-- seal, however low the decision_id it took: late commits are never mistaken for tampering.
-- Each seal keeps the ids and sha256 digests of its rows and
--
--     seal_hash = sha256(prev_hash || 'memgov-seal-v1 <seal_id> <after> <last> <ids>' || digests)
--
-- (the first seal's prev_hash is 32 zero bytes). memgov.verify_decision_log() recomputes
-- it all and names the first altered, missing or extra row.
--
-- What this cannot stop: a superuser or memgov_owner may disable the triggers and rewrite
-- the log and the chain alike. Keep the last seal's hash outside the database (memgov
-- verify-log prints it, --anchor checks it later). docs/security.md says more.

SET ROLE memgov_owner;

-- The seals, a hash chain (global: org_id '*'). Seal n covers the rows after seal n-1's
-- last row up to its own, in (xact_id, decision_id) order; after = (0, 0) for the first.
CREATE TABLE memgov.decision_log_seals (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    seal_id            bigint      NOT NULL CHECK (seal_id > 0),
    sealed_at          timestamptz NOT NULL DEFAULT now(),
    sealed_by          text        NOT NULL,
    sealed_login       text        NOT NULL DEFAULT session_user,
    horizon_xact_id    bigint      NOT NULL,  -- every transaction below it had ended
    after_xact_id      bigint      NOT NULL,
    after_decision_id  bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          integer     NOT NULL CHECK (row_count > 0),
    decision_ids       bigint[]    NOT NULL,  -- in (xact_id, decision_id) order
    row_digests        bytea       NOT NULL,  -- 32 bytes a row, in the order of decision_ids
    last_decided_at    timestamptz NOT NULL,  -- the latest decided_at of its rows (archival)
    prev_hash          bytea       NOT NULL,
    seal_hash          bytea       NOT NULL,
    PRIMARY KEY (org_id, seal_id)
);
COMMENT ON TABLE memgov.decision_log_seals IS
    'Hash chain over memgov.decision_log: each seal covers a batch of rows and the previous seal';

-- What memgov.archive_decision_log() removed: whole seals, the oldest first. Verification
-- continues from the last one's hash and last row.
CREATE TABLE memgov.decision_log_archives (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    archive_id         bigint      NOT NULL CHECK (archive_id > 0),
    archived_at        timestamptz NOT NULL DEFAULT now(),
    archived_by        text        NOT NULL,
    archived_login     text        NOT NULL DEFAULT session_user,
    archived_xact_id   bigint      NOT NULL DEFAULT (pg_catalog.pg_current_xact_id())::text::bigint,
    decided_before     timestamptz NOT NULL,
    first_seal_id      bigint      NOT NULL,
    last_seal_id       bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          bigint      NOT NULL,
    last_hash          bytea       NOT NULL,
    PRIMARY KEY (org_id, archive_id),
    CHECK (last_seal_id >= first_seal_id)
);
COMMENT ON TABLE memgov.decision_log_archives IS
    'Seals removed from the decision log by memgov.archive_decision_log, with the last removed seal''s hash';

-- Refuses UPDATE, DELETE and TRUNCATE of the decision log, its seals and its archive records,
-- for every role. It lets through only memgov.archive_decision_log()'s deletes of what that
-- function has just recorded, in this very transaction, as archived.
CREATE FUNCTION memgov.refuse_log_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_archive  text;
    v_allowed  boolean := false;
BEGIN
    -- current_user is memgov_owner only inside memgov's SECURITY DEFINER functions (no client
    -- role is a member of it); memgov.archiving alone proves nothing: any session may set it
    IF TG_OP = 'DELETE' AND current_user = 'memgov_owner' THEN
        v_archive := current_setting('memgov.archiving', true);
        IF v_archive ~ '^[1-9][0-9]{0,17}$' THEN
            IF TG_TABLE_NAME = 'decision_log' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND (OLD.xact_id, OLD.decision_id) <= (a.last_xact_id, a.last_decision_id));
            ELSIF TG_TABLE_NAME = 'decision_log_seals' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND OLD.seal_id <= a.last_seal_id);
            END IF;
        END IF;
    END IF;
    IF v_allowed THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memgov: %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = '42501',
              HINT = 'logged decisions are never changed; sealed rows leave only through '
                     'memgov.archive_decision_log(before), which records what it removes';
END
$$;

CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_seals
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_seals
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_archives
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_archives
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
-- also under session_replication_role = replica, which would silence ordinary triggers
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_truncate;

-- The sha256 of one log row: all its columns as jsonb, NULLs left out (a column added later,
-- NULL in old rows, leaves their digests as they were). Timestamps print in the session's
-- TimeZone: every caller pins TimeZone = 'UTC'. (No SET clause, so that it is inlined.)
CREATE FUNCTION memgov.decision_digest(p_row memgov.decision_log)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(
               pg_catalog.jsonb_strip_nulls(pg_catalog.to_jsonb(p_row))::text, 'UTF8'))
$$;

-- The hash of a seal: of the previous seal's hash, the seal's own header and its rows' digests.
CREATE FUNCTION memgov.seal_hash(p_prev_hash bytea, p_seal_id bigint,
                                 p_after_xact_id bigint, p_after_decision_id bigint,
                                 p_last_xact_id bigint, p_last_decision_id bigint,
                                 p_decision_ids bigint[], p_row_digests bytea)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-seal-v1 %s %s:%s %s:%s %s',
                      p_seal_id, p_after_xact_id, p_after_decision_id, p_last_xact_id, p_last_decision_id,
                      pg_catalog.array_to_string(p_decision_ids, ',')), 'UTF8')
               || p_row_digests)
$$;

-- Seals the log's new rows: every row of a transaction older than all running ones, after
-- the last seal, p_batch_rows a seal; returns what it sealed. memgov.run_maintenance() passes
-- its run id: the run's summary then says how many rows it sealed (key 'sealed').
CREATE FUNCTION memgov.seal_decision_log(p_batch_rows integer DEFAULT 10000, p_run_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_seal_id   bigint;
    v_after_x   bigint;
    v_after_d   bigint;
    v_hash      bytea;
    v_horizon   bigint;
    v_next_xid  bigint;
    v_count     integer;
    v_ids       bigint[];
    v_digests   bytea;
    v_last_x    bigint;
    v_decided   timestamptz;
    v_new_hash  bytea;
    v_rows      bigint := 0;
    v_seals     integer := 0;
BEGIN
    IF p_batch_rows IS NULL OR p_batch_rows < 1 THEN
        RAISE EXCEPTION 'memgov: p_batch_rows must be at least 1, not %', coalesce(p_batch_rows::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- one sealer or archiver at a time; clients may only read the seals, so none can hold
    -- a lock that conflicts with this one
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    -- where the chain ends: its last seal, else the last archive, else nowhere yet
    SELECT s.seal_id, s.last_xact_id, s.last_decision_id, s.seal_hash
      INTO v_seal_id, v_after_x, v_after_d, v_hash
      FROM memgov.decision_log_seals s
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        SELECT a.last_seal_id, a.last_xact_id, a.last_decision_id, a.last_hash
          INTO v_seal_id, v_after_x, v_after_d, v_hash
          FROM memgov.decision_log_archives a
         ORDER BY a.archive_id DESC
         LIMIT 1;
        IF NOT FOUND THEN
            v_seal_id := 0;
            v_after_x := 0;
            v_after_d := 0;
            v_hash := decode(repeat('00', 32), 'hex');
        END IF;
    END IF;
    -- the horizon, from a snapshot taken now: the rows read below are read with a snapshot no
    -- older than it, so every row of a transaction below the horizon is there to be sealed
    SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
      INTO v_horizon, v_next_xid
      FROM pg_current_snapshot() AS s;
    IF v_after_x >= v_next_xid THEN
        -- the chain ends in a transaction this cluster has not reached: a logical copy of the
        -- database into another cluster (docs/security.md: restoring a sealed log)
        RAISE WARNING 'memgov: the decision log''s last seal ends at transaction %, ahead of this cluster''s next transaction %; nothing sealed',
                      v_after_x, v_next_xid
            USING ERRCODE = 'MG409',
                  HINT = 'a restored copy must start its transaction counter past the chain: see docs/security.md';
        v_horizon := 0;
    END IF;
    LOOP
        SELECT count(*)::integer,
               array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
               string_agg(memgov.decision_digest(b.d), ''::bytea ORDER BY b.xact_id, b.decision_id),
               max(b.xact_id),
               max(b.decided_at)
          INTO v_count, v_ids, v_digests, v_last_x, v_decided
          -- the digests are taken of the batch only, after the LIMIT (in the subquery's
          -- target list they would be computed for every remaining row, once per batch)
          FROM (SELECT d.xact_id, d.decision_id, d.decided_at, d
                  FROM memgov.decision_log d
                 WHERE d.xact_id >= v_after_x AND d.xact_id < v_horizon
                   AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
                 ORDER BY d.xact_id, d.decision_id
                 LIMIT p_batch_rows) AS b;
        EXIT WHEN v_count = 0;
        v_seal_id := v_seal_id + 1;
        v_new_hash := memgov.seal_hash(v_hash, v_seal_id, v_after_x, v_after_d, v_last_x, v_ids[v_count],
                                       v_ids, v_digests);
        INSERT INTO memgov.decision_log_seals
               (seal_id, sealed_by, horizon_xact_id, after_xact_id, after_decision_id, last_xact_id,
                last_decision_id, row_count, decision_ids, row_digests, last_decided_at, prev_hash, seal_hash)
        VALUES (v_seal_id, memgov.invoker_role(), v_horizon, v_after_x, v_after_d, v_last_x,
                v_ids[v_count], v_count, v_ids, v_digests, v_decided, v_hash, v_new_hash);
        v_hash := v_new_hash;
        v_after_x := v_last_x;
        v_after_d := v_ids[v_count];
        v_rows := v_rows + v_count;
        v_seals := v_seals + 1;
        EXIT WHEN v_count < p_batch_rows;
    END LOOP;
    -- the run's summary, when the caller is that run (it holds the maintenance lease)
    IF p_run_id IS NOT NULL THEN
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('sealed', v_rows)
         WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
           AND memgov.maintenance_holder() = pg_backend_pid();
    END IF;
    RETURN jsonb_build_object('sealed', v_rows, 'seals', v_seals, 'last_seal_id', nullif(v_seal_id, 0),
                              'last_hash', CASE WHEN v_seal_id > 0 THEN encode(v_hash, 'hex') END,
                              'horizon_xact_id', v_horizon);
END
$$;

-- Recomputes the chain: every seal in sequence, continuing the previous one (or the last
-- archive), its hash its own, its rows exactly the rows now in its range with the digests
-- it recorded; no row left before the chain's start, none after its end that the last
-- seal should have covered. Returns
--   {"ok", "seals", "rows", "first_break": {"seal_id", "decision_id", "problem", "detail"} | null,
--    "last_seal_id", "last_hash", "unsealed_rows", "archived": {...}, "anchor": ...}
-- problem: 'altered' (the row, or with decision_id null the seal, differs from what was
-- sealed), 'missing' (a sealed row or seal is gone), 'extra' (a row no seal accounts for).
-- p_anchor_seal_id / p_anchor_hash: a seal's hash kept outside the database; a different
-- hash there is a break (the chain was rewritten).
CREATE FUNCTION memgov.verify_decision_log(p_anchor_seal_id bigint DEFAULT NULL, p_anchor_hash text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE  -- one snapshot for every statement: seals and rows as of one moment
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_archive     memgov.decision_log_archives;
    v_seal        memgov.decision_log_seals;
    v_hash        bytea := decode(repeat('00', 32), 'hex');
    v_next_seal   bigint := 1;
    v_after_x     bigint := 0;
    v_after_d     bigint := 0;
    v_horizon     bigint := 0;
    v_next_xid    bigint := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    v_break       jsonb;
    v_anchor      text;
    v_seals       bigint := 0;
    v_rows        bigint := 0;
    v_archives    integer := 0;
    v_arch_seals  bigint := 0;
    v_arch_rows   bigint := 0;
    v_ids         bigint[];
    v_digests     bytea;
    v_stored      bigint;
    v_actual      bigint;
    v_id          bigint;
    v_last_id     bigint;
    v_last_hash   bytea;
    v_end_x       bigint;
    v_end_d       bigint;
    v_unsealed    bigint;
BEGIN
    IF (p_anchor_seal_id IS NULL) <> (p_anchor_hash IS NULL)
       OR (p_anchor_hash IS NOT NULL AND p_anchor_hash !~ '^[0-9A-Fa-f]{64}$') THEN
        RAISE EXCEPTION 'memgov: an anchor is a seal id and that seal''s 64-digit hex hash'
            USING ERRCODE = '22023';
    END IF;
    v_anchor := CASE WHEN p_anchor_seal_id IS NOT NULL THEN 'not reached' END;

    -- the archives: each continues the previous one; the chain goes on from the last
    FOR v_archive IN SELECT * FROM memgov.decision_log_archives a ORDER BY a.archive_id LOOP
        IF v_archive.archive_id <> v_archives + 1 OR v_archive.first_seal_id <> v_next_seal THEN
            v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                'detail', format('archive record %s does not continue the chain at seal %s',
                                 v_archive.archive_id, v_next_seal));
            EXIT;
        END IF;
        IF p_anchor_seal_id BETWEEN v_archive.first_seal_id AND v_archive.last_seal_id THEN
            IF p_anchor_seal_id = v_archive.last_seal_id THEN
                IF v_archive.last_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL,
                        'problem', 'altered', 'detail', format(
                            'archived seal %s has a different hash than its anchor: the chain was rewritten',
                            p_anchor_seal_id));
                    EXIT;
                END IF;
                v_anchor := 'matched';
            ELSE
                v_anchor := 'archived';  -- its hash went with its rows
            END IF;
        END IF;
        v_archives := v_archives + 1;
        v_arch_seals := v_arch_seals + (v_archive.last_seal_id - v_archive.first_seal_id + 1);
        v_arch_rows := v_arch_rows + v_archive.row_count;
        v_next_seal := v_archive.last_seal_id + 1;
        v_hash := v_archive.last_hash;
        v_after_x := v_archive.last_xact_id;
        v_after_d := v_archive.last_decision_id;
    END LOOP;

    -- nothing left of what was archived
    IF v_break IS NULL AND v_archives > 0 THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id <= v_after_x AND (d.xact_id, d.decision_id) <= (v_after_x, v_after_d)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row lies in the archived part of the log');
        END IF;
    END IF;

    -- the seals, in sequence
    IF v_break IS NULL THEN
        FOR v_seal IN SELECT * FROM memgov.decision_log_seals s ORDER BY s.seal_id LOOP
            IF v_seal.seal_id <> v_next_seal THEN
                v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                    'detail', format('seal %s is gone', v_next_seal));
                EXIT;
            END IF;
            IF v_seal.prev_hash <> v_hash
               OR (v_seal.after_xact_id, v_seal.after_decision_id) <> (v_after_x, v_after_d) THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal does not continue the previous one');
                EXIT;
            END IF;
            IF coalesce(array_length(v_seal.decision_ids, 1), 0) <> v_seal.row_count
               OR length(v_seal.row_digests) <> 32 * v_seal.row_count
               OR v_seal.decision_ids[v_seal.row_count] <> v_seal.last_decision_id
               OR memgov.seal_hash(v_seal.prev_hash, v_seal.seal_id, v_seal.after_xact_id,
                                   v_seal.after_decision_id, v_seal.last_xact_id, v_seal.last_decision_id,
                                   v_seal.decision_ids, v_seal.row_digests) <> v_seal.seal_hash THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal record was altered');
                EXIT;
            END IF;
            IF v_seal.seal_id = p_anchor_seal_id THEN
                IF v_seal.seal_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                        'detail', 'the seal''s hash differs from its anchor: the chain was rewritten');
                    EXIT;
                END IF;
                v_anchor := 'matched';
            END IF;
            -- its rows as they are now, in the seal's order
            SELECT array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
                   string_agg(b.digest, ''::bytea ORDER BY b.xact_id, b.decision_id)
              INTO v_ids, v_digests
              FROM (SELECT d.xact_id, d.decision_id, memgov.decision_digest(d) AS digest
                      FROM memgov.decision_log d
                     WHERE d.xact_id >= v_seal.after_xact_id AND d.xact_id <= v_seal.last_xact_id
                       AND (d.xact_id, d.decision_id) > (v_seal.after_xact_id, v_seal.after_decision_id)
                       AND (d.xact_id, d.decision_id) <= (v_seal.last_xact_id, v_seal.last_decision_id)) AS b;
            IF v_ids IS DISTINCT FROM v_seal.decision_ids OR v_digests IS DISTINCT FROM v_seal.row_digests THEN
                -- the first position where they part
                FOR v_i IN 1 .. greatest(v_seal.row_count, coalesce(array_length(v_ids, 1), 0)) LOOP
                    v_stored := v_seal.decision_ids[v_i];
                    v_actual := v_ids[v_i];
                    IF v_stored IS NOT DISTINCT FROM v_actual THEN
                        CONTINUE WHEN substring(v_seal.row_digests FROM (v_i - 1) * 32 + 1 FOR 32)
                                      = substring(v_digests FROM (v_i - 1) * 32 + 1 FOR 32);
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    ELSIF v_stored IS NOT NULL AND NOT (v_stored = ANY (coalesce(v_ids, '{}'))) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'missing', 'detail', 'a sealed row is gone');
                    ELSIF v_actual IS NOT NULL AND NOT (v_actual = ANY (v_seal.decision_ids)) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_actual,
                            'problem', 'extra', 'detail', 'a row the seal does not account for');
                    ELSE
                        -- both ids are there, in another order: the row's xact_id was changed
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    END IF;
                    EXIT;
                END LOOP;
                v_break := coalesce(v_break, jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                    'problem', 'altered', 'detail', 'the rows differ from what was sealed'));
                EXIT;
            END IF;
            v_seals := v_seals + 1;
            v_rows := v_rows + v_seal.row_count;
            v_next_seal := v_seal.seal_id + 1;
            v_hash := v_seal.seal_hash;
            v_after_x := v_seal.last_xact_id;
            v_after_d := v_seal.last_decision_id;
            v_horizon := v_seal.horizon_xact_id;
        END LOOP;
    END IF;

    -- an anchor beyond the chain: the chain was cut back
    IF v_break IS NULL AND v_anchor = 'not reached' THEN
        v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL, 'problem', 'missing',
            'detail', format('the anchored seal %s is gone: the chain was cut back', p_anchor_seal_id));
    END IF;

    -- after the chain: rows not sealed yet, unless the last seal would have covered them (their
    -- transaction had ended before its horizon) or their transaction has not even begun
    IF v_break IS NULL THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id >= v_after_x AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
           AND (d.xact_id < v_horizon OR d.xact_id >= v_next_xid)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row after the last seal that its transaction id places before it');
        END IF;
    END IF;

    -- the chain's end as recorded (what to anchor), and what lies after it
    SELECT s.seal_id, s.seal_hash, s.last_xact_id, s.last_decision_id
      INTO v_last_id, v_last_hash, v_end_x, v_end_d
      FROM memgov.decision_log_seals s
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        SELECT a.last_seal_id, a.last_hash, a.last_xact_id, a.last_decision_id
          INTO v_last_id, v_last_hash, v_end_x, v_end_d
          FROM memgov.decision_log_archives a
         ORDER BY a.archive_id DESC
         LIMIT 1;
    END IF;
    SELECT count(*) INTO v_unsealed
      FROM memgov.decision_log d
     WHERE d.xact_id >= coalesce(v_end_x, 0)
       AND (d.xact_id, d.decision_id) > (coalesce(v_end_x, 0), coalesce(v_end_d, 0));

    RETURN jsonb_build_object(
        'ok', v_break IS NULL,
        'seals', v_seals,
        'rows', v_rows,
        'first_break', v_break,
        'last_seal_id', v_last_id,
        'last_hash', encode(v_last_hash, 'hex'),
        'unsealed_rows', v_unsealed,
        'archived', jsonb_build_object('archives', v_archives, 'seals', v_arch_seals, 'rows', v_arch_rows),
        'anchor', v_anchor);
END
$$;

-- Removes from the log the sealed rows decided before p_before: whole seals, the oldest first,
-- while every row of a seal was decided before it. Refuses (MG409) when the log does not
-- verify: archival never erases the evidence of a break. Records what it removed in
-- memgov.decision_log_archives; verification goes on from there. Export the rows first.
CREATE FUNCTION memgov.archive_decision_log(p_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_report    jsonb;
    v_first     bigint;
    v_last      memgov.decision_log_seals;
    v_rows      bigint;
    v_archive   bigint;
    v_deleted   bigint;
BEGIN
    IF p_before IS NULL THEN
        RAISE EXCEPTION 'memgov: archive_decision_log needs a time: rows decided before it are archived'
            USING ERRCODE = '22023';
    END IF;
    -- no seal is made while we archive
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    v_report := memgov.verify_decision_log();
    IF NOT (v_report ->> 'ok')::boolean THEN
        RAISE EXCEPTION 'memgov: the decision log does not verify (%); nothing archived', v_report -> 'first_break'
            USING ERRCODE = 'MG409',
                  HINT = 'run memgov verify-log and find out what changed; archiving would erase the evidence';
    END IF;
    SELECT min(s.seal_id) INTO v_first FROM memgov.decision_log_seals s;
    -- the seals before the first one that holds a row decided at or after p_before
    SELECT * INTO v_last
      FROM memgov.decision_log_seals s
     WHERE s.seal_id < coalesce((SELECT min(o.seal_id) FROM memgov.decision_log_seals o
                                  WHERE o.last_decided_at >= p_before), s.seal_id + 1)
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('archived_rows', 0, 'archived_seals', 0, 'archive_id', NULL,
                                  'decided_before', p_before);
    END IF;
    SELECT sum(s.row_count) INTO v_rows FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    SELECT coalesce(max(a.archive_id), 0) + 1 INTO v_archive FROM memgov.decision_log_archives a;
    INSERT INTO memgov.decision_log_archives
           (archive_id, archived_by, decided_before, first_seal_id, last_seal_id, last_xact_id,
            last_decision_id, row_count, last_hash)
    VALUES (v_archive, memgov.invoker_role(), p_before, v_first, v_last.seal_id, v_last.last_xact_id,
            v_last.last_decision_id, v_rows, v_last.seal_hash);
    -- the guard triggers let this transaction delete what that record covers, and nothing else
    PERFORM set_config('memgov.archiving', v_archive::text, true);
    DELETE FROM memgov.decision_log d
     WHERE d.xact_id <= v_last.last_xact_id
       AND (d.xact_id, d.decision_id) <= (v_last.last_xact_id, v_last.last_decision_id);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    PERFORM set_config('memgov.archiving', '', true);
    IF v_deleted <> v_rows THEN  -- cannot happen: the log verified a moment ago
        RAISE EXCEPTION 'memgov: archiving found % rows where the seals hold %; nothing archived', v_deleted, v_rows
            USING ERRCODE = 'MG409';
    END IF;
    RETURN jsonb_build_object('archive_id', v_archive, 'archived_rows', v_rows,
                              'archived_seals', v_last.seal_id - v_first + 1,
                              'first_seal_id', v_first, 'last_seal_id', v_last.seal_id,
                              'last_hash', encode(v_last.seal_hash, 'hex'), 'decided_before', p_before);
END
$$;

-- The chain is global, the log of every tenant: memgov_admin reads, seals, verifies, archives.
REVOKE EXECUTE ON FUNCTION
    memgov.refuse_log_change(),
    memgov.decision_digest(memgov.decision_log),
    memgov.seal_hash(bytea, bigint, bigint, bigint, bigint, bigint, bigint[], bytea),
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    TO memgov_admin;
GRANT SELECT ON memgov.decision_log_seals, memgov.decision_log_archives TO memgov_admin;

RESET ROLE;

-- migrate:downgrade
-- sql/080_audit.sql: the decision log's guards, seals and archive records
DROP TRIGGER refuse_change ON memgov.decision_log;
DROP TRIGGER refuse_truncate ON memgov.decision_log;
DROP TABLE memgov.decision_log_archives;
DROP TABLE memgov.decision_log_seals;
DO $drop$
DECLARE
    v_routine regprocedure;
BEGIN
    FOR v_routine IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           AND p.proname = ANY (ARRAY[
               'run_maintenance', 'apply_retention', 'finish_maintenance', 'start_maintenance',
               'release_maintenance', 'check_lease', 'claim_maintenance', 'maintenance_holder',
               'retention_preview', 'sweep_batch',
               'log_deletion', 'retention_held', 'due_reason', 'retention_interval',
               'forget', 'edit', 'reject', 'confirm', 'govern_feedback_write', 'check_not_pending',
               'record_feedback', 'feedback_setting', 'held_insert_request', 'memory_for_feedback',
               'archive_decision_log', 'verify_decision_log', 'seal_decision_log', 'seal_hash',
               'decision_digest', 'refuse_log_change'])
    LOOP
        EXECUTE pg_catalog.format('DROP ROUTINE %s', v_routine);
    END LOOP;
END
$drop$;
DROP TABLE memgov.maintenance_runs;
DROP TABLE memgov.deletion_log;
