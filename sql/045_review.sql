-- memgov: the review workflow. A write the policy held for approval (MG201) waits in
-- memgov.approval_requests until a reviewer approves or denies it (memgov.approve,
-- memgov.deny); a quarantined write (MG202) waits in memgov.quarantine until a reviewer
-- releases or purges it (memgov.release_quarantine, memgov.purge_quarantine).
--
-- Approving, denying, releasing and purging are four eyes (memgov.check_reviewer: never the login
-- that made the write); what is approved or released is decided again by the active
-- policy first, and a policy that now refuses it wins over the reviewer. Every call
-- reaches only the caller's tenant: another tenant's ids answer MG404, like missing ones.
-- The writes applied here are memgov's own (memgov.engine_writes, sql/040_enforce.sql).
--
-- SQLSTATEs: MG404 no such request or entry in the tenant, MG409 already decided or
-- changed since, MG403 the active policy now denies a release, 42501 one's own write.

SET ROLE memgov_owner;

-- Four eyes: the login deciding a held or quarantined write is not the login that made
-- it (p_login, acting as p_role), nor a login that is a member of it (it could have made
-- it as that role). A superuser login, a member of every role, is compared by the role
-- it acts as. Returns the deciding role.
CREATE FUNCTION memgov.check_reviewer(p_login text, p_role text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := memgov.invoker_role();
    v_super  boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user);
    v_own    boolean;
BEGIN
    IF v_super THEN
        v_own := session_user = p_login AND v_actor = p_role;
    ELSE
        v_own := session_user = p_login
                 OR coalesce(pg_has_role(session_user, to_regrole(quote_ident(p_login)), 'MEMBER'), false);
    END IF;
    IF v_own THEN
        RAISE EXCEPTION 'memgov: % cannot decide its own write (made by %)', session_user, p_login
            USING ERRCODE = '42501', HINT = 'another reviewer, on another login, must decide it';
    END IF;
    RETURN v_actor;
END
$$;

-- Locks a pending request for a decision; MG404 when it does not exist in the caller's
-- tenant, MG409 when it is closed (memgov.check_found).
CREATE FUNCTION memgov.pending_request(p_request_id uuid)
RETURNS memgov.approval_requests
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.request_id = p_request_id AND memgov.sees_tenant(r.org_id)
       FOR UPDATE;
    PERFORM memgov.check_found('approval request', p_request_id, v_request.status, 'pending');
    RETURN v_request;
END
$$;

-- Closes a request and, for a held INSERT that is refused, removes its pending row: the row
-- its decision stored (decision_id), never another pending row under the same memory_id (an
-- INSERT ... ON CONFLICT DO NOTHING files a request for a row it never stores).
CREATE FUNCTION memgov.close_request(p_request memgov.approval_requests, p_status text, p_actor text, p_note text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE memgov.approval_requests
       SET status = p_status, decided_at = now(), decided_by = p_actor, decided_login = session_user,
           note = p_note
     WHERE request_id = p_request.request_id AND org_id = p_request.org_id;
    IF p_status <> 'approved' AND p_request.operation = 'remember' THEN
        DELETE FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval' AND decision_id = p_request.decision_id;
        IF FOUND THEN
            PERFORM memgov.drop_samples(p_request.org_id, ARRAY[p_request.memory_id]);
        END IF;
    END IF;
END
$$;

-- The columns of a memory that its writer chose (not the engine's).
CREATE FUNCTION memgov.content_of(p_item memgov.long_term_memory_items)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'memory_id', p_item.memory_id, 'org_id', p_item.org_id, 'project_id', p_item.project_id,
        'agent_id', p_item.agent_id, 'subject_id', p_item.subject_id, 'session_id', p_item.session_id,
        'category', p_item.category, 'fact_text', p_item.fact_text, 'source', p_item.source,
        'confidence', p_item.confidence, 'is_sensitive', p_item.is_sensitive,
        'retention_policy', p_item.retention_policy, 'context_source', p_item.context_source,
        'metadata', p_item.metadata)
$$;

-- Raises MG409 for a held or quarantined read: it is a record of what was asked, which a
-- reviewer closes (deny, purge) and never lets through afterwards; the agent asks again.
CREATE FUNCTION memgov.check_not_read(p_operation text, p_what text, p_id uuid)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_operation IN ('search', 'get') THEN
        RAISE EXCEPTION 'memgov: % % is a held %, which is never replayed', p_what, p_id, p_operation
            USING ERRCODE = 'MG409',
                  HINT = 'close it with memgov.deny (a request) or memgov.purge_quarantine (an entry)';
    END IF;
END
$$;

-- Applies a write a reviewer let through (held or quarantined), on the engine's path.
-- p_pending: a held INSERT, whose pending row becomes active; otherwise a quarantined
-- INSERT is stored now and never replaces an existing memory (MG409).
CREATE FUNCTION memgov.apply_write(
    p_operation text, p_item memgov.long_term_memory_items, p_policy_version text, p_decision_id bigint,
    p_pending boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.engine_writes();  -- decided already: the write trigger keeps the derived columns
    CASE p_operation
    WHEN 'remember' THEN
        IF p_pending THEN
            UPDATE memgov.long_term_memory_items AS m
               SET status = 'active', policy_version = p_policy_version, decision_id = p_decision_id
             WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
               AND m.status = 'pending_approval';
        ELSE
            BEGIN
                INSERT INTO memgov.long_term_memory_items
                       (memory_id, org_id, project_id, agent_id, subject_id, session_id, category,
                        fact_text, source, confidence, is_sensitive, retention_policy, context_source,
                        metadata, status, created_at, updated_at, policy_version, decision_id,
                        namespace, item_key, ttl_minutes)
                VALUES (p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id,
                        p_item.subject_id, p_item.session_id, p_item.category, p_item.fact_text,
                        p_item.source, p_item.confidence, p_item.is_sensitive, p_item.retention_policy,
                        p_item.context_source, p_item.metadata, 'active', p_item.created_at,
                        p_item.created_at, p_policy_version, p_decision_id,
                        p_item.namespace, p_item.item_key, p_item.ttl_minutes);
            EXCEPTION WHEN unique_violation THEN
                RAISE EXCEPTION 'memgov: memory % exists already; the quarantined write is not applied',
                                p_item.memory_id
                    USING ERRCODE = 'MG409', HINT = 'purge the quarantine entry instead';
            END;
        END IF;
    WHEN 'update' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET project_id = p_item.project_id, agent_id = p_item.agent_id,
               subject_id = p_item.subject_id, session_id = p_item.session_id,
               category = p_item.category, fact_text = p_item.fact_text, source = p_item.source,
               confidence = p_item.confidence, is_sensitive = p_item.is_sensitive,
               retention_policy = p_item.retention_policy, context_source = p_item.context_source,
               metadata = p_item.metadata, ttl_minutes = p_item.ttl_minutes,
               policy_version = p_policy_version, decision_id = p_decision_id
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
           AND m.status = 'active';
    WHEN 'forget' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
        PERFORM memgov.drop_samples(p_item.org_id, ARRAY[p_item.memory_id]);
    END CASE;
    PERFORM memgov.engine_writes_done();
END
$$;

-- Approves a locked pending request: re-decided by the active policy first (a policy
-- that now denies or quarantines it wins over the approval), four eyes, logged.
-- A held INSERT is approved as the reviewer saw it: the request's payload, on the pending row
-- the request's decision stored (another pending row under the same memory_id is not its own).
-- The log keeps the policy's decision; the result's is the decision taken, `allow`
-- (applied) or `deny` (refused), with the policy's action as `policy_action`.
CREATE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_id        bigint;
    v_status    text;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
    v_item.org_id := p_request.org_id;
    v_item.memory_id := p_request.memory_id;
    IF p_request.operation = 'remember' THEN
        SELECT * INTO v_row FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval' AND decision_id = p_request.decision_id
           FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memgov: the memory of request % no longer exists', p_request.request_id
                USING ERRCODE = 'MG404';
        END IF;
        IF memgov.content_of(v_row) IS DISTINCT FROM memgov.content_of(v_item) THEN
            RAISE EXCEPTION 'memgov: the memory of request % changed after it was requested', p_request.request_id
                USING ERRCODE = 'MG409', HINT = 'deny the request; the writer remembers it again';
        END IF;
    END IF;

    -- decided for the role that asked, logged as the reviewer's; nothing new is filed
    v_decision := memgov.decide(v_item, p_request.operation, p_request.requested_by);
    v_id := (memgov.govern(p_request.operation, v_item, v_actor, v_decision,
                           memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by),
                           p_file => false, p_raise => false)).decision_id;

    IF v_decision.enforced AND v_decision.action IN ('deny', 'quarantine') THEN
        v_status := 'denied';
        PERFORM memgov.close_request(p_request, v_status, v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
    ELSE
        v_status := 'approved';
        PERFORM memgov.apply_write(p_request.operation, v_item, v_decision.policy_version, v_id, true);
        PERFORM memgov.close_request(p_request, v_status, v_actor, p_note);
    END IF;
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', v_status,
                              'memory_id', v_item.memory_id,
                              'decision', memgov.decision_json(v_decision) || jsonb_build_object(
                                  'action', CASE v_status WHEN 'approved' THEN 'allow' ELSE 'deny' END,
                                  'policy_action', v_decision.action, 'decision_id', v_id,
                                  'memory_id', v_item.memory_id, 'request_id', p_request.request_id));
END
$$;

-- Denies a locked pending request (four eyes); a held INSERT's pending row is removed.
CREATE FUNCTION memgov.deny_request(p_request memgov.approval_requests, p_note text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.close_request(p_request, 'denied',
                                 memgov.check_reviewer(p_request.requested_login, p_request.requested_by), p_note);
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'denied');
END
$$;

-- Applies a held write, re-decided by the active policy first.
CREATE FUNCTION memgov.approve(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.approve_request(memgov.pending_request(approve.request_id), approve.note)
$$;

-- Drops a held write (a held INSERT's pending row is removed).
CREATE FUNCTION memgov.deny(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.deny_request(memgov.pending_request(deny.request_id), deny.note)
$$;

-- Locks a held quarantine entry; MG404 when it does not exist in the caller's tenant,
-- MG409 when it is resolved (memgov.check_found).
CREATE FUNCTION memgov.held_quarantine(p_quarantine_id uuid)
RETURNS memgov.quarantine
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine;
BEGIN
    SELECT * INTO v_entry FROM memgov.quarantine q
     WHERE q.quarantine_id = p_quarantine_id AND memgov.sees_tenant(q.org_id)
       FOR UPDATE;
    PERFORM memgov.check_found('quarantine entry', p_quarantine_id, v_entry.status, 'held');
    RETURN v_entry;
END
$$;

-- Releases a quarantined write: a reviewer's decision (four eyes), applied as written,
-- unless the active policy now denies it (a legal hold placed since, say): MG403.
CREATE FUNCTION memgov.release_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry     memgov.quarantine := memgov.held_quarantine(release_quarantine.quarantine_id);
    v_item      memgov.long_term_memory_items := jsonb_populate_record(NULL::memgov.long_term_memory_items, v_entry.payload);
    v_decision  memgov.decision;
BEGIN
    PERFORM memgov.check_not_read(v_entry.operation, 'quarantine entry', v_entry.quarantine_id);
    PERFORM memgov.check_reviewer(v_entry.quarantined_login, v_entry.quarantined_by);
    v_item.org_id := v_entry.org_id;
    v_item.memory_id := v_entry.memory_id;
    IF v_entry.operation = 'forget' THEN
        SELECT * INTO v_item FROM memgov.long_term_memory_items m
         WHERE m.memory_id = v_entry.memory_id AND m.org_id = v_entry.org_id;
    END IF;
    v_decision := memgov.decide(v_item, v_entry.operation, v_entry.quarantined_by);
    IF v_decision.enforced AND v_decision.action = 'deny' THEN
        RAISE EXCEPTION 'memgov: the active policy now denies this % (rule %)', v_entry.operation,
                        array_to_string(v_decision.matched_rule_ids, ', ')
            USING ERRCODE = 'MG403', DETAIL = memgov.decision_json(v_decision)::text,
                  HINT = 'purge the quarantine entry instead';
    END IF;
    PERFORM memgov.apply_write(v_entry.operation, v_item, v_entry.decision ->> 'policy_version', NULL, false);
    UPDATE memgov.quarantine AS q
       SET status = 'released', resolved_at = now(), resolved_by = memgov.invoker_role(),
           resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'released',
                              'memory_id', v_item.memory_id);
END
$$;

-- Purges a quarantined write: a reviewer's decision (four eyes), logged as a deny of the
-- write (reason QUARANTINE_PURGED, the quarantining decision's rules and version); its
-- payload is erased, the entry stays as a record.
CREATE FUNCTION memgov.purge_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry     memgov.quarantine := memgov.held_quarantine(purge_quarantine.quarantine_id);
    v_actor     text := memgov.check_reviewer(v_entry.quarantined_login, v_entry.quarantined_by);
    v_decision  memgov.decision := jsonb_populate_record(NULL::memgov.decision, v_entry.decision);
    v_id        bigint;
BEGIN
    v_decision.action := 'deny';
    v_decision.reason_codes := ARRAY['QUARANTINE_PURGED'];
    v_decision.matched_rule_ids := coalesce(v_decision.matched_rule_ids, ARRAY[]::text[]);
    v_decision.enforced := true;
    v_id := memgov.log_decision(v_entry.operation::text, v_entry.memory_id, v_entry.org_id, v_actor, v_decision);
    UPDATE memgov.quarantine AS q
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = v_actor, resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged', 'decision_id', v_id);
END
$$;

-- Privileges: reviewers decide requests and quarantine entries. Nothing else here is a client's.
GRANT EXECUTE ON FUNCTION
    memgov.approve(uuid, text),
    memgov.deny(uuid, text),
    memgov.release_quarantine(uuid),
    memgov.purge_quarantine(uuid)
    TO memgov_reviewer, memgov_admin;

RESET ROLE;
