-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_id        bigint;
    v_status    text;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
    v_item.org_id := p_request.org_id;
    v_item.memory_id := p_request.memory_id;
    IF p_request.operation = 'remember' THEN
        SELECT * INTO v_row FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval'
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

    v_decision := memgov.decide(v_item, p_request.operation, p_request.requested_by);
    v_shadow := memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by);
    v_id := memgov.log_decision(p_request.operation, v_item.memory_id, v_item.org_id, v_actor, v_decision);
    PERFORM memgov.record_shadow(v_shadow, p_request.operation, v_item, v_decision, v_id);

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
$function$;

RESET ROLE;
-- generated routines: end

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_id        bigint;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
    v_item.org_id := p_request.org_id;
    v_item.memory_id := p_request.memory_id;
    IF p_request.operation = 'remember' THEN
        SELECT * INTO v_row FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval'
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

    v_decision := memgov.decide(v_item, p_request.operation, p_request.requested_by);
    v_shadow := memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by);
    v_id := memgov.log_decision(p_request.operation, v_item.memory_id, v_item.org_id, v_actor, v_decision);
    PERFORM memgov.record_shadow(v_shadow, p_request.operation, v_item, v_decision, v_id);

    IF v_decision.enforced AND v_decision.action IN ('deny', 'quarantine') THEN
        PERFORM memgov.close_request(p_request, 'denied', v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
        RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'denied',
                                  'decision', memgov.decision_json(v_decision));
    END IF;

    PERFORM memgov.apply_write(p_request.operation, v_item, v_decision.policy_version, v_id, true);
    PERFORM memgov.close_request(p_request, 'approved', v_actor, p_note);
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'approved',
                              'decision', memgov.decision_json(v_decision));
END
$function$;

RESET ROLE;
-- generated routines: end
