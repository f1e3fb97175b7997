-- memgov: the write path. Every INSERT, UPDATE and DELETE on
-- memgov.long_term_memory_items is decided by the active policy.
--
-- Two row triggers split the table's writers by who performs the statement,
-- which a trigger's WHEN clause sees (it runs with the statement's rights):
--
--   enforce_write   every client (WHEN current_user <> 'memgov_owner'). Its
--                   function is SECURITY DEFINER: it checks the tenant, decides,
--                   logs and files for the client, and nothing it calls is
--                   executable by a client role.
--   engine_columns  memgov's own SECURITY DEFINER functions (approve, confirm,
--                   the sweep ...), which have decided already: it only keeps
--                   the engine's derived columns.
--
-- What a held or quarantined write becomes is the reviewers' (sql/045_review.sql).
--
-- SQLSTATEs: MG403 write denied (error), MG201 write held for approval
-- (notice), MG202 write quarantined (notice), MG409 a pending memory is frozen,
-- 42501 another tenant, 54000 fact_text over memgov.settings' max_fact_text_bytes.

SET ROLE memgov_owner;

-- What memgov.govern() did about one decided write or read.
CREATE TYPE memgov.write_outcome AS (
    action          text,       -- the action applied: allow, deny, require_approval, quarantine
    decision        jsonb,      -- the decision plus decision_id
    decision_id     bigint,
    policy_version  text,
    request_id      uuid,
    quarantine_id   uuid
);

-- A row's expiry, memgov.item_expiry (its retention policy's, or its TTL's): sql/075_ttl.sql.

-- Since when a confidence_based row has been below its tenant's confidence_floor (NULL: it is not).
CREATE FUNCTION memgov.low_confidence_since(p_item memgov.long_term_memory_items)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
               WHEN p_item.retention_policy IS DISTINCT FROM 'confidence_based' THEN NULL
               WHEN p_item.confidence < memgov.confidence_floor(p_item.org_id)
               THEN coalesce(p_item.low_confidence_since, pg_catalog.now())
           END
$$;

-- One of the engine's limits (memgov.settings), else its default.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.engine_limit(p_name text)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_limit  bigint;
BEGIN
    SELECT s.value INTO v_limit FROM memgov.settings s WHERE s.name = p_name;
    RETURN coalesce(v_limit, (memgov.setting_defaults() -> 'limits' ->> p_name)::bigint);
END
$$;

-- Raises 54000 when fact_text is over the engine's max_fact_text_bytes; texts up to
-- 1 KiB (the smallest limit allowed) never look the limit up.
CREATE FUNCTION memgov.check_fact_size(p_fact_text text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit  bigint;
BEGIN
    IF octet_length(p_fact_text) > 1024 THEN
        v_limit := memgov.engine_limit('max_fact_text_bytes');
        IF octet_length(p_fact_text) > v_limit THEN
            RAISE EXCEPTION 'memgov: fact_text is % bytes; the limit is %', octet_length(p_fact_text), v_limit
                USING ERRCODE = '54000',
                      HINT = 'store a summary; memgov_admin can raise memgov.settings max_fact_text_bytes';
        END IF;
    END IF;
END
$$;

-- Raises 54000 when a row's fact_text or the rest of its columns together (metadata,
-- scope, category ...) are over the engine's limits; rows up to 1 KiB never look them up.
CREATE FUNCTION memgov.check_item_size(p_item memgov.long_term_memory_items)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rest   bigint := pg_column_size(p_item) - coalesce(octet_length(p_item.fact_text), 0);
    v_limit  bigint;
BEGIN
    PERFORM memgov.check_fact_size(p_item.fact_text);
    v_limit := memgov.engine_limit('max_other_bytes');
    IF v_rest > v_limit THEN
        RAISE EXCEPTION 'memgov: the columns besides fact_text take % bytes; the limit is %', v_rest, v_limit
            USING ERRCODE = '54000',
                  HINT = 'keep metadata and scope small; memgov_admin can raise memgov.settings max_other_bytes';
    END IF;
END
$$;

-- Whether a change of retention or of TTL makes a memory's life shorter (it may then be deleted sooner).
CREATE FUNCTION memgov.shortens_life(p_old memgov.long_term_memory_items, p_new memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (p_new.retention_policy IS DISTINCT FROM p_old.retention_policy
            AND p_new.retention_policy <> 'permanent_until_revoked'
            OR p_new.ttl_minutes IS DISTINCT FROM p_old.ttl_minutes AND p_new.ttl_minutes IS NOT NULL)
           AND NOT (p_new.expires_at IS NOT NULL AND p_old.expires_at IS NOT NULL
                    AND p_new.expires_at >= p_old.expires_at)
$$;

-- The stricter of two decisions (deny > quarantine > require_approval > allow; enforced first).
CREATE FUNCTION memgov.stricter(p_a memgov.decision, p_b memgov.decision)
RETURNS memgov.decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN (p_b.enforced AND NOT p_a.enforced)
                  OR (p_b.enforced = p_a.enforced
                      AND array_position(ARRAY['allow', 'require_approval', 'quarantine', 'deny'], p_b.action)
                        > array_position(ARRAY['allow', 'require_approval', 'quarantine', 'deny'], p_a.action))
                THEN p_b ELSE p_a END
$$;

-- Logs one decision (by p_actor, for session_user, or p_login: the login a standby's read
-- names, memgov.log_standby_read); returns its decision_id. memgov.govern and the write
-- trigger's stored row carry the same INSERT written out (a PL/pgSQL call costs a
-- single-row write 13k instructions): a change here is a change there.
-- A read's row also says what was asked (a fingerprint) and what it returned and withheld.
-- (No SET clause: it runs once per governed row, inside functions that pin search_path,
-- and names only qualified objects. It takes the memory's ids, not its row: a whole row
-- is copied to be passed.)
CREATE FUNCTION memgov.log_decision(
    p_operation    text,
    p_memory_id    uuid,
    p_org_id       text,
    p_actor        text,
    p_decision     memgov.decision,
    p_fingerprint  text DEFAULT NULL,
    p_returned     integer DEFAULT NULL,
    p_withheld     integer DEFAULT NULL,
    p_login        text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level,
            query_fingerprint, returned, withheld)
    VALUES (p_operation, p_memory_id, p_org_id, p_decision.action,
            p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
            p_decision.mode, p_decision.enforced, p_actor, coalesce(p_login, session_user),
            pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
            p_fingerprint, p_returned, p_withheld)
    RETURNING decision_id INTO v_id;
    RETURN v_id;
END
$$;

-- Raises MG403 for a denied write or read: rule ids and reason codes in the message, the
-- decision in DETAIL.
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
              HINT = CASE WHEN p_operation IN ('search', 'get')
                          THEN 'the active policy refuses this read; `memgov evaluate --operation ' || p_operation
                               || ' --explain` shows why'
                          ELSE 'the active policy refuses this write; `memgov evaluate --explain` shows why' END;
END
$$;

-- The one path from a decision to its consequences, for every governed write and read: the
-- write trigger, feedback (edit, forget), approvals (re-decided) and recall all end here.
-- It logs the decision (memgov.log_decision's INSERT), records the shadow's verdict beside it,
-- files a held or quarantined write or read for reviewers (with a NOTIFY on the tenant's
-- approval channel), keeps a replay sample, and announces what is not an allow: MG403 for
-- a denial (unless p_raise is false: memgov.remember and the trigger's skip mode report it
-- instead), a notice for a hold (MG201, a read MG203) or a quarantine (MG202, a read MG204).
--   p_payload      what a filed request or entry keeps: the item (NULL), or what a read asked
--   p_file         false: nothing is filed (an approval's re-decision closes its own request)
--   p_fingerprint, p_returned, p_withheld   a read's log columns
--   p_silent       a write the trigger stores (an allow, or any decision not enforced):
--                  nothing to file or tell, no decision as JSON
--   p_login        the login a standby's read names (memgov.log_standby_read), else session_user
-- A read on a standby (which writes nothing) is logged and filed by the primary instead:
-- memgov.log_read_on_primary (sql/065_standby_reads.sql).
-- Returns the outcome: the applied action, the decision as JSON (for everything but a
-- silent allow), the ids of what was logged and filed. (No SET clause: its callers pin
-- search_path.)
CREATE FUNCTION memgov.govern(
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_actor        text,
    p_decision     memgov.decision,
    p_shadow       memgov.shadow_verdict,
    p_payload      jsonb DEFAULT NULL,
    p_file         boolean DEFAULT true,
    p_raise        boolean DEFAULT true,
    p_fingerprint  text DEFAULT NULL,
    p_returned     integer DEFAULT NULL,
    p_withheld     integer DEFAULT NULL,
    p_silent       boolean DEFAULT false,
    p_login        text DEFAULT NULL)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
AS $$
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
$$;

-- Shared decisions of a statement ------------------------------------------------------
--
-- A statement that stores many rows under one decision (an INSERT ... SELECT, a COPY, an
-- UPDATE of many rows) logs that decision once: the first row of the statement with a
-- given decision gets its log row as a single write does, every later row of the same
-- decision names that row in its decision_id, and when the statement ends that log row
-- lists them all (memory_ids, memory_count; memory_id NULL). Rows held, quarantined or
-- denied keep a log row each: they have a request or quarantine entry of their own.
--
-- The statement's state is the transaction-local setting memgov.batch:
--   E'\x1c' || decision_id           the statement's first stored row's log row
--   E'\x1e' || key || E'\x1d' || decision_id (20 digits), one per shared decision: its key
--                                    is every column a log row takes from a decision
-- A client can read and set the setting; the engine trusts it only while it is the value
-- the engine last wrote: a keyed hash of it (the key: a random value of the session) is
-- kept where no client can read or change it (the sequence memgov.batch_seal's currval),
-- and a row shares a decision only if the setting still hashes to it. So a statement's
-- rows name only decisions logged in that transaction with their own decision's every
-- column. A client that sets the setting inside its own statement can, at most, leave
-- some of that statement's memories out of their decision's memory_ids (each still names
-- its decision): docs/security.md.

RESET ROLE;
