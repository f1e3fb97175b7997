-- memgov: the write trigger (memgov.enforce_write) and what shares decisions between the
-- rows of one statement (the batch: memgov.batch_seal, first_shared, share_decision,
-- flush_batch, list_shared), the triggers on memgov.long_term_memory_items, and the
-- refusal of DELETE and TRUNCATE (a memory leaves through forget or the sweep).
-- sql/040_enforce.sql holds the decision helpers it calls (memgov.govern ...).

SET ROLE memgov_owner;

-- Per session, the hash of memgov.batch as the engine last wrote it, under the session's key
-- (memgov.session_key): a sequence's currval, which no client may read or set.
CREATE SEQUENCE memgov.batch_seal AS bigint MINVALUE -9223372036854775808;
COMMENT ON SEQUENCE memgov.batch_seal IS
    'Per session (currval), the keyed hash of memgov.batch as memgov last set it: memgov''s only';

-- Writes memgov.batch and seals it: its hash under the session's key (memgov.batch_sealed
-- says the session has a seal; a client that sets it only makes its own statement fail).
CREATE FUNCTION memgov.seal_batch(p_batch text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_catalog.setval('memgov.batch_seal', pg_catalog.hashtextextended(p_batch, memgov.session_key()));
    PERFORM pg_catalog.set_config('memgov.batch_sealed', 'on', false);
    PERFORM pg_catalog.set_config('memgov.batch', p_batch, true);
END
$$;

-- The decision_id a stored row may share with the statement's first stored row, which
-- logged its decision on its own (the first part of memgov.batch), when that log row says
-- the same decision; the entry for later rows is then added. NULL otherwise.
CREATE FUNCTION memgov.first_shared(p_batch text, p_key text, p_org_id text, p_operation text, p_actor text,
                                    p_decision memgov.decision)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_first  bigint := nullif(pg_catalog.split_part(pg_catalog.split_part(p_batch, E'\x1c', 2), E'\x1e', 1),
                              '')::bigint;
BEGIN
    IF v_first IS NULL OR NOT EXISTS (
        SELECT FROM memgov.decision_log d
         WHERE d.org_id = p_org_id AND d.decision_id = v_first
           AND d.xact_id = pg_catalog.txid_current() AND d.login = session_user AND d.memory_ids IS NULL
           AND d.operation = p_operation AND d.actor = p_actor AND d.action = p_decision.action
           AND d.enforced = p_decision.enforced AND d.mode IS NOT DISTINCT FROM p_decision.mode
           AND d.policy_version IS NOT DISTINCT FROM p_decision.policy_version
           AND d.risk_level IS NOT DISTINCT FROM p_decision.risk_level
           AND d.reason_codes = p_decision.reason_codes AND d.matched_rule_ids = p_decision.matched_rule_ids) THEN
        RETURN NULL;
    END IF;
    PERFORM memgov.share_decision(p_batch, p_key, v_first);
    RETURN v_first;
END
$$;

-- Lets the later rows of this statement with the same decision share its log row: adds the
-- decision's entry to memgov.batch and seals it. Entries the engine did not seal are dropped
-- first (only the first row's part is kept: memgov.first_shared checks it in the log).
CREATE FUNCTION memgov.share_decision(p_batch text, p_key text, p_decision_id bigint)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_batch  text := p_batch;
BEGIN
    IF pg_catalog.strpos(v_batch, E'\x1e') > 0
       AND (pg_catalog.current_setting('memgov.batch_sealed', true) IS DISTINCT FROM 'on'
            OR pg_catalog.hashtextextended(v_batch, memgov.session_key()) <> pg_catalog.currval('memgov.batch_seal')) THEN
        v_batch := pg_catalog.split_part(v_batch, E'\x1e', 1);
    END IF;
    PERFORM memgov.seal_batch(v_batch || E'\x1e' || p_key || E'\x1d' || pg_catalog.lpad(p_decision_id::text, 20, '0'));
END
$$;

-- The client row trigger on memgov.long_term_memory_items (BEFORE INSERT OR UPDATE,
-- WHEN current_user <> 'memgov_owner'). PL/pgSQL prepares each expression it evaluates once
-- per transaction, 3k-10k instructions each, and a single-row write is a transaction: the
-- common case (a remembered memory the policy stores) evaluates as few expressions as the
-- checks allow, each rare case behind one test that the common case fails.
CREATE FUNCTION memgov.enforce_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor      text := memgov.invoker_role();  -- inlined: a SQL function without a SET clause
    v_operation  text;
    v_decision   memgov.decision;
    v_forget     memgov.decision;
    v_outcome    memgov.write_outcome;
    v_shadow     memgov.shadow_verdict;
    v_skip       boolean;
    v_batch      text;
    v_key        text;
    v_id         bigint;
    v_first      text;  -- memgov.batch as the statement's first stored row set it
BEGIN
    -- (one test for another table, memgov_owner and an engine write, which a client's write fails)
    IF v_actor = 'memgov_owner' OR current_setting('memgov.engine_write', true) <> ''
       OR TG_RELID <> 'memgov.long_term_memory_items'::regclass THEN
        IF TG_TABLE_SCHEMA <> 'memgov' OR TG_TABLE_NAME <> 'long_term_memory_items' THEN
            RAISE EXCEPTION 'memgov.enforce_write() governs memgov.long_term_memory_items only'
                USING ERRCODE = '42501';
        END IF;
        -- memgov's own functions have decided already (memgov.engine_writes): the derived
        -- columns follow the row, nothing else (also for a session acting as memgov_owner)
        IF v_actor = 'memgov_owner' OR memgov.is_engine_write(current_setting('memgov.engine_write', true)) THEN
            -- (a new text search configuration or read class alone, from a deploy, is no change
            -- of the memory; nor is a new expires_at, which only memgov.refresh_ttl sets: a
            -- TTL's refresh)
            IF TG_OP = 'UPDATE' AND NEW.updated_at = OLD.updated_at AND NEW.search_config = OLD.search_config
               AND NEW.read_class IS NOT DISTINCT FROM OLD.read_class
               AND NEW.expires_at IS NOT DISTINCT FROM OLD.expires_at THEN
                NEW.updated_at := pg_catalog.now();
            ELSIF TG_OP = 'INSERT' THEN
                NEW.search_config := memgov.search_config(NEW.org_id);
            END IF;
            -- the TTL runs on to the end the row has (a refresh's, the held write's), else from now
            NEW.expires_at := memgov.item_expiry(NEW, coalesce(NEW.expires_at,
                                                               pg_catalog.now() + NEW.ttl_minutes * interval '1 minute'));
            NEW.low_confidence_since := memgov.low_confidence_since(NEW);
            NEW.read_class := memgov.read_class(NEW);
            RETURN NEW;
        END IF;
    END IF;

    -- the engine's columns: whatever a client's statement said, the engine decides
    IF TG_OP = 'INSERT' THEN
        -- another tenant is refused before anything is decided, logged or filed
        -- (row level security would see the row only after this trigger); under tenant
        -- binding the session's own setting may name a tenant the login is not granted
        -- (one test for both, and for a row over 1 KiB: the size limits)
        IF NEW.org_id IS DISTINCT FROM current_setting('memgov.org_id', true) OR memgov.binding_on()
           OR pg_column_size(NEW) > 1024 THEN
            IF NEW.org_id IS DISTINCT FROM current_setting('memgov.org_id', true) OR memgov.binding_on() THEN
                PERFORM memgov.check_tenant(NEW.org_id);
            END IF;
            IF pg_column_size(NEW) > 1024 THEN
                PERFORM memgov.check_item_size(NEW);
            END IF;
        END IF;
        -- a new memory starts active, never confirmed, undecided, without expiry (one test
        -- for the six)
        IF NEW.status IS DISTINCT FROM 'active' OR NEW.last_confirmed_at IS NOT NULL
           OR NEW.low_confidence_since IS NOT NULL OR NEW.policy_version IS NOT NULL
           OR NEW.decision_id IS NOT NULL OR NEW.expires_at IS NOT NULL THEN
            NEW.status := 'active';
            NEW.last_confirmed_at := NULL;
            NEW.low_confidence_since := NULL;
            NEW.policy_version := NULL;
            NEW.decision_id := NULL;
            NEW.expires_at := NULL;
        END IF;
        NEW.created_at := pg_catalog.now();
        NEW.updated_at := NEW.created_at;
        -- (no expiry for the default retention without a TTL, which is kept)
        IF NEW.retention_policy <> 'permanent_until_revoked' OR NEW.ttl_minutes IS NOT NULL THEN
            NEW.expires_at := memgov.item_expiry(NEW, NEW.updated_at + NEW.ttl_minutes * interval '1 minute');
            IF NEW.retention_policy = 'confidence_based' THEN
                NEW.low_confidence_since := memgov.low_confidence_since(NEW);
            END IF;
        END IF;
        NEW.search_config := memgov.search_config(NEW.org_id);
        v_operation := 'remember';
        v_decision := memgov.decide(NEW, v_operation, v_actor);
    ELSE
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
        NEW.expires_at := memgov.item_expiry(NEW, NEW.updated_at + NEW.ttl_minutes * interval '1 minute');
        NEW.status := OLD.status;
        NEW.last_confirmed_at := OLD.last_confirmed_at;
        NEW.low_confidence_since := OLD.low_confidence_since;
        NEW.policy_version := OLD.policy_version;
        NEW.decision_id := OLD.decision_id;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        v_operation := 'update';
        v_decision := memgov.decide(NEW, v_operation, v_actor);
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
    END IF;
    -- who may read the row, as far as the row alone decides (sql/060_recall.sql): whatever a
    -- statement said, from the row as it is stored (a held INSERT's status aside, which only
    -- an UPDATE of the engine's changes, and that computes it again)
    NEW.read_class := memgov.read_class(NEW);
    IF memgov.shadow_of(NEW.org_id) IS NOT NULL THEN
        v_shadow := memgov.judge_shadow(v_operation, NEW, CASE WHEN TG_OP = 'UPDATE' THEN OLD END, v_actor);
    END IF;

    -- stored as written, outside memgov.remember(): nothing filed, nobody to tell, and
    -- logged once per distinct decision of the statement. The statement's first stored row
    -- logs its decision as a single write does; a later row shares a log row of the same
    -- decision (memgov.batch) unless a shadow records beside it (its shadow decision names
    -- a log row of its own).
    IF (v_decision.action = 'allow' OR NOT v_decision.enforced)
       AND current_setting('memgov.capture', true) IS DISTINCT FROM 'on' THEN
        -- (a transaction's first statement finds memgov.batch empty: one test)
        IF current_setting('memgov.batch', true) <> '' THEN
            v_batch := current_setting('memgov.batch', true);
            IF v_shadow.shadow_id IS NULL AND starts_with(v_batch, statement_timestamp()::text || E'\x1c') THEN
                v_key := concat_ws(E'\x1f', v_operation, NEW.org_id, v_actor, v_decision.action, v_decision.enforced,
                                   v_decision.policy_version, v_decision.mode, v_decision.risk_level,
                                   array_to_string(v_decision.reason_codes, E'\x1f', ''),
                                   array_to_string(v_decision.matched_rule_ids, E'\x1f', ''));
                -- the decision's entry, while memgov.batch is as the engine sealed it; else (no
                -- entry yet, or none to trust) the first row's log row, if alike. One expression:
                -- a later row of a bulk statement evaluates it and nothing more.
                v_id := coalesce(
                    CASE WHEN strpos(v_batch, E'\x1e') = 0 THEN NULL  -- no entry (nor a seal) yet
                         WHEN current_setting('memgov.session_keyed', true) IS DISTINCT FROM 'on' THEN NULL
                         WHEN hashtextextended(v_batch, currval('memgov.session_key')) = currval('memgov.batch_seal')
                         THEN nullif(left(split_part(v_batch, E'\x1e' || v_key || E'\x1d', 2), 20), '')::bigint
                    END,
                    memgov.first_shared(v_batch, v_key, NEW.org_id, v_operation, v_actor, v_decision));
            END IF;
        END IF;
        IF v_id IS NOT NULL THEN
            IF memgov.sample_rate(NEW.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(NEW.org_id) THEN
                PERFORM memgov.keep_sample(v_operation, NEW, v_actor, v_id);
            END IF;
            NEW.decision_id := v_id;
            NEW.policy_version := v_decision.policy_version;
        ELSIF v_shadow.shadow_id IS NULL AND memgov.sample_rate(NEW.org_id) = 0 THEN
            -- its log row is a stored write's one consequence (memgov.govern is the path of
            -- every other: a shadow's verdict beside it, a replay sample). memgov.log_decision's
            -- INSERT, written out: a PL/pgSQL call costs a single-row write 13k instructions.
            -- Its RETURNING fills the row's engine columns and, for the statement's first stored
            -- row, memgov.batch (each PL/pgSQL statement saved is one less prepared per write).
            INSERT INTO memgov.decision_log
                   (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
                    policy_version, mode, enforced, actor, login, risk_score, risk_level)
            VALUES (v_operation, NEW.memory_id, NEW.org_id, v_decision.action,
                    v_decision.reason_codes, v_decision.matched_rule_ids, v_decision.policy_version,
                    v_decision.mode, v_decision.enforced, v_actor, session_user,
                    round(v_decision.risk_score, 3), v_decision.risk_level)
            RETURNING decision_id, decision_id, policy_version,
                      CASE WHEN v_key IS NULL  -- the statement's first stored row
                           THEN set_config('memgov.batch', statement_timestamp()::text || E'\x1c' || decision_id, true)
                      END
                 INTO v_id, NEW.decision_id, NEW.policy_version, v_first;
            IF v_key IS NOT NULL THEN
                PERFORM memgov.share_decision(v_batch, v_key, v_id);
            END IF;
        ELSE
            v_id := (memgov.govern(v_operation, NEW, v_actor, v_decision, v_shadow, p_silent => true)).decision_id;
            NEW.decision_id := v_id;
            NEW.policy_version := v_decision.policy_version;
        END IF;
        IF memgov.reads_governed(NEW.org_id) THEN
            -- its INSERT ... RETURNING reads it back (memgov.written_here)
            v_key := set_config('memgov.written', memgov.row_token(NEW, CASE WHEN current_setting('memgov.session_keyed', true) = 'on' THEN currval('memgov.session_key') ELSE memgov.session_key() END), true);
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'INSERT' AND (v_decision.action = 'quarantine'
                             OR (v_decision.action = 'deny' AND current_setting('memgov.on_deny', true) = 'skip')) THEN
        -- the row will not reach row level security: check the session's tenant binding here
        PERFORM memgov.check_tenant(NEW.org_id);
    END IF;
    v_skip := coalesce(current_setting('memgov.on_deny', true) = 'skip', false);
    v_outcome := memgov.govern(v_operation, NEW, v_actor, v_decision, v_shadow, p_raise => NOT v_skip);
    IF current_setting('memgov.capture', true) = 'on' THEN
        -- memgov.remember() reads the outcome of the row it inserted
        PERFORM set_config('memgov.last_outcome', v_outcome.decision::text, true);
    END IF;

    CASE v_outcome.action
    WHEN 'allow' THEN
        NEW.policy_version := v_outcome.policy_version;
        NEW.decision_id := v_outcome.decision_id;
        IF memgov.reads_governed(NEW.org_id) THEN
            v_key := set_config('memgov.written', memgov.row_token(NEW, CASE WHEN current_setting('memgov.session_keyed', true) = 'on' THEN currval('memgov.session_key') ELSE memgov.session_key() END), true);
        END IF;
        RETURN NEW;
    WHEN 'require_approval' THEN
        IF TG_OP = 'INSERT' THEN
            NEW.status := 'pending_approval';
            NEW.policy_version := v_outcome.policy_version;
            NEW.decision_id := v_outcome.decision_id;
            -- only reviewers read pending memories: this one its writer's RETURNING too
            v_key := set_config('memgov.written', memgov.row_token(NEW, CASE WHEN current_setting('memgov.session_keyed', true) = 'on' THEN currval('memgov.session_key') ELSE memgov.session_key() END), true);
            RETURN NEW;
        END IF;
        RETURN NULL;  -- the change waits in memgov.approval_requests; the row is untouched
    ELSE
        RETURN NULL;  -- quarantined: its payload waits in memgov.quarantine; denied in skip mode
    END CASE;
END
$$;

-- At the end of an INSERT or UPDATE (AFTER ... FOR EACH STATEMENT, with the rows it wrote):
-- memgov.batch is emptied, and when rows of the statement shared decisions (it holds
-- entries), memgov.list_shared gives each shared decision its memories (a group of one row
-- too: inside a function or DO block, a later single-row INSERT shares the log row of the
-- first one, taken by an earlier statement of the same top-level statement). It runs as the
-- statement's role and reads only the statement's own rows: what it hands on is checked
-- where it is written.
CREATE FUNCTION memgov.flush_batch()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- (every name, type and operator qualified, and no SET clause, which would cost each
    -- statement 12k instructions: this runs as the statement's role, with its rights and
    -- search_path, where a type of the client's pg_temp would come first; one expression,
    -- no variable: PL/pgSQL prepares each anew in every transaction, and a single-row
    -- write's statement finds nothing to list. strpos of NULL is NULL, and NULL is not > 0)
    IF pg_catalog.strpos(pg_catalog.current_setting('memgov.batch', true), E'\x1e') OPERATOR(pg_catalog.>) 0 THEN
        PERFORM pg_catalog.set_config('memgov.batch', '', true);
        PERFORM memgov.list_shared(ARRAY(
            SELECT ROW(w.org_id, w.decision_id, pg_catalog.array_agg(w.memory_id ORDER BY w.memory_id))::memgov.shared_decision
              FROM written w
             WHERE w.status OPERATOR(pg_catalog.=) 'active'
             GROUP BY w.org_id, w.decision_id));
    END IF;
    RETURN NULL;
END
$$;

-- A decision that several rows of one statement share: their tenant, its log row, their ids.
CREATE TYPE memgov.shared_decision AS (org_id text, decision_id bigint, memory_ids uuid[]);

-- Gives each decision that rows of a statement share its memories on its log row:
-- memory_ids (those it listed before, or the memory it was logged with, and these),
-- memory_count; memory_id NULL. Only what is true is written: the log row must be this
-- transaction's and login's, and every memory must be stored under that decision (its
-- decision_id, an engine column); else 0A000 (a statement on the table run from inside
-- another one's functions shares what it cannot list). The statement's entries end here
-- (memgov.batch_seal). A group of one row logged on its own needs nothing.
CREATE FUNCTION memgov.list_shared(p_shared memgov.shared_decision[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_group   memgov.shared_decision;
    v_own     uuid;
    v_listed  uuid[];
    v_all     uuid[];
BEGIN
    IF current_setting('memgov.session_keyed', true) = 'on' THEN
        PERFORM setval('memgov.batch_seal', 0);  -- no entry of the statement is trusted again
    END IF;
    FOREACH v_group IN ARRAY coalesce(p_shared, '{}') LOOP
        SELECT d.memory_id, d.memory_ids INTO v_own, v_listed
          FROM memgov.decision_log d
         WHERE d.org_id = v_group.org_id AND d.decision_id = v_group.decision_id
           AND d.xact_id = txid_current() AND d.login = session_user;
        IF NOT FOUND OR (SELECT count(*) FROM memgov.long_term_memory_items m
                          WHERE m.org_id = v_group.org_id AND m.memory_id = ANY (v_group.memory_ids)
                            AND m.decision_id = v_group.decision_id) <> cardinality(v_group.memory_ids) THEN
            RAISE EXCEPTION 'memgov: decision % was not logged with the rows that name it', v_group.decision_id
                USING ERRCODE = '0A000',
                      HINT = 'write memgov.long_term_memory_items in separate statements, not from inside another one';
        END IF;
        CONTINUE WHEN v_listed IS NULL AND v_group.memory_ids = ARRAY[v_own];
        v_all := ARRAY(SELECT DISTINCT i FROM unnest(coalesce(v_listed, ARRAY[v_own]) || v_group.memory_ids) AS i
                        WHERE i IS NOT NULL ORDER BY i);
        UPDATE memgov.decision_log d
           SET memory_id = NULL, memory_ids = v_all, memory_count = cardinality(v_all)
         WHERE d.org_id = v_group.org_id AND d.decision_id = v_group.decision_id;
    END LOOP;
END
$$;

-- (No WHEN clause: PostgreSQL prepares a trigger's WHEN anew for every statement, 25k
-- instructions of a single-row write; the function tells the engine's writes apart itself.)
CREATE TRIGGER enforce_write
    BEFORE INSERT OR UPDATE ON memgov.long_term_memory_items
    FOR EACH ROW EXECUTE FUNCTION memgov.enforce_write();
CREATE TRIGGER flush_inserted
    AFTER INSERT ON memgov.long_term_memory_items
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.flush_batch();
CREATE TRIGGER flush_updated
    AFTER UPDATE ON memgov.long_term_memory_items
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.flush_batch();
-- session_replication_role = replica does not switch them off
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER flush_inserted;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER flush_updated;

-- Refuses a DELETE to every role but memgov's own functions: a memory is forgotten through
-- memgov.forget(memory_id) or memgov.forget_where(filter), which decide each one. A
-- statement-level check: nothing runs per row (the sweep deletes without a row trigger).
CREATE FUNCTION memgov.refuse_delete()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user <> 'memgov_owner' THEN
        RAISE EXCEPTION 'memgov: DELETE on % is refused: forgetting is decided memory by memory', TG_TABLE_NAME
            USING ERRCODE = 'MG403',
                  HINT = 'forget with memgov.forget(memory_id) or memgov.forget_where(filter)';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER refuse_delete
    BEFORE DELETE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_delete();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER refuse_delete;

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

RESET ROLE;
