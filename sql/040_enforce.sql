-- memgov: the write path. Every INSERT, UPDATE and DELETE on
-- memgov.long_term_memory_items is decided by the active policy (SPEC §2, §3).
--
-- memgov.enforce_write() is the row trigger. It runs with the writer's rights,
-- so `current_user` is the role that performs the write: memgov's own
-- SECURITY DEFINER functions (approve, confirm, ...) write as memgov_owner
-- and take the engine's path; everybody else is governed. The decision, the
-- log row and any approval request or quarantine entry are made by
-- memgov.govern_write(), which runs as memgov_owner and refuses to be called
-- outside a trigger.
--
-- SQLSTATEs: MG403 write denied (error), MG201 write held for approval
-- (notice), MG202 write quarantined (notice).

SET ROLE memgov_owner;

-- What memgov.govern_write() decided about one row.
CREATE TYPE memgov.write_outcome AS (
    action          text,       -- the action applied: allow, deny, require_approval, quarantine
    decision        jsonb,      -- the decision (SPEC §2) plus decision_id
    decision_id     bigint,
    policy_version  text,
    request_id      uuid,
    quarantine_id   uuid
);

-- The role on whose behalf memgov's SECURITY DEFINER functions act (their current_user is memgov_owner).
CREATE FUNCTION memgov.invoker_role()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(nullif(current_setting('role'), 'none'), session_user::text)
$$;

-- Expiry of a row under its retention policy (NULL: no automatic expiry).
CREATE FUNCTION memgov.expiry_of(p_retention_policy text, p_created_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE p_retention_policy
               WHEN 'ttl_7d'  THEN p_created_at + interval '7 days'
               WHEN 'ttl_30d' THEN p_created_at + interval '30 days'
           END
$$;

-- Since when a confidence_based row has been below its tenant's confidence_floor (NULL: it is not).
CREATE FUNCTION memgov.low_confidence_since(p_item memgov.long_term_memory_items)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
               WHEN p_item.retention_policy IS DISTINCT FROM 'confidence_based' THEN NULL
               WHEN p_item.confidence < coalesce(
                        (memgov.policy_settings(p_item.org_id) #>> '{retention,confidence_floor}')::numeric, 0.3)
               THEN coalesce(p_item.low_confidence_since, pg_catalog.now())
           END
$$;

-- Decides one write, logs the decision and files the request or quarantine entry it calls for.
CREATE FUNCTION memgov.govern_write(
    p_operation  text,
    p_item       memgov.long_term_memory_items,
    p_actor      text)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_decision  memgov.decision;
    v_outcome   memgov.write_outcome;
    v_payload   jsonb;
BEGIN
    IF pg_trigger_depth() = 0 THEN
        RAISE EXCEPTION 'memgov.govern_write() is called by the write trigger only'
            USING ERRCODE = '42501';
    END IF;

    v_decision := memgov.decide(p_item, p_operation, p_actor);
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
    v_outcome.policy_version := v_decision.policy_version;

    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, risk_score, risk_level)
    VALUES (p_operation, p_item.memory_id, p_item.org_id, v_decision.action,
            v_decision.reason_codes, v_decision.matched_rule_ids, v_decision.policy_version,
            v_decision.mode, v_decision.enforced, p_actor,
            round(v_decision.risk_score, 3), v_decision.risk_level)
    RETURNING decision_id INTO v_outcome.decision_id;

    IF v_outcome.action IN ('require_approval', 'quarantine') THEN
        v_payload := to_jsonb(p_item);
    END IF;

    IF v_outcome.action = 'require_approval' THEN
        INSERT INTO memgov.approval_requests
               (memory_id, org_id, operation, payload, requested_by, decision_id, policy_version)
        VALUES (p_item.memory_id, p_item.org_id, p_operation, v_payload, p_actor,
                v_outcome.decision_id, v_decision.policy_version)
        RETURNING request_id INTO v_outcome.request_id;
        PERFORM pg_notify('memgov_approvals', v_outcome.request_id::text);
    ELSIF v_outcome.action = 'quarantine' THEN
        INSERT INTO memgov.quarantine
               (org_id, operation, memory_id, payload, decision, quarantined_by)
        VALUES (p_item.org_id, p_operation, p_item.memory_id, v_payload,
                memgov.decision_json(v_decision), p_actor)
        RETURNING quarantine_id INTO v_outcome.quarantine_id;
    END IF;

    -- the decision as JSON is for errors, notices and remember(): a stored write needs none
    IF v_outcome.action <> 'allow' OR current_setting('memgov.capture', true) = 'on' THEN
        v_outcome.decision := memgov.decision_json(v_decision)
            || jsonb_build_object('decision_id', v_outcome.decision_id,
                                  'memory_id', p_item.memory_id,
                                  'request_id', v_outcome.request_id,
                                  'quarantine_id', v_outcome.quarantine_id);
    END IF;
    RETURN v_outcome;
END
$$;

-- Raises MG403 for a denied write: rule ids and reason codes in the message, the decision in DETAIL.
CREATE FUNCTION memgov.raise_denied(p_operation text, p_outcome memgov.write_outcome)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rules    text := coalesce(nullif(array_to_string(ARRAY(
                           SELECT jsonb_array_elements_text(p_outcome.decision -> 'matched_rule_ids')), ', '), ''),
                       '(no rule: on_policy_miss)');
    v_reasons  text := array_to_string(ARRAY(
                           SELECT jsonb_array_elements_text(p_outcome.decision -> 'reason_codes')), ', ');
BEGIN
    RAISE EXCEPTION 'memgov: % denied by rule % [%]', p_operation, v_rules, v_reasons
        USING ERRCODE = 'MG403',
              DETAIL = p_outcome.decision::text,
              HINT = 'the active policy refuses this write; `memgov evaluate --explain` shows why';
END
$$;

-- The row trigger on memgov.long_term_memory_items (BEFORE INSERT OR UPDATE OR DELETE).
CREATE FUNCTION memgov.enforce_write()
RETURNS trigger
LANGUAGE plpgsql
-- search_path is pinned although the trigger runs with the writer's rights:
-- otherwise a writer that may create objects could put its own `=` operator
-- ahead of pg_catalog's and steer the comparisons below.
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor      text := current_user;
    v_operation  text;
    v_item       memgov.long_term_memory_items;
    v_outcome    memgov.write_outcome;
BEGIN
    IF current_user = 'memgov_owner' THEN
        -- memgov's own functions: edit() and forget() ask for a decision on
        -- behalf of their caller; approve, confirm, the sweep ... have decided
        -- already and set the engine's columns themselves
        v_actor := pg_catalog.current_setting('memgov.govern_as', true);
        IF coalesce(v_actor, '') = '' THEN
            IF TG_OP = 'DELETE' THEN
                RETURN OLD;
            END IF;
            IF TG_OP = 'UPDATE' AND NEW.updated_at = OLD.updated_at THEN
                NEW.updated_at := pg_catalog.now();
            END IF;
            NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
            NEW.low_confidence_since := memgov.low_confidence_since(NEW);
            RETURN NEW;
        END IF;
    END IF;

    -- the engine's columns: whatever a writer's statement said, the engine decides
    IF TG_OP = 'INSERT' THEN
        NEW.created_at := pg_catalog.now();
        NEW.updated_at := NEW.created_at;
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        NEW.status := 'active';
        NEW.last_confirmed_at := NULL;
        NEW.low_confidence_since := NULL;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        v_operation := 'remember';
        v_item := NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.org_id IS DISTINCT FROM OLD.org_id OR NEW.memory_id IS DISTINCT FROM OLD.memory_id THEN
            RAISE EXCEPTION 'memgov: a memory''s memory_id and org_id never change'
                USING ERRCODE = '42501',
                      HINT = 'forget the memory and remember it again under the new tenant';
        END IF;
        NEW.created_at := OLD.created_at;
        NEW.updated_at := pg_catalog.now();
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        -- an UPDATE never changes status: pending rows become active through approve/confirm
        NEW.status := OLD.status;
        NEW.last_confirmed_at := OLD.last_confirmed_at;
        NEW.low_confidence_since := OLD.low_confidence_since;
        NEW.policy_version := OLD.policy_version;
        NEW.decision_id := OLD.decision_id;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        v_operation := 'update';
        v_item := NEW;
    ELSE
        v_operation := 'forget';
        v_item := OLD;
    END IF;

    v_outcome := memgov.govern_write(v_operation, v_item, v_actor);
    IF pg_catalog.current_setting('memgov.capture', true) = 'on' THEN
        -- memgov.remember() reads the outcome of the row it inserted
        PERFORM pg_catalog.set_config('memgov.last_outcome', v_outcome.decision::text, true);
    END IF;

    CASE v_outcome.action
    WHEN 'allow' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        NEW.policy_version := v_outcome.policy_version;
        NEW.decision_id := v_outcome.decision_id;
        RETURN NEW;
    WHEN 'deny' THEN
        IF pg_catalog.current_setting('memgov.on_deny', true) = 'skip' THEN
            RETURN NULL;  -- memgov.remember(): report the denial instead of raising
        END IF;
        PERFORM memgov.raise_denied(v_operation, v_outcome);
        RETURN NULL;
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %)', v_operation, v_outcome.request_id
            USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
        IF TG_OP = 'INSERT' THEN
            NEW.status := 'pending_approval';
            NEW.policy_version := v_outcome.policy_version;
            NEW.decision_id := v_outcome.decision_id;
            RETURN NEW;
        END IF;
        RETURN NULL;  -- the change waits in memgov.approval_requests; the row is untouched
    WHEN 'quarantine' THEN
        RAISE NOTICE 'memgov: % quarantined (quarantine %)', v_operation, v_outcome.quarantine_id
            USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
        RETURN NULL;
    END CASE;
END
$$;

CREATE TRIGGER enforce_write
    BEFORE INSERT OR UPDATE OR DELETE ON memgov.long_term_memory_items
    FOR EACH ROW EXECUTE FUNCTION memgov.enforce_write();
-- session_replication_role = replica does not switch it off
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;

-- Refuses TRUNCATE to everyone but memgov_admin (and superusers): it would bypass every row decision.
CREATE FUNCTION memgov.refuse_truncate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user <> 'memgov_owner' AND NOT pg_has_role(current_user, 'memgov_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'memgov: only memgov_admin may TRUNCATE %', TG_TABLE_NAME
            USING ERRCODE = 'MG403', HINT = 'forget memories one by one (DELETE) so that each is decided';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER refuse_truncate
    BEFORE TRUNCATE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_truncate();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER refuse_truncate;

-- Governed insert that returns the decision (with memory_id / request_id / quarantine_id)
-- and records a denial in the decision log instead of raising.
CREATE FUNCTION memgov.remember(item jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_row      memgov.long_term_memory_items;
    v_outcome  text;
BEGIN
    v_row := memgov.item_from_json(item);
    -- ask the trigger for the outcome, and for a logged denial instead of an error
    PERFORM set_config('memgov.capture', 'on', true);
    PERFORM set_config('memgov.on_deny', 'skip', true);
    PERFORM set_config('memgov.last_outcome', '', true);
    INSERT INTO memgov.long_term_memory_items
           (memory_id, org_id, project_id, agent_id, subject_id, session_id, category, fact_text,
            source, confidence, is_sensitive, retention_policy, context_source, metadata)
    VALUES (coalesce(v_row.memory_id, gen_random_uuid()), v_row.org_id, v_row.project_id,
            v_row.agent_id, v_row.subject_id, v_row.session_id, v_row.category, v_row.fact_text,
            v_row.source, v_row.confidence, v_row.is_sensitive, v_row.retention_policy,
            v_row.context_source, v_row.metadata);
    v_outcome := current_setting('memgov.last_outcome', true);
    PERFORM set_config('memgov.capture', '', true);
    PERFORM set_config('memgov.on_deny', '', true);
    RETURN nullif(v_outcome, '')::jsonb;
END
$$;

-- Checks that a reviewer acts within its tenant (memgov_admin: any tenant) and not on its own request.
CREATE FUNCTION memgov.check_reviewer(p_org_id text, p_requested_by text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := memgov.invoker_role();
BEGIN
    IF NOT pg_has_role(v_actor, 'memgov_admin', 'MEMBER')
       AND p_org_id IS DISTINCT FROM current_setting('memgov.org_id', true) THEN
        RAISE EXCEPTION 'memgov: not found in tenant %', coalesce(current_setting('memgov.org_id', true), '(unset)')
            USING ERRCODE = 'MG404', HINT = 'SET memgov.org_id to the tenant of the request';
    END IF;
    IF v_actor = p_requested_by THEN
        RAISE EXCEPTION 'memgov: % cannot decide its own request', v_actor
            USING ERRCODE = '42501', HINT = 'another reviewer must approve or deny it';
    END IF;
    RETURN v_actor;
END
$$;

-- Locks a pending request for a decision; raises MG404 when it does not exist or is closed.
CREATE FUNCTION memgov.pending_request(p_request_id uuid)
RETURNS memgov.approval_requests
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests
     WHERE request_id = p_request_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: approval request % does not exist', p_request_id USING ERRCODE = 'MG404';
    END IF;
    IF v_request.status <> 'pending' THEN
        RAISE EXCEPTION 'memgov: approval request % is already %', p_request_id, v_request.status
            USING ERRCODE = 'MG409';
    END IF;
    RETURN v_request;
END
$$;

-- Closes a request and, for a held INSERT that is refused, removes the pending row.
CREATE FUNCTION memgov.close_request(p_request memgov.approval_requests, p_status text, p_actor text, p_note text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE memgov.approval_requests
       SET status = p_status, decided_at = now(), decided_by = p_actor, note = p_note
     WHERE request_id = p_request.request_id AND org_id = p_request.org_id;
    IF p_status <> 'approved' AND p_request.operation = 'remember' THEN
        DELETE FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval';
    END IF;
END
$$;

-- Applies a write a reviewer let through (held or quarantined), on the engine's path.
CREATE FUNCTION memgov.apply_write(
    p_operation text, p_item memgov.long_term_memory_items, p_policy_version text, p_decision_id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE p_operation
    WHEN 'remember' THEN
        -- a held INSERT's pending row becomes active; a quarantined one is stored now
        p_item.status := 'active';
        p_item.policy_version := p_policy_version;
        p_item.decision_id := p_decision_id;
        INSERT INTO memgov.long_term_memory_items SELECT (p_item).*
            ON CONFLICT (memory_id, org_id) DO UPDATE
           SET status = 'active', policy_version = excluded.policy_version, decision_id = excluded.decision_id;
    WHEN 'update' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET project_id = p_item.project_id, agent_id = p_item.agent_id,
               subject_id = p_item.subject_id, session_id = p_item.session_id,
               category = p_item.category, fact_text = p_item.fact_text, source = p_item.source,
               confidence = p_item.confidence, is_sensitive = p_item.is_sensitive,
               retention_policy = p_item.retention_policy, context_source = p_item.context_source,
               metadata = p_item.metadata, policy_version = p_policy_version, decision_id = p_decision_id
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
    WHEN 'forget' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
    END CASE;
END
$$;

-- Applies a held write. It is re-decided by the active policy first: a policy
-- that now denies or quarantines it wins over the approval.
CREATE FUNCTION memgov.approve(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request   memgov.approval_requests := memgov.pending_request(approve.request_id);
    v_actor     text := memgov.check_reviewer(v_request.org_id, v_request.requested_by);
    v_item      memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_id        bigint;
BEGIN
    IF v_request.operation = 'remember' THEN
        SELECT * INTO v_item FROM memgov.long_term_memory_items
         WHERE memory_id = v_request.memory_id AND org_id = v_request.org_id
           FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memgov: the memory of request % no longer exists', approve.request_id
                USING ERRCODE = 'MG404';
        END IF;
    ELSE
        v_item := jsonb_populate_record(NULL::memgov.long_term_memory_items, v_request.payload);
    END IF;

    v_decision := memgov.decide(v_item, v_request.operation, v_request.requested_by);
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, risk_score, risk_level)
    VALUES (v_request.operation, v_request.memory_id, v_request.org_id, v_decision.action,
            v_decision.reason_codes, v_decision.matched_rule_ids, v_decision.policy_version,
            v_decision.mode, v_decision.enforced, v_actor, round(v_decision.risk_score, 3),
            v_decision.risk_level)
    RETURNING decision_id INTO v_id;

    IF v_decision.enforced AND v_decision.action IN ('deny', 'quarantine') THEN
        PERFORM memgov.close_request(v_request, 'denied', v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
        RETURN jsonb_build_object('request_id', v_request.request_id, 'status', 'denied',
                                  'decision', memgov.decision_json(v_decision));
    END IF;

    PERFORM memgov.apply_write(v_request.operation, v_item, v_decision.policy_version, v_id);
    PERFORM memgov.close_request(v_request, 'approved', v_actor, approve.note);
    RETURN jsonb_build_object('request_id', v_request.request_id, 'status', 'approved',
                              'decision', memgov.decision_json(v_decision));
END
$$;

-- Drops a held write (a held INSERT's pending row is removed).
CREATE FUNCTION memgov.deny(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests := memgov.pending_request(deny.request_id);
    v_actor    text := memgov.check_reviewer(v_request.org_id, v_request.requested_by);
BEGIN
    PERFORM memgov.close_request(v_request, 'denied', v_actor, deny.note);
    RETURN jsonb_build_object('request_id', v_request.request_id, 'status', 'denied');
END
$$;

-- Locks a held quarantine entry; raises MG404 when it does not exist in the caller's tenant.
CREATE FUNCTION memgov.held_quarantine(p_quarantine_id uuid)
RETURNS memgov.quarantine
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine;
BEGIN
    SELECT * INTO v_entry FROM memgov.quarantine WHERE quarantine_id = p_quarantine_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: quarantine entry % does not exist', p_quarantine_id USING ERRCODE = 'MG404';
    END IF;
    IF v_entry.status <> 'held' THEN
        RAISE EXCEPTION 'memgov: quarantine entry % is already %', p_quarantine_id, v_entry.status
            USING ERRCODE = 'MG409';
    END IF;
    PERFORM memgov.check_reviewer(v_entry.org_id, NULL);
    RETURN v_entry;
END
$$;

-- Releases a quarantined write: a reviewer's decision, applied as written (no re-decision).
CREATE FUNCTION memgov.release_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine := memgov.held_quarantine(release_quarantine.quarantine_id);
    v_item   memgov.long_term_memory_items := jsonb_populate_record(NULL::memgov.long_term_memory_items, v_entry.payload);
BEGIN
    PERFORM memgov.apply_write(v_entry.operation, v_item, v_entry.decision ->> 'policy_version', NULL);
    UPDATE memgov.quarantine
       SET status = 'released', resolved_at = now(), resolved_by = memgov.invoker_role()
     WHERE quarantine.quarantine_id = v_entry.quarantine_id AND org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'released',
                              'memory_id', v_item.memory_id);
END
$$;

-- Purges a quarantined write: its payload is erased, the entry stays as a record.
CREATE FUNCTION memgov.purge_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine := memgov.held_quarantine(purge_quarantine.quarantine_id);
BEGIN
    UPDATE memgov.quarantine
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = memgov.invoker_role()
     WHERE quarantine.quarantine_id = v_entry.quarantine_id AND org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged');
END
$$;

-- Privileges: writers reach the write path through the table and remember();
-- reviewers decide requests and quarantine entries.
REVOKE EXECUTE ON FUNCTION
    memgov.govern_write(text, memgov.long_term_memory_items, text),
    memgov.remember(jsonb),
    memgov.approve(uuid, text),
    memgov.deny(uuid, text),
    memgov.release_quarantine(uuid),
    memgov.purge_quarantine(uuid),
    memgov.check_reviewer(text, text),
    memgov.pending_request(uuid),
    memgov.close_request(memgov.approval_requests, text, text, text),
    memgov.held_quarantine(uuid),
    memgov.apply_write(text, memgov.long_term_memory_items, text, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.govern_write(text, memgov.long_term_memory_items, text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.remember(jsonb) TO memgov_writer, memgov_admin;
GRANT EXECUTE ON FUNCTION
    memgov.approve(uuid, text),
    memgov.deny(uuid, text),
    memgov.release_quarantine(uuid),
    memgov.purge_quarantine(uuid)
    TO memgov_reviewer, memgov_admin;

RESET ROLE;
