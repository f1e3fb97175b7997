-- memgov: sealing the decision log into its hash chain (the scheme: sql/080_audit.sql).
--
-- memgov.decision_digest digests one row, memgov.seal_hash one seal (v1 and v2),
-- memgov.chain_end finds the chain's last seal, and memgov.seal_decision_log, run at the
-- end of every memgov.run_maintenance(), seals the rows below its horizon.

SET ROLE memgov_owner;

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

RESET ROLE;
