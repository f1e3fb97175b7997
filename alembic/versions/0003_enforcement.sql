-- The write path: the enforcement trigger, remember(), approvals and quarantine.
-- Frozen copy of sql/040_enforce.sql as of this revision.

-- migrate:upgrade
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
        SELECT s.value INTO v_limit FROM memgov.settings s WHERE s.name = 'max_fact_text_bytes';
        IF octet_length(p_fact_text) > coalesce(v_limit, 65536) THEN
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
    SELECT s.value INTO v_limit FROM memgov.settings s WHERE s.name = 'max_other_bytes';
    IF v_rest > coalesce(v_limit, 16384) THEN
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

-- Logs one decision about a write and files the request or quarantine entry it calls for.
-- Engine-internal: reached from the write trigger and memgov's functions only.
CREATE FUNCTION memgov.record_write(
    p_operation  text,
    p_item       memgov.long_term_memory_items,
    p_actor      text,
    p_decision   memgov.decision)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_outcome   memgov.write_outcome;
    v_payload   jsonb;
BEGIN
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;

    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level)
    VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action,
            p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
            p_decision.mode, p_decision.enforced, p_actor, session_user,
            round(p_decision.risk_score, 3), p_decision.risk_level)
    RETURNING decision_id INTO v_outcome.decision_id;

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
               (org_id, operation, memory_id, payload, decision, quarantined_by, quarantined_login)
        VALUES (p_item.org_id, p_operation, p_item.memory_id, v_payload,
                memgov.decision_json(p_decision), p_actor, session_user)
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
-- WHEN current_user <> 'memgov_owner').
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
BEGIN
    IF TG_TABLE_SCHEMA <> 'memgov' OR TG_TABLE_NAME <> 'long_term_memory_items' THEN
        RAISE EXCEPTION 'memgov.enforce_write() governs memgov.long_term_memory_items only'
            USING ERRCODE = '42501';
    END IF;

    -- the engine's columns: whatever a client's statement said, the engine decides
    IF TG_OP = 'INSERT' THEN
        -- another tenant is refused before anything is decided, logged or filed
        -- (row level security would see the row only after this trigger)
        IF NEW.org_id IS DISTINCT FROM current_setting('memgov.org_id', true) THEN
            PERFORM memgov.check_tenant(NEW.org_id);
        END IF;
        IF pg_column_size(NEW) > 1024 THEN
            PERFORM memgov.check_item_size(NEW);
        END IF;
        NEW.created_at := pg_catalog.now();
        NEW.updated_at := NEW.created_at;
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        NEW.status := 'active';
        NEW.last_confirmed_at := NULL;
        NEW.low_confidence_since := NULL;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        NEW.policy_version := NULL;
        NEW.decision_id := NULL;
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
    ELSE
        IF OLD.status = 'pending_approval' THEN
            RAISE EXCEPTION 'memgov: memory % is pending approval and cannot be forgotten', OLD.memory_id
                USING ERRCODE = 'MG409',
                      HINT = 'a reviewer denies it instead (memgov.deny / memgov.reject)';
        END IF;
        v_operation := 'forget';
        v_item := OLD;
    END IF;

    v_decision := memgov.decide(v_item, v_operation, v_actor);
    IF TG_OP = 'UPDATE' THEN
        -- forget rules apply to an update that makes a memory expire sooner (it is partly
        -- forgotten) and to one that takes it out of a hold (a legal hold is lifted by
        -- changing the policy, never by changing the memory)
        v_forget := memgov.decide(OLD, 'forget', v_actor);
        IF memgov.shortens_life(OLD, NEW)
           OR (v_forget.enforced AND v_forget.action = 'deny' AND cardinality(v_forget.matched_rule_ids) > 0
               AND NOT memgov.retention_held(NEW)) THEN
            v_decision := memgov.stricter(v_decision, v_forget);
        END IF;
    END IF;
    v_action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
    IF TG_OP = 'INSERT' AND (v_action = 'quarantine'
                             OR (v_action = 'deny' AND current_setting('memgov.on_deny', true) = 'skip')) THEN
        -- the row will not reach row level security: check the session's tenant binding here
        PERFORM memgov.check_tenant(NEW.org_id);
    END IF;

    v_outcome := memgov.record_write(v_operation, v_item, v_actor, v_decision);
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
    IF TG_OP = 'UPDATE' AND NEW.updated_at = OLD.updated_at THEN
        NEW.updated_at := now();
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

CREATE FUNCTION memgov.approval_channel(p_org_id text)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'memgov_approvals_' || left(md5(s.secret || ':' || p_org_id), 20) FROM memgov.channel_secret s
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

-- Whether the invoker may see objects of a tenant: admins every tenant, everybody else the session's.
CREATE FUNCTION memgov.sees_tenant(p_org_id text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.is_admin() OR p_org_id IS NOT DISTINCT FROM memgov.session_tenant()
$$;

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
-- tenant (another tenant's ids look the same as missing ones), MG409 when it is closed.
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
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: approval request % does not exist in tenant %', p_request_id,
                        coalesce(memgov.session_tenant(), '(memgov.org_id unset or not bound)')
            USING ERRCODE = 'MG404', HINT = 'SET memgov.org_id to the tenant of the request';
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
       SET status = p_status, decided_at = now(), decided_by = p_actor, decided_login = session_user,
           note = p_note
     WHERE request_id = p_request.request_id AND org_id = p_request.org_id;
    IF p_status <> 'approved' AND p_request.operation = 'remember' THEN
        DELETE FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval';
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
    CASE p_operation
    WHEN 'remember' THEN
        IF p_pending THEN
            UPDATE memgov.long_term_memory_items AS m
               SET status = 'active', policy_version = p_policy_version, decision_id = p_decision_id
             WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
               AND m.status = 'pending_approval';
        ELSE
            p_item.status := 'active';
            p_item.last_confirmed_at := NULL;
            p_item.low_confidence_since := NULL;
            p_item.updated_at := p_item.created_at;
            p_item.policy_version := p_policy_version;
            p_item.decision_id := p_decision_id;
            BEGIN
                INSERT INTO memgov.long_term_memory_items SELECT (p_item).*;
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
               metadata = p_item.metadata, policy_version = p_policy_version, decision_id = p_decision_id
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
           AND m.status = 'active';
    WHEN 'forget' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
    END CASE;
END
$$;

-- Approves a locked pending request: re-decided by the active policy first (a policy
-- that now denies or quarantines it wins over the approval), four eyes, logged.
-- A held INSERT is approved as the reviewer saw it: the request's payload.
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
BEGIN
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
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level)
    VALUES (p_request.operation, p_request.memory_id, p_request.org_id, v_decision.action,
            v_decision.reason_codes, v_decision.matched_rule_ids, v_decision.policy_version,
            v_decision.mode, v_decision.enforced, v_actor, session_user, round(v_decision.risk_score, 3),
            v_decision.risk_level)
    RETURNING decision_id INTO v_id;

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

-- Locks a held quarantine entry; MG404 when it does not exist in the caller's tenant.
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
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: quarantine entry % does not exist in tenant %', p_quarantine_id,
                        coalesce(memgov.session_tenant(), '(memgov.org_id unset or not bound)')
            USING ERRCODE = 'MG404', HINT = 'SET memgov.org_id to the tenant of the entry';
    END IF;
    IF v_entry.status <> 'held' THEN
        RAISE EXCEPTION 'memgov: quarantine entry % is already %', p_quarantine_id, v_entry.status
            USING ERRCODE = 'MG409';
    END IF;
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
    UPDATE memgov.quarantine AS q
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = memgov.invoker_role(), resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged');
END
$$;

-- Privileges: writers reach the write path through the table, remember() and forget();
-- reviewers decide requests and quarantine entries. Nothing else here is a client's.
REVOKE EXECUTE ON FUNCTION memgov.remember(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.remember(jsonb) TO memgov_writer, memgov_admin;
-- remember() runs with its caller's rights and builds its row with item_from_json()
GRANT EXECUTE ON FUNCTION memgov.item_from_json(jsonb) TO memgov_writer, memgov_admin;
GRANT EXECUTE ON FUNCTION
    memgov.approve(uuid, text),
    memgov.deny(uuid, text),
    memgov.release_quarantine(uuid),
    memgov.purge_quarantine(uuid),
    memgov.approval_channel()
    TO memgov_reviewer, memgov_admin;

RESET ROLE;

-- migrate:downgrade
DROP TRIGGER enforce_write ON memgov.long_term_memory_items;
DROP TRIGGER engine_columns ON memgov.long_term_memory_items;
DROP TRIGGER refuse_truncate ON memgov.long_term_memory_items;
DO $drop$
DECLARE
    v_routine regprocedure;
BEGIN
    FOR v_routine IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           AND p.proname = ANY (ARRAY[
               'purge_quarantine', 'release_quarantine', 'held_quarantine', 'deny', 'approve',
               'deny_request', 'approve_request', 'apply_write', 'content_of', 'close_request',
               'pending_request', 'check_reviewer', 'sees_tenant', 'remember', 'approval_channel',
               'refuse_truncate', 'engine_columns', 'enforce_write', 'raise_denied', 'record_write',
               'stricter', 'shortens_life', 'check_item_size', 'check_fact_size', 'low_confidence_since', 'expiry_of'])
    LOOP
        EXECUTE pg_catalog.format('DROP ROUTINE %s', v_routine);
    END LOOP;
END
$drop$;
DROP TABLE memgov.channel_secret;
DROP TYPE memgov.write_outcome;
