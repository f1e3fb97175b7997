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
