-- memgov: expiry, and the time to live a writer gives a memory (docs/langgraph.md, TTL).
--
-- A memory expires at memgov.item_expiry: its retention policy's expiry (ttl_7d, ttl_30d),
-- or sooner the end of the TTL its writer gave it (ttl_minutes, a LangGraph store's ttl).
-- The write trigger (sql/041_write_trigger.sql) sets expires_at at every write: a writer names a
-- duration, never a time, and a TTL never outlives the retention policy's promise. Every
-- write of the memory starts its TTL again, and so does memgov.refresh_ttl (a read that
-- refreshes it); memgov.sweep_expired lets a writer delete its own tenant's expired
-- memories, as the sweep (sql/070_retention.sql) would, without waiting for it.
--
-- An expired memory is gone for its readers from that moment, swept or not: memgov.search
-- and memgov.get skip it, and row level security hides it from a writer's or reviewer's
-- SELECT (sql/060_recall.sql).
--
-- SQLSTATEs: 42501 no tenant (or one the login may not act in), 22023 a malformed argument.

SET ROLE memgov_owner;

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

-- Expiry of a row: its retention policy's, or p_ttl_end when the row has a TTL and that is
-- sooner (least() passes over a NULL: a permanent memory with a TTL expires at its end).
-- The write trigger passes the TTL's end: now + ttl_minutes for a client's write.
CREATE FUNCTION memgov.item_expiry(p_item memgov.long_term_memory_items, p_ttl_end timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT least(memgov.expiry_of(p_item.retention_policy, p_item.created_at),
                 CASE WHEN p_item.ttl_minutes IS NOT NULL THEN p_ttl_end END)
$$;

-- Starts the TTL of the session tenant's memories among memory_ids again: each that is
-- active, has a TTL, has not expired (an expired memory is gone, even unswept) and that the
-- caller may read (its get rules) expires ttl_minutes from now, or at its retention
-- policy's expiry if that is sooner (the write trigger caps it). Returns how many it
-- refreshed (a memory being written meanwhile is not). Not a decision of its own: it
-- changes no content and extends a life only as far as the TTL its writer set, within the
-- retention promise; the read that asks for it (memgov.get) is decided and logged. The
-- memory's updated_at stays.
CREATE FUNCTION memgov.refresh_ttl(memory_ids uuid[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id     text := memgov.recall_tenant();
    v_governed   boolean := memgov.reads_governed(v_org_id);
    v_refreshed  integer;
BEGIN
    IF cardinality(refresh_ttl.memory_ids) > 10000 THEN
        RAISE EXCEPTION 'memgov: refresh_ttl takes at most 10000 memories at a time, got %',
                        cardinality(refresh_ttl.memory_ids)
            USING ERRCODE = '22023';
    END IF;
    PERFORM memgov.engine_writes();  -- the trigger keeps the end set here (capped), nothing else
    -- a memory another transaction is writing is passed over (SKIP LOCKED), never waited
    -- for: that write starts its TTL again itself, or deletes it
    UPDATE memgov.long_term_memory_items AS m
       SET expires_at = now() + m.ttl_minutes * interval '1 minute'
     WHERE m.org_id = v_org_id
       AND m.memory_id IN (
           SELECT r.memory_id FROM memgov.long_term_memory_items r
            WHERE r.memory_id = ANY (refresh_ttl.memory_ids) AND r.org_id = v_org_id
              AND r.status = 'active' AND r.ttl_minutes IS NOT NULL
              AND r.expires_at > now()
              -- (an end the row has already, written in this transaction: no change to make)
              AND r.expires_at <> now() + r.ttl_minutes * interval '1 minute'
              AND (NOT v_governed OR memgov.get_allowed(r))
              FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_refreshed = ROW_COUNT;
    PERFORM memgov.engine_writes_done();
    RETURN v_refreshed;
END
$$;

-- Deletes up to batch_size of the session tenant's expired memories, as the sweep's TTL
-- pass does (memgov.ttl_due, and never one a forget rule holds: memgov.retention_held),
-- soonest expired first, and logs them in memgov.deletion_log (reason 'ttl', one row of
-- their ids, no run). Only active memories the caller may read (its get rules): the others
-- wait for the sweep. A row someone holds locked is skipped (SKIP LOCKED), never waited
-- for. Returns how many it deleted. A writer's way to sweep its own store without the
-- maintenance run: it reaches no other tenant and nothing that has not expired.
CREATE FUNCTION memgov.sweep_expired(batch_size integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id    text := memgov.recall_tenant();
    v_governed  boolean := memgov.reads_governed(v_org_id);
    v_batch     tid[];
    v_ids       uuid[];
    v_deleted   integer;
BEGIN
    IF sweep_expired.batch_size IS NULL OR sweep_expired.batch_size NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'memgov: sweep_expired takes a batch_size of 1 to 10000, got %',
                        coalesce(sweep_expired.batch_size::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- (the ids sorted: the GIN index of the log sorts them anyway, and a sorted array costs one pass)
    SELECT array_agg(b.ctid), array_agg(b.memory_id ORDER BY b.memory_id)
      INTO v_batch, v_ids
      FROM (SELECT d.ctid, d.memory_id FROM memgov.long_term_memory_items d
             WHERE d.org_id = v_org_id AND d.status = 'active'
               AND memgov.ttl_due(d) AND NOT memgov.retention_held(d)
               AND (NOT v_governed OR memgov.get_allowed(d))
             ORDER BY d.expires_at
             LIMIT sweep_expired.batch_size
               FOR UPDATE SKIP LOCKED) AS b;
    IF v_batch IS NULL THEN
        RETURN 0;
    END IF;
    -- the locked rows by ctid (a TID scan), as memgov.sweep_batch deletes them
    DELETE FROM memgov.long_term_memory_items m
     WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    IF v_deleted <> cardinality(v_batch) THEN
        RAISE EXCEPTION 'memgov: sweep_expired deleted % of the % rows it had locked', v_deleted, cardinality(v_batch)
            USING ERRCODE = 'XX000';
    END IF;
    INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
    VALUES (v_org_id, 'ttl', NULL, memgov.policy_settings(v_org_id) ->> 'version', NULL, v_deleted, v_ids);
    PERFORM memgov.drop_samples(v_org_id, v_ids);
    RETURN v_deleted;
END
$$;

-- Writers refresh and sweep their own tenant's memories (admins in the tenant they act in).
-- expiry_of and item_expiry are the write trigger's, which runs them as memgov_owner.
GRANT EXECUTE ON FUNCTION memgov.refresh_ttl(uuid[]), memgov.sweep_expired(integer)
    TO memgov_writer, memgov_admin;

RESET ROLE;
