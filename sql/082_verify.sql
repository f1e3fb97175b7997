-- memgov: checking and archiving the decision log's hash chain (the scheme:
-- sql/080_audit.sql). memgov.verify_decision_log recomputes every seal and names the first
-- break; memgov.archive_decision_log removes whole seals, oldest first, and records what it
-- removed. The grants of the audit functions are at the end: the chain is global, the log
-- of every tenant, so only memgov_admin seals, verifies and archives.

SET ROLE memgov_owner;

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
