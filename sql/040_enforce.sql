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

-- What memgov.record_write() did about one decided row.
CREATE TYPE memgov.write_outcome AS (
    action          text,       -- the action applied: allow, deny, require_approval, quarantine
    decision        jsonb,      -- the decision plus decision_id
    decision_id     bigint,
    policy_version  text,
    request_id      uuid,
    quarantine_id   uuid
);

-- Expiry of a row under its retention policy (NULL: no automatic expiry). STABLE, as
-- timestamptz + interval is (days follow the session's time zone): the planner inlines it.
CREATE FUNCTION memgov.expiry_of(p_retention_policy text, p_created_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
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

-- Whether a change of retention makes a memory's life shorter (it may then be deleted sooner).
CREATE FUNCTION memgov.shortens_life(p_old memgov.long_term_memory_items, p_new memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_new.retention_policy IS DISTINCT FROM p_old.retention_policy
           AND p_new.retention_policy <> 'permanent_until_revoked'
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

-- Logs one decision about a write (by p_actor, for session_user); returns its decision_id.
-- The only INSERT into memgov.decision_log. (No SET clause: it runs once per governed row,
-- inside functions that pin search_path, and names only qualified objects. It takes the
-- memory's ids, not its row: a whole row is copied to be passed.)
CREATE FUNCTION memgov.log_decision(
    p_operation  text,
    p_memory_id  uuid,
    p_org_id     text,
    p_actor      text,
    p_decision   memgov.decision)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level)
    VALUES (p_operation, p_memory_id, p_org_id, p_decision.action,
            p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
            p_decision.mode, p_decision.enforced, p_actor, session_user,
            pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level)
    RETURNING decision_id INTO v_id;
    RETURN v_id;
END
$$;

-- Logs one decision about a write and files the request or quarantine entry it calls for.
-- Engine-internal: reached from the write trigger and memgov's functions only, which pin
-- search_path (no SET clause of its own: it runs once per governed row).
CREATE FUNCTION memgov.record_write(
    p_operation  text,
    p_item       memgov.long_term_memory_items,
    p_actor      text,
    p_decision   memgov.decision)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
AS $$
DECLARE
    v_outcome   memgov.write_outcome;
    v_payload   jsonb;
BEGIN
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;

    v_outcome.decision_id := memgov.log_decision(p_operation, p_item.memory_id, p_item.org_id, p_actor, p_decision);

    IF v_outcome.action IN ('require_approval', 'quarantine') THEN
        v_payload := to_jsonb(p_item);
    END IF;

    IF v_outcome.action = 'require_approval' THEN
        INSERT INTO memgov.approval_requests
               (memory_id, org_id, operation, payload, requested_by, requested_login,
                decision_id, policy_version)
        VALUES (p_item.memory_id, p_item.org_id, p_operation, v_payload, p_actor, session_user,
                v_outcome.decision_id, p_decision.policy_version)
        RETURNING request_id INTO v_outcome.request_id;
        PERFORM pg_notify(memgov.approval_channel(p_item.org_id), v_outcome.request_id::text);
    ELSIF v_outcome.action = 'quarantine' THEN
        INSERT INTO memgov.quarantine
               (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
        VALUES (p_item.org_id, p_operation, p_item.memory_id, v_payload,
                memgov.decision_json(p_decision), v_outcome.decision_id, p_actor, session_user)
        RETURNING quarantine_id INTO v_outcome.quarantine_id;
    END IF;

    -- the decision as JSON is for errors, notices and remember(): a stored write needs none
    IF v_outcome.action <> 'allow' OR current_setting('memgov.capture', true) = 'on' THEN
        v_outcome.decision := memgov.decision_json(p_decision)
            || jsonb_build_object('decision_id', v_outcome.decision_id,
                                  'memory_id', p_item.memory_id,
                                  'request_id', v_outcome.request_id,
                                  'quarantine_id', v_outcome.quarantine_id);
    END IF;
    RETURN v_outcome;
END
$$;

-- Keeps a decided write's item for `memgov replay` (memgov.replay_samples): called for a
-- sampled share (memgov.sample_rate) of the writes the policy stored or held. (No SET
-- clause: the write trigger pins search_path.)
CREATE FUNCTION memgov.keep_sample(
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_actor        text,
    p_decision_id  bigint)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO memgov.replay_samples (org_id, decision_id, memory_id, operation, actor, payload)
    VALUES (p_item.org_id, p_decision_id, p_item.memory_id, p_operation, p_actor, to_jsonb(p_item));
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

-- The client row trigger on memgov.long_term_memory_items (BEFORE INSERT OR UPDATE OR DELETE,
-- WHEN current_user <> 'memgov_owner'). PL/pgSQL prepares each expression it evaluates once
-- per transaction, and a single-row write is a transaction: the common case (a remembered
-- memory the policy stores) takes as few statements as the checks allow.
CREATE FUNCTION memgov.enforce_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor      text := memgov.invoker_role();  -- inlined: a SQL function without a SET clause
    v_operation  text;
    v_item       memgov.long_term_memory_items;
    v_decision   memgov.decision;
    v_forget     memgov.decision;
    v_action     text;
    v_outcome    memgov.write_outcome;
    v_shadow     memgov.shadow_verdict;
BEGIN
    IF TG_TABLE_SCHEMA <> 'memgov' OR TG_TABLE_NAME <> 'long_term_memory_items' THEN
        RAISE EXCEPTION 'memgov.enforce_write() governs memgov.long_term_memory_items only'
            USING ERRCODE = '42501';
    END IF;

    -- the engine's columns: whatever a client's statement said, the engine decides
    IF TG_OP = 'INSERT' THEN
        -- another tenant is refused before anything is decided, logged or filed
        -- (row level security would see the row only after this trigger); under tenant
        -- binding the session's own setting may name a tenant the login is not granted
        IF NEW.org_id IS DISTINCT FROM current_setting('memgov.org_id', true) OR memgov.binding_on() THEN
            PERFORM memgov.check_tenant(NEW.org_id);
        END IF;
        IF pg_column_size(NEW) > 1024 THEN
            PERFORM memgov.check_item_size(NEW);
        END IF;
        -- a new memory starts active, never confirmed, undecided (one test for the five)
        IF (NEW.status, NEW.last_confirmed_at, NEW.low_confidence_since, NEW.policy_version, NEW.decision_id)
           IS DISTINCT FROM ('active', NULL, NULL, NULL, NULL) THEN
            NEW.status := 'active';
            NEW.last_confirmed_at := NULL;
            NEW.low_confidence_since := NULL;
            NEW.policy_version := NULL;
            NEW.decision_id := NULL;
        END IF;
        NEW.created_at := pg_catalog.now();
        NEW.updated_at := NEW.created_at;
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        IF NEW.retention_policy = 'confidence_based' THEN
            NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        END IF;
        NEW.search_config := memgov.search_config(NEW.org_id);

        v_decision := memgov.decide(NEW, 'remember', v_actor);
        IF memgov.shadow_of(NEW.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow('remember', NEW, NULL, v_actor);
        END IF;
        IF (v_decision.action = 'allow' OR NOT v_decision.enforced)
           AND current_setting('memgov.capture', true) IS DISTINCT FROM 'on' THEN
            -- stored as written: one decision logged, nothing filed, nobody to tell
            NEW.decision_id := memgov.log_decision('remember', NEW.memory_id, NEW.org_id, v_actor, v_decision);
            NEW.policy_version := v_decision.policy_version;
            IF v_shadow.shadow_id IS NOT NULL THEN
                PERFORM memgov.record_shadow(v_shadow, 'remember', NEW, v_decision, NEW.decision_id);
            END IF;
            IF memgov.sample_rate(NEW.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(NEW.org_id) THEN
                PERFORM memgov.keep_sample('remember', NEW, v_actor, NEW.decision_id);
            END IF;
            IF memgov.reads_governed(NEW.org_id) THEN
                PERFORM memgov.mark_written(NEW, TG_OP);  -- its INSERT ... RETURNING reads it back
            END IF;
            RETURN NEW;
        END IF;
        v_operation := 'remember';
        v_item := NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.org_id IS DISTINCT FROM OLD.org_id OR NEW.memory_id IS DISTINCT FROM OLD.memory_id THEN
            RAISE EXCEPTION 'memgov: a memory''s memory_id and org_id never change'
                USING ERRCODE = '42501',
                      HINT = 'forget the memory and remember it again under the new tenant';
        END IF;
        IF OLD.status = 'pending_approval' THEN
            RAISE EXCEPTION 'memgov: memory % is pending approval and cannot change', OLD.memory_id
                USING ERRCODE = 'MG409',
                      HINT = 'a reviewer approves or denies it first (memgov.approve / memgov.deny)';
        END IF;
        IF pg_column_size(NEW) > 1024 THEN
            PERFORM memgov.check_item_size(NEW);
        END IF;
        NEW.created_at := OLD.created_at;
        NEW.updated_at := pg_catalog.now();
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        NEW.status := OLD.status;
        NEW.last_confirmed_at := OLD.last_confirmed_at;
        NEW.low_confidence_since := OLD.low_confidence_since;
        NEW.policy_version := OLD.policy_version;
        NEW.decision_id := OLD.decision_id;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        v_operation := 'update';
        v_item := NEW;
        v_decision := memgov.decide(v_item, v_operation, v_actor);
        -- forget rules apply to an update that makes a memory expire sooner (it is partly
        -- forgotten) and to one that takes it out of a hold (a legal hold is lifted by
        -- changing the policy, never by changing the memory); and an update claims the stored
        -- row's source as well as the new row's (the sources: refusal of its forget): a writer
        -- cannot rewrite a system_rule memory by calling it agent_extracted
        v_forget := memgov.decide(OLD, 'forget', v_actor);
        IF memgov.shortens_life(OLD, NEW) OR (memgov.denied_by_rule(v_forget) AND NOT memgov.retention_held(NEW))
           OR (v_forget.reason_codes = ARRAY['SOURCE_NOT_PERMITTED'] AND cardinality(v_forget.matched_rule_ids) = 0) THEN
            v_decision := memgov.stricter(v_decision, v_forget);
        END IF;
        IF memgov.shadow_of(NEW.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow(v_operation, NEW, OLD, v_actor);
        END IF;
    ELSE
        IF OLD.status = 'pending_approval' THEN
            RAISE EXCEPTION 'memgov: memory % is pending approval and cannot be forgotten', OLD.memory_id
                USING ERRCODE = 'MG409',
                      HINT = 'a reviewer denies it instead (memgov.deny / memgov.reject)';
        END IF;
        v_operation := 'forget';
        v_item := OLD;
        v_decision := memgov.decide(v_item, v_operation, v_actor);
        IF memgov.shadow_of(OLD.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow(v_operation, OLD, NULL, v_actor);
        END IF;
    END IF;

    v_action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
    IF TG_OP = 'INSERT' AND (v_action = 'quarantine'
                             OR (v_action = 'deny' AND current_setting('memgov.on_deny', true) = 'skip')) THEN
        -- the row will not reach row level security: check the session's tenant binding here
        PERFORM memgov.check_tenant(NEW.org_id);
    END IF;

    v_outcome := memgov.record_write(v_operation, v_item, v_actor, v_decision);
    IF v_shadow.shadow_id IS NOT NULL THEN
        PERFORM memgov.record_shadow(v_shadow, v_operation, v_item, v_decision, v_outcome.decision_id);
    END IF;
    -- a sample of what stays in the table: stored writes, held INSERTs (not a forget)
    IF TG_OP <> 'DELETE' AND v_outcome.action IN ('allow', 'require_approval')
       AND memgov.sample_rate(v_item.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(v_item.org_id) THEN
        PERFORM memgov.keep_sample(v_operation, v_item, v_actor, v_outcome.decision_id);
    END IF;
    IF current_setting('memgov.capture', true) = 'on' THEN
        -- memgov.remember() reads the outcome of the row it inserted
        PERFORM set_config('memgov.last_outcome', v_outcome.decision::text, true);
    END IF;

    CASE v_outcome.action
    WHEN 'allow' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        NEW.policy_version := v_outcome.policy_version;
        NEW.decision_id := v_outcome.decision_id;
        IF memgov.reads_governed(NEW.org_id) THEN
            PERFORM memgov.mark_written(NEW, TG_OP);
        END IF;
        RETURN NEW;
    WHEN 'deny' THEN
        IF current_setting('memgov.on_deny', true) = 'skip' THEN
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
            -- only reviewers read pending memories: this one its writer's RETURNING too
            PERFORM memgov.mark_written(NEW, TG_OP);
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

-- The engine's row trigger (BEFORE INSERT OR UPDATE, WHEN current_user = 'memgov_owner'):
-- memgov's functions have decided already; the derived columns follow the row.
CREATE FUNCTION memgov.engine_columns()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (a new text search configuration alone, from a deploy, is no change of the memory)
    IF TG_OP = 'UPDATE' AND NEW.updated_at = OLD.updated_at AND NEW.search_config = OLD.search_config THEN
        NEW.updated_at := now();
    END IF;
    IF TG_OP = 'INSERT' THEN
        NEW.search_config := memgov.search_config(NEW.org_id);
    END IF;
    NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
    NEW.low_confidence_since := memgov.low_confidence_since(NEW);
    RETURN NEW;
END
$$;

CREATE TRIGGER enforce_write
    BEFORE INSERT OR UPDATE OR DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user <> 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.enforce_write();
CREATE TRIGGER engine_columns
    BEFORE INSERT OR UPDATE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user = 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.engine_columns();
-- session_replication_role = replica does not switch them off
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER engine_columns;

-- Deletes a deleted memory's replay samples (AFTER DELETE, only for a tenant that samples).
CREATE FUNCTION memgov.forget_samples()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM memgov.replay_samples s WHERE s.memory_id = OLD.memory_id AND s.org_id = OLD.org_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER forget_samples
    AFTER DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (memgov.sample_rate(OLD.org_id) > 0)
    EXECUTE FUNCTION memgov.forget_samples();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER forget_samples;

-- Refuses TRUNCATE to everyone but memgov_admin (and superusers): it would bypass every row decision.
CREATE FUNCTION memgov.refuse_truncate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user <> 'memgov_owner' AND NOT pg_has_role(current_user, 'memgov_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'memgov: only memgov_admin may TRUNCATE %', TG_TABLE_NAME
            USING ERRCODE = 'MG403', HINT = 'forget memories one by one so that each is decided';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER refuse_truncate
    BEFORE TRUNCATE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_truncate();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER refuse_truncate;

-- The LISTEN channel of a tenant's approval requests: named by a secret of the database,
-- so that a session cannot guess (and listen to) another tenant's channel.
CREATE TABLE memgov.channel_secret (
    secret  text NOT NULL DEFAULT gen_random_uuid()::text
);
INSERT INTO memgov.channel_secret DEFAULT VALUES;

-- (PL/pgSQL, no SET clause: a held write calls it under the trigger's pinned search_path,
-- and PL/pgSQL keeps its plan for the session where a SQL function would be planned anew.)
CREATE FUNCTION memgov.approval_channel(p_org_id text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (SELECT 'memgov_approvals_' || left(md5(s.secret || ':' || p_org_id), 20) FROM memgov.channel_secret s);
END
$$;

-- The approval channel of the session's tenant, for LISTEN (reviewers and admins).
CREATE FUNCTION memgov.approval_channel()
RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.approval_channel(memgov.check_tenant(current_setting('memgov.org_id', true)))
$$;

-- Governed insert that returns the decision (with memory_id / request_id / quarantine_id)
-- and records a denial in the decision log instead of raising. Runs with the caller's
-- rights: its INSERT is the caller's, under the caller's privileges and row security.
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
    PERFORM set_config('memgov.last_outcome', '', true);
    RETURN nullif(v_outcome, '')::jsonb;
END
$$;

-- Privileges: writers reach the write path through the table, remember() and forget()
-- (sql/050_feedback.sql); reviewers listen for requests. Nothing else here is a client's.
REVOKE EXECUTE ON FUNCTION memgov.remember(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.remember(jsonb) TO memgov_writer, memgov_admin;
-- remember() runs with its caller's rights and builds its row with item_from_json()
GRANT EXECUTE ON FUNCTION memgov.item_from_json(jsonb) TO memgov_writer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.approval_channel() TO memgov_reviewer, memgov_admin;

RESET ROLE;
