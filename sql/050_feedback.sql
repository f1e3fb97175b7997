-- memgov: the user's feedback on a memory (docs/retention.md).
--
-- confirm, reject and edit are the user's acts: the application calls them on
-- the user's behalf as memgov_reviewer; agents (memgov_writer) cannot.
-- forget is a governed DELETE that writers may call too. Every call locks
-- the row (concurrent feedback never loses an update), works in exact
-- numeric clamped to [0, 1], and is recorded in memgov.feedback_events.
--
-- The deltas come from the `feedback:` section of the tenant's active policy
-- (memgov.feedback_setting: the engine's default for what it leaves out).

SET ROLE memgov_owner;

-- Locks a memory for feedback; raises MG404 when it does not exist in the caller's tenant
-- (memgov.check_found).
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
        PERFORM memgov.check_found('memory', p_memory_id, NULL);  -- raises MG404
    WHEN too_many_rows THEN
        RAISE EXCEPTION 'memgov: memory % exists in several tenants', p_memory_id
            USING ERRCODE = 'MG409', HINT = 'SET memgov.org_id to the tenant you mean';
END
$$;

-- The pending approval request of a held INSERT, locked (MG404 when there is none): the one
-- whose decision stored the row (decision_id), not another request for the same memory_id.
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
       AND r.status = 'pending' AND r.operation = 'remember' AND r.decision_id = p_item.decision_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: pending memory % has no open approval request', p_item.memory_id
            USING ERRCODE = 'MG404';
    END IF;
    RETURN v_request;
END
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

-- Decides a write memgov applies on its caller's behalf (edit, forget) and hands the
-- decision to memgov.govern (logged, filed, announced; MG403 for a denial). Returns the
-- outcome with its decision.
CREATE FUNCTION memgov.govern_feedback_write(p_operation text, p_item memgov.long_term_memory_items)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := memgov.invoker_role();
BEGIN
    RETURN memgov.govern(p_operation, p_item, v_actor, memgov.decide(p_item, p_operation, v_actor),
                         memgov.judge_shadow(p_operation, p_item, NULL, v_actor));
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
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta')));
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now()
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    PERFORM memgov.engine_writes_done();
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
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta')));
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below')
       AND NOT memgov.retention_held(v_item) THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.drop_samples(v_item.org_id, ARRAY[v_item.memory_id]);
        PERFORM memgov.log_deletion(v_item, 'rejected', NULL);
        RETURN memgov.record_feedback(v_item, 'reject', v_after, 'deleted');
    END IF;
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    PERFORM memgov.engine_writes_done();
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
                   memgov.feedback_setting(v_item.org_id, 'edit_confidence')));
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
        PERFORM memgov.engine_writes();
        UPDATE memgov.long_term_memory_items AS m
           SET fact_text = new_text, confidence = v_after,
               policy_version = v_outcome.policy_version, decision_id = v_outcome.decision_id
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.engine_writes_done();
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
        PERFORM memgov.drop_samples(v_item.org_id, ARRAY[v_item.memory_id]);
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$$;

GRANT EXECUTE ON FUNCTION memgov.confirm(uuid), memgov.reject(uuid), memgov.edit(uuid, text)
    TO memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.forget(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;
