-- memgov: the user's feedback on a memory (docs/retention.md).
--
-- confirm, reject and edit are the user's acts: the application calls them on
-- the user's behalf as memgov_reviewer; agents (memgov_writer) cannot.
-- forget is a governed DELETE that writers may call too; forget_where forgets every
-- memory a filter matches (an erasure request), each decided as forget decides one. Every call locks
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
        PERFORM memgov.log_deletion(v_item, 'forgotten', NULL);
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$$;

-- Checks memgov.forget_where's filter and returns it whole, its tenant filled in (the
-- session's when it names none). Raises 22023 for anything but an object of the known keys
-- with well-formed values, and for a filter without a scope field besides the tenant.
CREATE FUNCTION memgov.forget_filter(p_filter jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_scope    constant text[] := ARRAY['project_id', 'agent_id', 'subject_id', 'session_id'];
    c_keys     constant text[] := ARRAY['org_id', 'project_id', 'agent_id', 'subject_id', 'session_id',
                                        'categories', 'created_before', 'created_after'];
    v_key      text;
    v_value    jsonb;
    v_unknown  text;
    v_at       timestamptz;
BEGIN
    IF p_filter IS NULL OR jsonb_typeof(p_filter) <> 'object' THEN
        RAISE EXCEPTION 'memgov: forget_where takes a JSON object, not %', coalesce(jsonb_typeof(p_filter), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'for example {"org_id": "acme", "subject_id": "user-42"}';
    END IF;
    SELECT string_agg(format('%I', k), ', ' ORDER BY k) INTO v_unknown
      FROM jsonb_object_keys(p_filter) AS k WHERE k <> ALL (c_keys);
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION 'memgov: forget_where does not know the filter key(s) %', v_unknown
            USING ERRCODE = '22023', HINT = 'the keys are ' || array_to_string(c_keys, ', ');
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(p_filter) AS e LOOP
        IF v_key = 'categories' THEN
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0
               OR EXISTS (SELECT FROM jsonb_array_elements(v_value) AS c
                           WHERE jsonb_typeof(c) <> 'string' OR c #>> '{}' = '') THEN
                RAISE EXCEPTION 'memgov: forget_where''s categories must be a non-empty array of category names, not %',
                                left(v_value::text, 200)
                    USING ERRCODE = '22023', HINT = 'for example "categories": ["preference", "contact"]';
            END IF;
        ELSIF jsonb_typeof(v_value) <> 'string' OR v_value #>> '{}' = '' THEN
            RAISE EXCEPTION 'memgov: forget_where''s % must be a non-empty string, not %', v_key, left(v_value::text, 200)
                USING ERRCODE = '22023';
        ELSIF v_key IN ('created_before', 'created_after') THEN
            BEGIN
                v_at := (v_value #>> '{}')::timestamptz;
            EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_parameter_value THEN
                RAISE EXCEPTION 'memgov: forget_where''s % is not a timestamp: %', v_key, left(v_value::text, 200)
                    USING ERRCODE = '22023', HINT = 'an ISO 8601 timestamp, for example "2026-01-31T00:00:00Z"';
            END;
        END IF;
    END LOOP;
    IF NOT p_filter ?| c_scope THEN
        RAISE EXCEPTION 'memgov: forget_where needs a scope besides the tenant: one of %', array_to_string(c_scope, ', ')
            USING ERRCODE = '22023',
                  HINT = 'categories and creation times narrow a scope; they never make one';
    END IF;
    IF (p_filter ->> 'created_after')::timestamptz >= (p_filter ->> 'created_before')::timestamptz THEN
        RAISE EXCEPTION 'memgov: forget_where''s created_after (%) is not before its created_before (%)',
                        p_filter ->> 'created_after', p_filter ->> 'created_before'
            USING ERRCODE = '22023';
    END IF;
    RETURN p_filter || jsonb_build_object('org_id', memgov.check_tenant_id(
        coalesce(p_filter ->> 'org_id', nullif(current_setting('memgov.org_id', true), ''))));
END
$$;

-- Whether a memory matches a checked memgov.forget_where filter (memgov.forget_filter), its
-- tenant aside. (SQL without a SET clause: inlined into forget_where's query.)
CREATE FUNCTION memgov.forget_matches(p_item memgov.long_term_memory_items, p_filter jsonb)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT (p_filter ->> 'project_id' IS NULL OR p_item.project_id = p_filter ->> 'project_id')
       AND (p_filter ->> 'agent_id' IS NULL OR p_item.agent_id = p_filter ->> 'agent_id')
       AND (p_filter ->> 'subject_id' IS NULL OR p_item.subject_id = p_filter ->> 'subject_id')
       AND (p_filter ->> 'session_id' IS NULL OR p_item.session_id = p_filter ->> 'session_id')
       AND (p_filter -> 'categories' IS NULL OR (p_filter -> 'categories') ? p_item.category)
       AND (p_filter ->> 'created_before' IS NULL
            OR p_item.created_at < (p_filter ->> 'created_before')::timestamptz)
       AND (p_filter ->> 'created_after' IS NULL
            OR p_item.created_at > (p_filter ->> 'created_after')::timestamptz)
$$;

-- Forgets every memory of a tenant that a filter matches (docs/reference.md): each decided
-- as a `forget` on behalf of the caller, as memgov.forget decides one. What is allowed is
-- deleted at once, its decisions logged once per distinct decision (memory_ids), and one
-- deletion_log row lists it; a hold for approval, a quarantine or a denial (a legal hold
-- among them) keeps the memory and logs a row of its own, through memgov.govern (a denial
-- raises nothing: it is counted). A memory pending approval is left to its reviewers (not
-- decided). With dry_run, the same decisions are taken and counted, and nothing is locked,
-- logged, filed or deleted. Returns {forgotten, held, denied, pending, dry_run}.
CREATE FUNCTION memgov.forget_where(filter jsonb, dry_run boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_filter      jsonb := memgov.forget_filter(forget_where.filter);
    v_org         text := memgov.check_tenant(v_filter ->> 'org_id');
    v_actor       text := memgov.invoker_role();
    v_shadowed    boolean := memgov.shadow_of(v_org) IS NOT NULL;
    v_matches     refcursor;
    v_item        memgov.long_term_memory_items;
    v_decision    memgov.decision;
    v_shadow      memgov.shadow_verdict;
    v_outcome     memgov.write_outcome;
    v_action      text;
    v_key         text;
    v_at          integer;
    v_keys        text[] := '{}';     -- the distinct decisions of what is deleted, and their log rows
    v_logged      bigint[] := '{}';
    v_ids         uuid[] := '{}';     -- what is deleted, and the log row of each
    v_of          bigint[] := '{}';
    v_deleted     integer;
    v_counts      jsonb := '{"forgotten": 0, "held": 0, "denied": 0, "pending": 0}';
BEGIN
    IF forget_where.dry_run IS NULL THEN
        RAISE EXCEPTION 'memgov: forget_where''s dry_run must be true or false' USING ERRCODE = '22023';
    END IF;
    -- in memory_id order, each locked as forget() locks its memory (a dry run locks nothing)
    IF forget_where.dry_run THEN
        OPEN v_matches FOR SELECT * FROM memgov.long_term_memory_items m
         WHERE m.org_id = v_org AND memgov.forget_matches(m, v_filter) ORDER BY m.memory_id;
    ELSE
        OPEN v_matches FOR SELECT * FROM memgov.long_term_memory_items m
         WHERE m.org_id = v_org AND memgov.forget_matches(m, v_filter) ORDER BY m.memory_id FOR UPDATE;
    END IF;
    LOOP
        FETCH v_matches INTO v_item;
        EXIT WHEN NOT FOUND;
        IF v_item.status = 'pending_approval' THEN
            v_counts := jsonb_set(v_counts, '{pending}', to_jsonb((v_counts ->> 'pending')::integer + 1));
            CONTINUE;
        END IF;
        v_decision := memgov.decide(v_item, 'forget', v_actor);
        v_action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
        IF NOT forget_where.dry_run THEN
            v_shadow := CASE WHEN v_shadowed THEN memgov.judge_shadow('forget', v_item, NULL, v_actor) END;
            IF v_action = 'allow' AND v_shadow.shadow_id IS NULL THEN
                -- deleted: its decision logged once for every memory deleted under it
                v_key := concat_ws(E'\x1f', v_decision.action, v_decision.enforced, v_decision.policy_version,
                                   v_decision.mode, v_decision.risk_level,
                                   array_to_string(v_decision.reason_codes, E'\x1f', ''),
                                   array_to_string(v_decision.matched_rule_ids, E'\x1f', ''));
                v_at := array_position(v_keys, v_key);
                IF v_at IS NULL THEN
                    v_keys := v_keys || v_key;
                    v_logged := v_logged || memgov.log_decision('forget', v_item.memory_id, v_org, v_actor, v_decision);
                    v_at := cardinality(v_keys);
                END IF;
                v_ids := v_ids || v_item.memory_id;
                v_of := v_of || v_logged[v_at];
            ELSE
                -- a row of its own: a request, a quarantine entry, a denial, or a shadow's verdict beside it
                v_outcome := memgov.govern('forget', v_item, v_actor, v_decision, v_shadow, p_raise => false);
                v_action := v_outcome.action;
                IF v_action = 'allow' THEN
                    v_ids := v_ids || v_item.memory_id;
                    v_of := v_of || v_outcome.decision_id;
                END IF;
            END IF;
        END IF;
        v_key := CASE v_action WHEN 'allow' THEN 'forgotten' WHEN 'deny' THEN 'denied' ELSE 'held' END;
        v_counts := jsonb_set(v_counts, ARRAY[v_key], to_jsonb((v_counts ->> v_key)::integer + 1));
    END LOOP;
    CLOSE v_matches;

    IF cardinality(v_ids) > 0 THEN
        DELETE FROM memgov.long_term_memory_items m WHERE m.org_id = v_org AND m.memory_id = ANY (v_ids);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> cardinality(v_ids) THEN
            RAISE EXCEPTION 'memgov: forget_where deleted % of the % memories it had locked', v_deleted, cardinality(v_ids)
                USING ERRCODE = 'XX000';
        END IF;
        PERFORM memgov.drop_samples(v_org, v_ids);
        -- each shared decision lists its memories (a decision of one memory keeps its memory_id)
        UPDATE memgov.decision_log d
           SET memory_id = NULL, memory_ids = g.ids, memory_count = cardinality(g.ids)
          FROM (SELECT o.decision_id, array_agg(o.memory_id ORDER BY o.memory_id) AS ids
                  FROM unnest(v_ids, v_of) AS o (memory_id, decision_id)
                 GROUP BY o.decision_id HAVING count(*) > 1) AS g
         WHERE d.org_id = v_org AND d.decision_id = g.decision_id;
        INSERT INTO memgov.deletion_log (org_id, reason, policy_version, memory_count, memory_ids)
        VALUES (v_org, 'forgotten', memgov.policy_settings(v_org) ->> 'version', cardinality(v_ids),
                ARRAY(SELECT i FROM unnest(v_ids) AS i ORDER BY i));
    END IF;
    RETURN v_counts || jsonb_build_object('dry_run', forget_where.dry_run);
END
$$;

GRANT EXECUTE ON FUNCTION memgov.confirm(uuid), memgov.reject(uuid), memgov.edit(uuid, text)
    TO memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.forget(uuid), memgov.forget_where(jsonb, boolean)
    TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;
