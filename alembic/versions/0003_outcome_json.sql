-- memgov.govern builds the outcome of a decision (the decision and the ids of what was
-- logged and filed, which a held write's NOTICE carries) in one call, memgov.outcome_json,
-- where it merged decision_json's object with another: a held write 1,213k -> 1,189k
-- instructions. Routines only, written by scripts/revision-sql.

-- migrate:upgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.outcome_json(p_decision memgov.decision, p_decision_id bigint, p_memory_id uuid, p_request_id uuid, p_quarantine_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT jsonb_build_object(
        'action', p_decision.action,
        'reason_codes', to_jsonb(p_decision.reason_codes),
        'matched_rule_ids', to_jsonb(p_decision.matched_rule_ids),
        'policy_version', p_decision.policy_version,
        'mode', p_decision.mode,
        'enforced', p_decision.enforced,
        'risk_score', p_decision.risk_score,
        'risk_level', p_decision.risk_level,
        'decision_id', p_decision_id,
        'memory_id', p_memory_id,
        'request_id', p_request_id,
        'quarantine_id', p_quarantine_id)
$function$;

CREATE OR REPLACE FUNCTION memgov.govern(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision, p_shadow memgov.shadow_verdict, p_payload jsonb DEFAULT NULL::jsonb, p_file boolean DEFAULT true, p_raise boolean DEFAULT true, p_fingerprint text DEFAULT NULL::text, p_returned integer DEFAULT NULL::integer, p_withheld integer DEFAULT NULL::integer, p_silent boolean DEFAULT false, p_login text DEFAULT NULL::text)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_outcome   memgov.write_outcome;
    v_read      boolean;
BEGIN
    v_read := p_operation IN ('search', 'get');
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;
    IF v_read AND pg_catalog.pg_is_in_recovery() THEN
        -- a standby writes nothing: the primary logs the read and files it (no shadow verdict)
        SELECT r.decision_id, r.request_id, r.quarantine_id
          INTO v_outcome.decision_id, v_outcome.request_id, v_outcome.quarantine_id
          FROM memgov.log_read_on_primary(p_operation, p_item, p_actor, p_decision, p_payload, p_file,
                                          p_fingerprint, p_returned, p_withheld) AS r;
    ELSE
        -- memgov.log_decision's INSERT, written out: a PL/pgSQL call less per decision
        INSERT INTO memgov.decision_log
               (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
                policy_version, mode, enforced, actor, login, risk_score, risk_level,
                query_fingerprint, returned, withheld)
        VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action,
                p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
                p_decision.mode, p_decision.enforced, p_actor, coalesce(p_login, session_user),
                pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
                p_fingerprint, p_returned, p_withheld)
        RETURNING decision_id INTO v_outcome.decision_id;
        IF p_shadow.shadow_id IS NOT NULL THEN
            PERFORM memgov.record_shadow(p_shadow, p_operation, p_item, p_decision, v_outcome.decision_id);
        END IF;

        IF p_file AND v_outcome.action = 'require_approval' THEN
            INSERT INTO memgov.approval_requests
                   (memory_id, org_id, operation, payload, requested_by, requested_login,
                    decision_id, policy_version)
            VALUES (p_item.memory_id, p_item.org_id, p_operation, coalesce(p_payload, to_jsonb(p_item)), p_actor,
                    coalesce(p_login, session_user), v_outcome.decision_id, p_decision.policy_version)
            RETURNING request_id INTO v_outcome.request_id;
            PERFORM pg_notify(memgov.approval_channel(p_item.org_id), v_outcome.request_id::text);
        ELSIF p_file AND v_outcome.action = 'quarantine' THEN
            INSERT INTO memgov.quarantine
                   (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
            VALUES (p_item.org_id, p_operation, p_item.memory_id, coalesce(p_payload, to_jsonb(p_item)),
                    memgov.decision_json(p_decision), v_outcome.decision_id, p_actor,
                    coalesce(p_login, session_user))
            RETURNING quarantine_id INTO v_outcome.quarantine_id;
        END IF;
    END IF;

    -- a sample of what stays in the table: stored writes and held ones (not a forget)
    IF NOT v_read AND p_operation <> 'forget' AND v_outcome.action IN ('allow', 'require_approval')
       AND memgov.sample_rate(p_item.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(p_item.org_id) THEN
        PERFORM memgov.keep_sample(p_operation, p_item, p_actor, v_outcome.decision_id);
    END IF;

    IF v_outcome.action = 'allow' AND p_silent THEN
        RETURN v_outcome;  -- a stored write: nothing to tell
    END IF;
    -- the decision as JSON is for errors, notices and the functions' results
    v_outcome.decision := memgov.outcome_json(p_decision, v_outcome.decision_id, p_item.memory_id,
                                              v_outcome.request_id, v_outcome.quarantine_id);
    CASE v_outcome.action
    WHEN 'allow' THEN
        NULL;
    WHEN 'deny' THEN
        IF p_raise THEN
            PERFORM memgov.raise_denied(p_operation, v_outcome);
        END IF;
    WHEN 'require_approval' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % held for approval (request %): nothing returned', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG203', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
        END IF;
    WHEN 'quarantine' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %): nothing returned', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG204', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
        END IF;
    END CASE;
    RETURN v_outcome;
END
$function$;

RESET ROLE;
-- generated routines: end

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0003_outcome_json)';

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.govern(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision, p_shadow memgov.shadow_verdict, p_payload jsonb DEFAULT NULL::jsonb, p_file boolean DEFAULT true, p_raise boolean DEFAULT true, p_fingerprint text DEFAULT NULL::text, p_returned integer DEFAULT NULL::integer, p_withheld integer DEFAULT NULL::integer, p_silent boolean DEFAULT false, p_login text DEFAULT NULL::text)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_outcome   memgov.write_outcome;
    v_read      boolean;
BEGIN
    v_read := p_operation IN ('search', 'get');
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;
    IF v_read AND pg_catalog.pg_is_in_recovery() THEN
        -- a standby writes nothing: the primary logs the read and files it (no shadow verdict)
        SELECT r.decision_id, r.request_id, r.quarantine_id
          INTO v_outcome.decision_id, v_outcome.request_id, v_outcome.quarantine_id
          FROM memgov.log_read_on_primary(p_operation, p_item, p_actor, p_decision, p_payload, p_file,
                                          p_fingerprint, p_returned, p_withheld) AS r;
    ELSE
        -- memgov.log_decision's INSERT, written out: a PL/pgSQL call less per decision
        INSERT INTO memgov.decision_log
               (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
                policy_version, mode, enforced, actor, login, risk_score, risk_level,
                query_fingerprint, returned, withheld)
        VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action,
                p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
                p_decision.mode, p_decision.enforced, p_actor, coalesce(p_login, session_user),
                pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
                p_fingerprint, p_returned, p_withheld)
        RETURNING decision_id INTO v_outcome.decision_id;
        IF p_shadow.shadow_id IS NOT NULL THEN
            PERFORM memgov.record_shadow(p_shadow, p_operation, p_item, p_decision, v_outcome.decision_id);
        END IF;

        IF p_file AND v_outcome.action = 'require_approval' THEN
            INSERT INTO memgov.approval_requests
                   (memory_id, org_id, operation, payload, requested_by, requested_login,
                    decision_id, policy_version)
            VALUES (p_item.memory_id, p_item.org_id, p_operation, coalesce(p_payload, to_jsonb(p_item)), p_actor,
                    coalesce(p_login, session_user), v_outcome.decision_id, p_decision.policy_version)
            RETURNING request_id INTO v_outcome.request_id;
            PERFORM pg_notify(memgov.approval_channel(p_item.org_id), v_outcome.request_id::text);
        ELSIF p_file AND v_outcome.action = 'quarantine' THEN
            INSERT INTO memgov.quarantine
                   (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
            VALUES (p_item.org_id, p_operation, p_item.memory_id, coalesce(p_payload, to_jsonb(p_item)),
                    memgov.decision_json(p_decision), v_outcome.decision_id, p_actor,
                    coalesce(p_login, session_user))
            RETURNING quarantine_id INTO v_outcome.quarantine_id;
        END IF;
    END IF;

    -- a sample of what stays in the table: stored writes and held ones (not a forget)
    IF NOT v_read AND p_operation <> 'forget' AND v_outcome.action IN ('allow', 'require_approval')
       AND memgov.sample_rate(p_item.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(p_item.org_id) THEN
        PERFORM memgov.keep_sample(p_operation, p_item, p_actor, v_outcome.decision_id);
    END IF;

    IF v_outcome.action = 'allow' AND p_silent THEN
        RETURN v_outcome;  -- a stored write: nothing to tell
    END IF;
    -- the decision as JSON is for errors, notices and the functions' results
    v_outcome.decision := memgov.decision_json(p_decision)
        || jsonb_build_object('decision_id', v_outcome.decision_id,
                              'memory_id', p_item.memory_id,
                              'request_id', v_outcome.request_id,
                              'quarantine_id', v_outcome.quarantine_id);
    CASE v_outcome.action
    WHEN 'allow' THEN
        NULL;
    WHEN 'deny' THEN
        IF p_raise THEN
            PERFORM memgov.raise_denied(p_operation, v_outcome);
        END IF;
    WHEN 'require_approval' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % held for approval (request %): nothing returned', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG203', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
        END IF;
    WHEN 'quarantine' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %): nothing returned', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG204', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
        END IF;
    END CASE;
    RETURN v_outcome;
END
$function$;

DROP FUNCTION memgov.outcome_json(memgov.decision,bigint,uuid,uuid,uuid);

RESET ROLE;
-- generated routines: end

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0002_second_release)';
