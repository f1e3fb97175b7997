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

-- The sha256 of one log row: all its columns as jsonb, NULLs left out (a column added later,
-- NULL in old rows, leaves their digests as they were). Timestamps print in the session's
-- TimeZone: every caller pins TimeZone = 'UTC'. (No SET clause, so that it is inlined.)
CREATE FUNCTION memgov.decision_digest(p_row memgov.decision_log)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(
               pg_catalog.jsonb_strip_nulls(pg_catalog.to_jsonb(p_row))::text, 'UTF8'))
$$;

-- The hash of a seal: of the previous seal's hash, the seal's own header and its rows' digests.
CREATE FUNCTION memgov.seal_hash(p_prev_hash bytea, p_seal_id bigint,
                                 p_after_xact_id bigint, p_after_decision_id bigint,
                                 p_last_xact_id bigint, p_last_decision_id bigint,
                                 p_decision_ids bigint[], p_row_digests bytea)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-seal-v1 %s %s:%s %s:%s %s',
                      p_seal_id, p_after_xact_id, p_after_decision_id, p_last_xact_id, p_last_decision_id,
                      pg_catalog.array_to_string(p_decision_ids, ',')), 'UTF8')
               || p_row_digests)
$$;

-- The hash of a seal that also covers the record of settings changes: its head when sealed
-- (change id and hash) joins the header, under another version tag.
CREATE FUNCTION memgov.seal_hash(p_prev_hash bytea, p_seal_id bigint,
                                 p_after_xact_id bigint, p_after_decision_id bigint,
                                 p_last_xact_id bigint, p_last_decision_id bigint,
                                 p_settings_change_id bigint, p_settings_hash bytea,
                                 p_decision_ids bigint[], p_row_digests bytea)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-seal-v2 %s %s:%s %s:%s %s:%s %s',
                      p_seal_id, p_after_xact_id, p_after_decision_id, p_last_xact_id, p_last_decision_id,
                      p_settings_change_id, pg_catalog.encode(p_settings_hash, 'hex'),
                      pg_catalog.array_to_string(p_decision_ids, ',')), 'UTF8')
               || p_row_digests)
$$;

-- Where the chain ends now: its last seal, else the last archive record (its last seal);
-- NULLs when nothing was ever sealed.
CREATE FUNCTION memgov.chain_end(OUT seal_id bigint, OUT xact_id bigint, OUT decision_id bigint, OUT hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT s.seal_id, s.last_xact_id, s.last_decision_id, s.seal_hash
      INTO chain_end.seal_id, chain_end.xact_id, chain_end.decision_id, chain_end.hash
      FROM memgov.decision_log_seals s
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        SELECT a.last_seal_id, a.last_xact_id, a.last_decision_id, a.last_hash
          INTO chain_end.seal_id, chain_end.xact_id, chain_end.decision_id, chain_end.hash
          FROM memgov.decision_log_archives a
         ORDER BY a.archive_id DESC
         LIMIT 1;
    END IF;
END
$$;

-- Seals the log's new rows: every row of a transaction older than all running ones, after
-- the last seal, p_batch_rows a seal; returns what it sealed. memgov.run_maintenance() passes
-- its run id: the run's summary then says how many rows it sealed (key 'sealed').
CREATE FUNCTION memgov.seal_decision_log(p_batch_rows integer DEFAULT 10000, p_run_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_seal_id   bigint;
    v_after_x   bigint;
    v_after_d   bigint;
    v_hash      bytea;
    v_horizon   bigint;
    v_next_xid  bigint;
    v_count     bigint;
    v_seal      record;
    v_new_hash  bytea;
    v_rows      bigint := 0;
    v_seals     integer := 0;
    v_set_id    bigint;
    v_set_hash  bytea;
BEGIN
    IF p_batch_rows IS NULL OR p_batch_rows < 1 THEN
        RAISE EXCEPTION 'memgov: p_batch_rows must be at least 1, not %', coalesce(p_batch_rows::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- one sealer or archiver at a time; clients may only read the seals, so none can hold
    -- a lock that conflicts with this one
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    -- where the chain ends, else nowhere yet
    SELECT e.seal_id, e.xact_id, e.decision_id, e.hash
      INTO v_seal_id, v_after_x, v_after_d, v_hash
      FROM memgov.chain_end() AS e;
    IF v_seal_id IS NULL THEN
        v_seal_id := 0;
        v_after_x := 0;
        v_after_d := 0;
        v_hash := decode(repeat('00', 32), 'hex');
    END IF;
    -- the horizon, from a snapshot taken now: the rows read below are read with a snapshot no
    -- older than it, so every row of a transaction below the horizon is there to be sealed
    SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
      INTO v_horizon, v_next_xid
      FROM pg_current_snapshot() AS s;
    IF v_after_x >= v_next_xid THEN
        -- the chain ends in a transaction this cluster has not reached: a logical copy of the
        -- database into another cluster (docs/security.md: restoring a sealed log)
        RAISE WARNING 'memgov: the decision log''s last seal ends at transaction %, ahead of this cluster''s next transaction %; nothing sealed',
                      v_after_x, v_next_xid
            USING ERRCODE = 'MG409',
                  HINT = 'a restored copy must start its transaction counter past the chain: see docs/security.md';
        v_horizon := 0;
    END IF;
    -- the head of the record of settings changes, which each seal made now covers (changes
    -- are chained one at a time: the committed ones are a prefix of the chain)
    SELECT c.change_id, c.change_hash INTO v_set_id, v_set_hash
      FROM memgov.settings_changes c ORDER BY c.change_id DESC LIMIT 1;
    IF NOT FOUND THEN
        v_set_id := 0;
        v_set_hash := decode(repeat('00', 32), 'hex');
    END IF;
    -- Passes of up to 100 seals, each reading its rows once (BRIN, from the chain's end), taking
    -- each digest once (in the aggregate) and cutting the rows into seals in (xact_id, decision_id)
    -- order: a query per seal read all the rows still waiting again, a cost per row that grew with them.
    LOOP
        v_count := 0;
        FOR v_seal IN
            SELECT count(*)::integer AS n, array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id) AS ids,
                   string_agg(memgov.decision_digest(b.d), ''::bytea ORDER BY b.xact_id, b.decision_id) AS digests,
                   max(b.xact_id) AS last_x, max(b.decided_at) AS decided
              FROM (SELECT r.*, (row_number() OVER (ORDER BY r.xact_id, r.decision_id) - 1) / p_batch_rows AS seal
                      FROM (SELECT d.xact_id, d.decision_id, d.decided_at, d
                              FROM memgov.decision_log d
                             WHERE d.xact_id >= v_after_x AND d.xact_id < v_horizon
                               AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
                             ORDER BY d.xact_id, d.decision_id
                             LIMIT p_batch_rows::bigint * 100) AS r) AS b
             GROUP BY b.seal ORDER BY b.seal
        LOOP
            v_seal_id := v_seal_id + 1;
            v_new_hash := memgov.seal_hash(v_hash, v_seal_id, v_after_x, v_after_d, v_seal.last_x,
                                           v_seal.ids[v_seal.n], v_set_id, v_set_hash, v_seal.ids, v_seal.digests);
            INSERT INTO memgov.decision_log_seals
                   (seal_id, sealed_by, horizon_xact_id, after_xact_id, after_decision_id, last_xact_id,
                    last_decision_id, row_count, decision_ids, row_digests, last_decided_at, prev_hash, seal_hash,
                    settings_change_id, settings_hash)
            VALUES (v_seal_id, memgov.invoker_role(), v_horizon, v_after_x, v_after_d, v_seal.last_x, v_seal.ids[v_seal.n],
                    v_seal.n, v_seal.ids, v_seal.digests, v_seal.decided, v_hash, v_new_hash, v_set_id, v_set_hash);
            v_hash := v_new_hash;
            SELECT v_seal.last_x, v_seal.ids[v_seal.n] INTO v_after_x, v_after_d;
            v_count := v_count + v_seal.n;
            v_seals := v_seals + 1;
        END LOOP;
        v_rows := v_rows + v_count;
        EXIT WHEN v_count < p_batch_rows::bigint * 100;
    END LOOP;
    -- the run's summary, when the caller is that run (it holds the maintenance lease)
    IF p_run_id IS NOT NULL THEN
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('sealed', v_rows)
         WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
           AND memgov.maintenance_holder() = pg_backend_pid();
    END IF;
    RETURN jsonb_build_object('sealed', v_rows, 'seals', v_seals, 'last_seal_id', nullif(v_seal_id, 0),
                              'last_hash', CASE WHEN v_seal_id > 0 THEN encode(v_hash, 'hex') END,
                              'horizon_xact_id', v_horizon);
END
$$;

-- Recomputes the chain: every seal in sequence, continuing the previous one (or the last
-- archive), its hash its own, its rows exactly the rows now in its range with the digests
-- it recorded; no row left before the chain's start, none after its end that the last
-- seal should have covered. Returns
--   {"ok", "seals", "rows", "first_break": {"seal_id", "decision_id", "problem", "detail"} | null,
--    "last_seal_id", "last_hash", "unsealed_rows", "archived": {...}, "anchor": ...}
-- problem: 'altered' (the row, or with decision_id null the seal, differs from what was
-- sealed), 'missing' (a sealed row or seal is gone), 'extra' (a row no seal accounts for).
-- A break with a change_id: a settings change the seal covers was altered or is gone.
-- p_anchor_seal_id / p_anchor_hash: a seal's hash kept outside the database; a different
-- hash there is a break (the chain was rewritten).
CREATE FUNCTION memgov.verify_decision_log(p_anchor_seal_id bigint DEFAULT NULL, p_anchor_hash text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE  -- one snapshot for every statement: seals and rows as of one moment
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_archive     memgov.decision_log_archives;
    v_seal        memgov.decision_log_seals;
    v_hash        bytea := decode(repeat('00', 32), 'hex');
    v_next_seal   bigint := 1;
    v_after_x     bigint := 0;
    v_after_d     bigint := 0;
    v_horizon     bigint := 0;
    v_next_xid    bigint := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    v_break       jsonb;
    v_anchor      text;
    v_seals       bigint := 0;
    v_rows        bigint := 0;
    v_archives    integer := 0;
    v_arch_seals  bigint := 0;
    v_arch_rows   bigint := 0;
    v_arch_runs   jsonb := '[]';
    v_change      memgov.settings_changes;
    v_set_hash    bytea := decode(repeat('00', 32), 'hex');
    v_set_count   bigint := 0;
    v_set_last    bigint;
    v_set_break   jsonb;
    v_set_head    bytea;
    v_floor       interval;
    v_ids         bigint[];
    v_digests     bytea;
    v_stored      bigint;
    v_actual      bigint;
    v_id          bigint;
    v_last_id     bigint;
    v_last_hash   bytea;
    v_end_x       bigint;
    v_end_d       bigint;
    v_unsealed    bigint;
BEGIN
    IF (p_anchor_seal_id IS NULL) <> (p_anchor_hash IS NULL)
       OR (p_anchor_hash IS NOT NULL AND p_anchor_hash !~ '^[0-9A-Fa-f]{64}$') THEN
        RAISE EXCEPTION 'memgov: an anchor is a seal id and that seal''s 64-digit hex hash'
            USING ERRCODE = '22023';
    END IF;
    v_anchor := CASE WHEN p_anchor_seal_id IS NOT NULL THEN 'not reached' END;

    -- the record of settings changes: a chain of its own, each change continuing the last
    -- (checked first: each seal says up to which change it covers the record)
    FOR v_change IN SELECT * FROM memgov.settings_changes c ORDER BY c.change_id LOOP
        IF v_change.prev_hash <> v_set_hash THEN
            v_set_break := jsonb_build_object('change_id', v_change.change_id, 'problem', 'missing',
                'detail', 'the change does not continue the previous one: a change before it was removed or altered');
            EXIT;
        END IF;
        IF memgov.settings_change_hash(v_change.prev_hash, v_change.change_id, v_change.changed_at, v_change.login,
                                       v_change.actor, v_change.name, v_change.old_value, v_change.new_value)
           <> v_change.change_hash THEN
            v_set_break := jsonb_build_object('change_id', v_change.change_id, 'problem', 'altered',
                'detail', 'the change differs from what was recorded');
            EXIT;
        END IF;
        v_set_count := v_set_count + 1;
        v_set_hash := v_change.change_hash;
        v_set_last := v_change.change_id;
    END LOOP;

    -- the archives: each continues the previous one; the chain goes on from the last
    FOR v_archive IN SELECT * FROM memgov.decision_log_archives a ORDER BY a.archive_id LOOP
        IF v_archive.archive_id <> v_archives + 1 OR v_archive.first_seal_id <> v_next_seal THEN
            v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                'detail', format('archive record %s does not continue the chain at seal %s',
                                 v_archive.archive_id, v_next_seal));
            EXIT;
        END IF;
        IF p_anchor_seal_id BETWEEN v_archive.first_seal_id AND v_archive.last_seal_id THEN
            IF p_anchor_seal_id = v_archive.last_seal_id THEN
                IF v_archive.last_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL,
                        'problem', 'altered', 'detail', format(
                            'archived seal %s has a different hash than its anchor: the chain was rewritten',
                            p_anchor_seal_id));
                    EXIT;
                END IF;
                v_anchor := 'matched';
            ELSE
                v_anchor := 'archived';  -- its hash went with its rows
            END IF;
        END IF;
        v_archives := v_archives + 1;
        -- what it removed, up to when, by whom; a cut younger than the floor was (an archive
        -- made before archival had one is measured against the default floor) is flagged
        v_floor := coalesce(v_archive.min_age, make_interval(secs =>
                       (memgov.setting_defaults() -> 'limits' ->> 'archive_min_age')::bigint));
        v_arch_runs := v_arch_runs || jsonb_build_array(jsonb_build_object(
            'archive_id', v_archive.archive_id, 'archived_at', v_archive.archived_at,
            'archived_by', v_archive.archived_by, 'login', v_archive.archived_login,
            'decided_before', v_archive.decided_before, 'rows', v_archive.row_count,
            'first_seal_id', v_archive.first_seal_id, 'last_seal_id', v_archive.last_seal_id,
            'min_age_seconds', extract(epoch FROM v_archive.min_age)::bigint,
            'below_floor', v_floor > interval '0' AND v_archive.decided_before > v_archive.archived_at - v_floor));
        v_arch_seals := v_arch_seals + (v_archive.last_seal_id - v_archive.first_seal_id + 1);
        v_arch_rows := v_arch_rows + v_archive.row_count;
        v_next_seal := v_archive.last_seal_id + 1;
        v_hash := v_archive.last_hash;
        v_after_x := v_archive.last_xact_id;
        v_after_d := v_archive.last_decision_id;
    END LOOP;

    -- nothing left of what was archived
    IF v_break IS NULL AND v_archives > 0 THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id <= v_after_x AND (d.xact_id, d.decision_id) <= (v_after_x, v_after_d)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row lies in the archived part of the log');
        END IF;
    END IF;

    -- the seals, in sequence
    IF v_break IS NULL THEN
        FOR v_seal IN SELECT * FROM memgov.decision_log_seals s ORDER BY s.seal_id LOOP
            IF v_seal.seal_id <> v_next_seal THEN
                v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                    'detail', format('seal %s is gone', v_next_seal));
                EXIT;
            END IF;
            IF v_seal.prev_hash <> v_hash
               OR (v_seal.after_xact_id, v_seal.after_decision_id) <> (v_after_x, v_after_d) THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal does not continue the previous one');
                EXIT;
            END IF;
            IF coalesce(array_length(v_seal.decision_ids, 1), 0) <> v_seal.row_count
               OR length(v_seal.row_digests) <> 32 * v_seal.row_count
               OR v_seal.decision_ids[v_seal.row_count] <> v_seal.last_decision_id
               OR (CASE WHEN v_seal.settings_change_id IS NULL  -- made before seals covered the settings
                       THEN memgov.seal_hash(v_seal.prev_hash, v_seal.seal_id, v_seal.after_xact_id,
                                             v_seal.after_decision_id, v_seal.last_xact_id, v_seal.last_decision_id,
                                             v_seal.decision_ids, v_seal.row_digests)
                       ELSE memgov.seal_hash(v_seal.prev_hash, v_seal.seal_id, v_seal.after_xact_id,
                                             v_seal.after_decision_id, v_seal.last_xact_id, v_seal.last_decision_id,
                                             v_seal.settings_change_id, v_seal.settings_hash,
                                             v_seal.decision_ids, v_seal.row_digests)
                   END) IS DISTINCT FROM v_seal.seal_hash THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal record was altered');
                EXIT;
            END IF;
            IF v_seal.seal_id = p_anchor_seal_id THEN
                IF v_seal.seal_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                        'detail', 'the seal''s hash differs from its anchor: the chain was rewritten');
                    EXIT;
                END IF;
                v_anchor := 'matched';
            END IF;
            -- the settings record up to the head the seal covers: intact, and that head still there
            IF v_seal.settings_change_id > 0 THEN
                IF (v_set_break ->> 'change_id')::bigint <= v_seal.settings_change_id THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                        'change_id', (v_set_break ->> 'change_id')::bigint, 'problem', v_set_break ->> 'problem',
                        'detail', CASE v_set_break ->> 'problem'
                            WHEN 'altered' THEN format('settings change %s, which the seal covers, was altered',
                                                       v_set_break ->> 'change_id')
                            ELSE format('settings change %s does not continue the previous one: a change the seal '
                                        'covers was removed or altered', v_set_break ->> 'change_id') END);
                    EXIT;
                END IF;
                SELECT c.change_hash INTO v_set_head
                  FROM memgov.settings_changes c WHERE c.change_id = v_seal.settings_change_id;
                IF NOT FOUND THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                        'change_id', v_seal.settings_change_id, 'problem', 'missing',
                        'detail', format('settings change %s, the last one the seal covers, is gone: the record of '
                                         'settings changes was cut back or the change removed',
                                         v_seal.settings_change_id));
                    EXIT;
                END IF;
                IF v_set_head IS DISTINCT FROM v_seal.settings_hash THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                        'change_id', v_seal.settings_change_id, 'problem', 'altered',
                        'detail', format('settings change %s is not the one the seal covers: the record of '
                                         'settings changes was rewritten', v_seal.settings_change_id));
                    EXIT;
                END IF;
            END IF;
            -- its rows as they are now, in the seal's order
            SELECT array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
                   string_agg(b.digest, ''::bytea ORDER BY b.xact_id, b.decision_id)
              INTO v_ids, v_digests
              FROM (SELECT d.xact_id, d.decision_id, memgov.decision_digest(d) AS digest
                      FROM memgov.decision_log d
                     WHERE d.xact_id >= v_seal.after_xact_id AND d.xact_id <= v_seal.last_xact_id
                       AND (d.xact_id, d.decision_id) > (v_seal.after_xact_id, v_seal.after_decision_id)
                       AND (d.xact_id, d.decision_id) <= (v_seal.last_xact_id, v_seal.last_decision_id)) AS b;
            IF v_ids IS DISTINCT FROM v_seal.decision_ids OR v_digests IS DISTINCT FROM v_seal.row_digests THEN
                -- the first position where they part
                FOR v_i IN 1 .. greatest(v_seal.row_count, coalesce(array_length(v_ids, 1), 0)) LOOP
                    v_stored := v_seal.decision_ids[v_i];
                    v_actual := v_ids[v_i];
                    IF v_stored IS NOT DISTINCT FROM v_actual THEN
                        CONTINUE WHEN substring(v_seal.row_digests FROM (v_i - 1) * 32 + 1 FOR 32)
                                      = substring(v_digests FROM (v_i - 1) * 32 + 1 FOR 32);
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    ELSIF v_stored IS NOT NULL AND NOT (v_stored = ANY (coalesce(v_ids, '{}'))) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'missing', 'detail', 'a sealed row is gone');
                    ELSIF v_actual IS NOT NULL AND NOT (v_actual = ANY (v_seal.decision_ids)) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_actual,
                            'problem', 'extra', 'detail', 'a row the seal does not account for');
                    ELSE
                        -- both ids are there, in another order: the row's xact_id was changed
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    END IF;
                    EXIT;
                END LOOP;
                v_break := coalesce(v_break, jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                    'problem', 'altered', 'detail', 'the rows differ from what was sealed'));
                EXIT;
            END IF;
            v_seals := v_seals + 1;
            v_rows := v_rows + v_seal.row_count;
            v_next_seal := v_seal.seal_id + 1;
            v_hash := v_seal.seal_hash;
            v_after_x := v_seal.last_xact_id;
            v_after_d := v_seal.last_decision_id;
            v_horizon := v_seal.horizon_xact_id;
        END LOOP;
    END IF;

    -- an anchor beyond the chain: the chain was cut back
    IF v_break IS NULL AND v_anchor = 'not reached' THEN
        v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL, 'problem', 'missing',
            'detail', format('the anchored seal %s is gone: the chain was cut back', p_anchor_seal_id));
    END IF;

    -- after the chain: rows not sealed yet, unless the last seal would have covered them (their
    -- transaction had ended before its horizon) or their transaction has not even begun
    IF v_break IS NULL THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id >= v_after_x AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
           AND (d.xact_id < v_horizon OR d.xact_id >= v_next_xid)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row after the last seal that its transaction id places before it');
        END IF;
    END IF;

    -- the chain's end as recorded (what to anchor), and what lies after it
    SELECT e.seal_id, e.hash, e.xact_id, e.decision_id
      INTO v_last_id, v_last_hash, v_end_x, v_end_d
      FROM memgov.chain_end() AS e;
    SELECT count(*) INTO v_unsealed
      FROM memgov.decision_log d
     WHERE d.xact_id >= coalesce(v_end_x, 0)
       AND (d.xact_id, d.decision_id) > (coalesce(v_end_x, 0), coalesce(v_end_d, 0));

    RETURN jsonb_build_object(
        'ok', v_break IS NULL AND v_set_break IS NULL,
        'settings_changes', jsonb_build_object('changes', v_set_count, 'last_change_id', v_set_last,
                                               'last_hash', CASE WHEN v_set_last IS NOT NULL
                                                                 THEN encode(v_set_hash, 'hex') END,
                                               'first_break', v_set_break),
        'seals', v_seals,
        'rows', v_rows,
        'first_break', v_break,
        'last_seal_id', v_last_id,
        'last_hash', encode(v_last_hash, 'hex'),
        'unsealed_rows', v_unsealed,
        'archived', jsonb_build_object('archives', v_archives, 'seals', v_arch_seals, 'rows', v_arch_rows,
                                       'runs', v_arch_runs),
        'anchor', v_anchor);
END
$$;

-- Removes from the log the sealed rows decided before p_before: whole seals, the oldest first,
-- while every row of a seal was decided before it. Refuses (22023) a cut younger than
-- memgov.settings' archive_min_age (default 365 days), and (MG409) when the log does not
-- verify: archival never erases recent decisions, nor the evidence of a break. Records what
-- it removed, and the floor it ran under, in memgov.decision_log_archives; verification goes
-- on from there. Export the rows first.
CREATE FUNCTION memgov.archive_decision_log(p_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_report    jsonb;
    v_first     bigint;
    v_last      memgov.decision_log_seals;
    v_rows      bigint;
    v_archive   bigint;
    v_deleted   bigint;
    v_min_age   interval := make_interval(secs => memgov.engine_limit('archive_min_age'));
BEGIN
    IF p_before IS NULL THEN
        RAISE EXCEPTION 'memgov: archive_decision_log needs a time: rows decided before it are archived'
            USING ERRCODE = '22023';
    END IF;
    IF v_min_age > interval '0' AND p_before > now() - v_min_age THEN  -- 0: no floor
        RAISE EXCEPTION 'memgov: archive_decision_log refuses a cut at %, younger than archive_min_age (%): nothing archived',
                        p_before, justify_hours(v_min_age)
            USING ERRCODE = '22023',
                  HINT = format('archive only what was decided before %s; a superuser may lower '
                                'memgov.settings archive_min_age', now() - v_min_age);
    END IF;
    -- no seal is made while we archive
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    v_report := memgov.verify_decision_log();
    IF NOT (v_report ->> 'ok')::boolean THEN
        RAISE EXCEPTION 'memgov: the decision log does not verify (%); nothing archived', v_report -> 'first_break'
            USING ERRCODE = 'MG409',
                  HINT = 'run memgov verify-log and find out what changed; archiving would erase the evidence';
    END IF;
    SELECT min(s.seal_id) INTO v_first FROM memgov.decision_log_seals s;
    -- the seals before the first one that holds a row decided at or after p_before
    SELECT * INTO v_last
      FROM memgov.decision_log_seals s
     WHERE s.seal_id < coalesce((SELECT min(o.seal_id) FROM memgov.decision_log_seals o
                                  WHERE o.last_decided_at >= p_before), s.seal_id + 1)
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('archived_rows', 0, 'archived_seals', 0, 'archive_id', NULL,
                                  'decided_before', p_before);
    END IF;
    SELECT sum(s.row_count) INTO v_rows FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    SELECT coalesce(max(a.archive_id), 0) + 1 INTO v_archive FROM memgov.decision_log_archives a;
    INSERT INTO memgov.decision_log_archives
           (archive_id, archived_by, decided_before, first_seal_id, last_seal_id, last_xact_id,
            last_decision_id, row_count, last_hash, min_age)
    VALUES (v_archive, memgov.invoker_role(), p_before, v_first, v_last.seal_id, v_last.last_xact_id,
            v_last.last_decision_id, v_rows, v_last.seal_hash, v_min_age);
    -- the guard triggers let this transaction delete what that record covers, and nothing else
    PERFORM set_config('memgov.archiving', v_archive::text, true);
    DELETE FROM memgov.decision_log d
     WHERE d.xact_id <= v_last.last_xact_id
       AND (d.xact_id, d.decision_id) <= (v_last.last_xact_id, v_last.last_decision_id);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    PERFORM set_config('memgov.archiving', '', true);
    IF v_deleted <> v_rows THEN  -- cannot happen: the log verified a moment ago
        RAISE EXCEPTION 'memgov: archiving found % rows where the seals hold %; nothing archived', v_deleted, v_rows
            USING ERRCODE = 'MG409';
    END IF;
    RETURN jsonb_build_object('archive_id', v_archive, 'archived_rows', v_rows,
                              'archived_seals', v_last.seal_id - v_first + 1,
                              'first_seal_id', v_first, 'last_seal_id', v_last.seal_id,
                              'last_hash', encode(v_last.seal_hash, 'hex'), 'decided_before', p_before);
END
$$;

-- The chain is global, the log of every tenant: memgov_admin reads, seals, verifies, archives.
REVOKE EXECUTE ON FUNCTION
    memgov.refuse_log_change(),
    memgov.guard_settings(),
    memgov.record_setting_change(),
    memgov.settings_change_hash(bytea, bigint, timestamptz, text, text, text, bigint, bigint),
    memgov.chain_end(),
    memgov.decision_digest(memgov.decision_log),
    memgov.seal_hash(bytea, bigint, bigint, bigint, bigint, bigint, bigint[], bytea),
    memgov.seal_hash(bytea, bigint, bigint, bigint, bigint, bigint, bigint, bytea, bigint[], bytea),
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    TO memgov_admin;
GRANT SELECT ON memgov.decision_log_seals, memgov.decision_log_archives, memgov.settings_changes TO memgov_admin;

RESET ROLE;
