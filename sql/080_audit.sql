-- memgov: the decision log is append-only and sealed into a hash chain.
--
-- A decision, once logged, is never changed or removed: UPDATE, DELETE and TRUNCATE of
-- memgov.decision_log, of its seals and of its archive records are refused for every role,
-- superusers and memgov_owner's own functions included (SQLSTATE 42501), by triggers that
-- fire even under session_replication_role = replica (ENABLE ALWAYS). Rows leave only
-- through memgov.archive_decision_log(before), which removes whole seals, oldest first, and
-- records what it removed.
--
-- Sealing costs a writer a column default and nothing else: each row records the
-- transaction that wrote it (xact_id). memgov.seal_decision_log(), run at the end of every
-- memgov.run_maintenance(), takes as its horizon the oldest transaction still running (its
-- snapshot's xmin): every transaction below it has committed or aborted, so no row of one
-- can appear later. It seals exactly those rows, in (xact_id, decision_id) order, after the
-- last row of the previous seal. A row whose transaction was still open waits for a later
-- seal, however low the decision_id it took: late commits are never mistaken for tampering.
-- Each seal keeps the ids and sha256 digests of its rows, and the head of the record of
-- settings changes when it was made (its last change_id and change_hash; 0 and 32 zero bytes
-- when there is none yet), and
--
--     seal_hash = sha256(prev_hash || 'memgov-seal-v2 <seal_id> <after> <last> <change_id>:<change_hash> <ids>'
--                        || digests)
--
-- (the first seal's prev_hash is 32 zero bytes). A seal made before seals covered the settings
-- record (settings_change_id NULL) keeps its hash: 'memgov-seal-v1 <seal_id> <after> <last>
-- <ids>'. memgov.verify_decision_log() recomputes it all, names the first altered, missing or
-- extra row, and checks that each seal's settings head is still in the record as it was.
--
-- What this cannot stop: a superuser or memgov_owner may disable the triggers and rewrite
-- the log and the chain alike. Keep the last seal's hash outside the database (memgov
-- verify-log prints it, --anchor checks it later). docs/security.md says more.

SET ROLE memgov_owner;

-- The seals, a hash chain (global: org_id '*'). Seal n covers the rows after seal n-1's
-- last row up to its own, in (xact_id, decision_id) order; after = (0, 0) for the first.
CREATE TABLE memgov.decision_log_seals (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    seal_id            bigint      NOT NULL CHECK (seal_id > 0),
    sealed_at          timestamptz NOT NULL DEFAULT now(),
    sealed_by          text        NOT NULL,
    sealed_login       text        NOT NULL DEFAULT session_user,
    horizon_xact_id    bigint      NOT NULL,  -- every transaction below it had ended
    after_xact_id      bigint      NOT NULL,
    after_decision_id  bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          integer     NOT NULL CHECK (row_count > 0),
    decision_ids       bigint[]    NOT NULL,  -- in (xact_id, decision_id) order
    row_digests        bytea       NOT NULL,  -- 32 bytes a row, in the order of decision_ids
    last_decided_at    timestamptz NOT NULL,  -- the latest decided_at of its rows (archival)
    prev_hash          bytea       NOT NULL,
    seal_hash          bytea       NOT NULL,
    -- the head of memgov.settings_changes when sealed (0 and 32 zero bytes: no change yet);
    -- NULL in a seal made before seals covered it ('memgov-seal-v1')
    settings_change_id bigint,
    settings_hash      bytea,
    PRIMARY KEY (org_id, seal_id),
    CONSTRAINT decision_log_seals_settings_head_check CHECK ((settings_change_id IS NULL) = (settings_hash IS NULL))
);
COMMENT ON TABLE memgov.decision_log_seals IS
    'Hash chain over memgov.decision_log: each seal covers a batch of rows and the previous seal';

-- What memgov.archive_decision_log() removed: whole seals, the oldest first. Verification
-- continues from the last one's hash and last row.
CREATE TABLE memgov.decision_log_archives (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    archive_id         bigint      NOT NULL CHECK (archive_id > 0),
    archived_at        timestamptz NOT NULL DEFAULT now(),
    archived_by        text        NOT NULL,
    archived_login     text        NOT NULL DEFAULT session_user,
    archived_xact_id   bigint      NOT NULL DEFAULT (pg_catalog.pg_current_xact_id())::text::bigint,
    decided_before     timestamptz NOT NULL,
    first_seal_id      bigint      NOT NULL,
    last_seal_id       bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          bigint      NOT NULL,
    last_hash          bytea       NOT NULL,
    -- memgov.settings' archive_min_age when it ran (NULL: made before archival had a floor)
    min_age            interval,
    PRIMARY KEY (org_id, archive_id),
    CHECK (last_seal_id >= first_seal_id)
);
COMMENT ON TABLE memgov.decision_log_archives IS
    'Seals removed from the decision log by memgov.archive_decision_log, with the last removed seal''s hash';

-- Every change of memgov.settings: who, when, the old and the new value (NULL: the row did
-- not exist, or no longer does). Append-only like the log, and chained: each change's hash
-- covers the previous one's, so that a row changed or removed in the middle shows
-- (memgov.verify_decision_log, 'settings_changes').
CREATE TABLE memgov.settings_changes (
    change_id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    changed_at   timestamptz NOT NULL DEFAULT now(),
    login        text        NOT NULL DEFAULT session_user,
    actor        text        NOT NULL,
    name         text        NOT NULL,
    old_value    bigint,
    new_value    bigint,
    prev_hash    bytea       NOT NULL,
    change_hash  bytea       NOT NULL
);
COMMENT ON TABLE memgov.settings_changes IS
    'Every change of memgov.settings (who, when, old and new value): append-only, hash-chained';

-- Refuses UPDATE, DELETE and TRUNCATE of the decision log, its seals and its archive records,
-- for every role. It lets through only memgov.archive_decision_log()'s deletes of what that
-- function has just recorded, in this very transaction, as archived, and the memories that
-- memgov.list_shared() adds to a decision its statement logged (before it can be sealed).
CREATE FUNCTION memgov.refuse_log_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_archive  text;
    v_allowed  boolean := false;
BEGIN
    -- current_user is memgov_owner only inside memgov's SECURITY DEFINER functions (no client
    -- role is a member of it); memgov.archiving alone proves nothing: any session may set it
    IF TG_OP = 'DELETE' AND current_user = 'memgov_owner' THEN
        v_archive := current_setting('memgov.archiving', true);
        IF v_archive ~ '^[1-9][0-9]{0,17}$' THEN
            IF TG_TABLE_NAME = 'decision_log' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND (OLD.xact_id, OLD.decision_id) <= (a.last_xact_id, a.last_decision_id));
            ELSIF TG_TABLE_NAME = 'decision_log_seals' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND OLD.seal_id <= a.last_seal_id);
            END IF;
        END IF;
    END IF;
    -- a statement's shared decision gets its memories before its transaction ends
    -- (memgov.list_shared): only those columns, only on a row of this transaction
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'decision_log' AND current_user = 'memgov_owner' THEN
        IF OLD.xact_id = pg_catalog.txid_current_if_assigned()
           AND NEW.memory_id IS NULL AND NEW.memory_ids @> coalesce(OLD.memory_ids, ARRAY[OLD.memory_id])
           AND NEW.memory_count = cardinality(NEW.memory_ids)
           AND (NEW.decision_id, NEW.decided_at, NEW.operation, NEW.org_id, NEW.action, NEW.reason_codes,
                NEW.matched_rule_ids, NEW.policy_version, NEW.mode, NEW.enforced, NEW.actor, NEW.login,
                NEW.risk_score, NEW.risk_level, NEW.query_fingerprint, NEW.returned, NEW.withheld, NEW.xact_id)
               IS NOT DISTINCT FROM
               (OLD.decision_id, OLD.decided_at, OLD.operation, OLD.org_id, OLD.action, OLD.reason_codes,
                OLD.matched_rule_ids, OLD.policy_version, OLD.mode, OLD.enforced, OLD.actor, OLD.login,
                OLD.risk_score, OLD.risk_level, OLD.query_fingerprint, OLD.returned, OLD.withheld, OLD.xact_id) THEN
            RETURN NEW;
        END IF;
    END IF;
    IF v_allowed THEN
        RETURN OLD;
    END IF;
    IF TG_TABLE_NAME = 'settings_changes' THEN
        RAISE EXCEPTION 'memgov: %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
            USING ERRCODE = '42501', HINT = 'the record of settings changes is never changed or removed';
    END IF;
    RAISE EXCEPTION 'memgov: %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = '42501',
              HINT = 'logged decisions are never changed; sealed rows leave only through '
                     'memgov.archive_decision_log(before), which records what it removes';
END
$$;

CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_seals
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_seals
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_archives
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_archives
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
-- also under session_replication_role = replica, which would silence ordinary triggers
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_truncate;
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.settings_changes
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.settings_changes
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
ALTER TABLE memgov.settings_changes ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.settings_changes ENABLE ALWAYS TRIGGER refuse_truncate;

-- The hash of a settings change: of the previous change's hash and the change itself.
CREATE FUNCTION memgov.settings_change_hash(p_prev_hash bytea, p_change_id bigint, p_changed_at timestamptz,
                                            p_login text, p_actor text, p_name text,
                                            p_old_value bigint, p_new_value bigint)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-settings-v1 %s %s %s %s %s %s %s',
                      p_change_id, EXTRACT(epoch FROM p_changed_at), pg_catalog.quote_literal(p_login),
                      pg_catalog.quote_literal(p_actor), pg_catalog.quote_literal(p_name),
                      coalesce(p_old_value::text, 'NULL'), coalesce(p_new_value::text, 'NULL')), 'UTF8'))
$$;

-- Records a change of memgov.settings (a value that stays the same is no change). Runs as
-- memgov_owner: nobody else may write the record.
CREATE FUNCTION memgov.record_setting_change()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_change  memgov.settings_changes;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.value IS NOT DISTINCT FROM OLD.value AND NEW.name = OLD.name THEN
        RETURN NULL;
    END IF;
    -- one change at a time: the chain has one end (clients may only read it, so none can
    -- hold a lock that conflicts with this one)
    LOCK TABLE memgov.settings_changes IN SHARE ROW EXCLUSIVE MODE;
    SELECT c.change_hash INTO v_change.prev_hash
      FROM memgov.settings_changes c ORDER BY c.change_id DESC LIMIT 1;
    v_change.prev_hash := coalesce(v_change.prev_hash, decode(repeat('00', 32), 'hex'));
    v_change.change_id := nextval(pg_get_serial_sequence('memgov.settings_changes', 'change_id'));
    v_change.changed_at := now();
    v_change.login := session_user;
    v_change.actor := memgov.invoker_role();
    v_change.name := CASE TG_OP WHEN 'DELETE' THEN OLD.name ELSE NEW.name END;
    v_change.old_value := CASE TG_OP WHEN 'INSERT' THEN NULL ELSE OLD.value END;
    v_change.new_value := CASE TG_OP WHEN 'DELETE' THEN NULL ELSE NEW.value END;
    v_change.change_hash := memgov.settings_change_hash(v_change.prev_hash, v_change.change_id,
        v_change.changed_at, v_change.login, v_change.actor, v_change.name, v_change.old_value, v_change.new_value);
    INSERT INTO memgov.settings_changes OVERRIDING SYSTEM VALUE SELECT v_change.*;
    RETURN NULL;
END
$$;

CREATE TRIGGER record_change AFTER INSERT OR UPDATE OR DELETE ON memgov.settings
    FOR EACH ROW EXECUTE FUNCTION memgov.record_setting_change();
ALTER TABLE memgov.settings ENABLE ALWAYS TRIGGER record_change;

-- Archival's floor (archive_min_age) is lowered by a superuser only: memgov_admin may raise
-- it, and change the other settings. Enabled ALWAYS, like the log's guards.
CREATE FUNCTION memgov.guard_settings()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.name = 'archive_min_age' AND NEW.value < OLD.value
       AND NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false)
       AND NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user), false) THEN
        RAISE EXCEPTION 'memgov: only a superuser may lower archive_min_age (from % to % seconds)', OLD.value, NEW.value
            USING ERRCODE = '42501',
                  HINT = 'the floor keeps recent decisions from being archived; memgov_admin may only raise it';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER guard_settings BEFORE UPDATE ON memgov.settings
    FOR EACH ROW EXECUTE FUNCTION memgov.guard_settings();
ALTER TABLE memgov.settings ENABLE ALWAYS TRIGGER guard_settings;

RESET ROLE;
