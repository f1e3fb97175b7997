-- memgov: the sweep's entry points (docs/retention.md): CALL memgov.run_maintenance()
-- runs the batches of sql/070_retention.sql under its lease, memgov.apply_retention
-- applies retention to one memory at once; the grants of the retention functions; and
-- memgov.cron_settings, pg_cron's two settings that status, retention schedule and
-- doctor read (created by the superuser who migrates, after RESET ROLE).

SET ROLE memgov_owner;

-- The sweep: one idempotent entry point for pg_cron and the CLI. Each batch commits on its own.
-- No SECURITY DEFINER and no SET clause: either would forbid the COMMITs. It runs as its
-- caller, which is also what lets it prune the caller's own pg_cron history.
CREATE PROCEDURE memgov.run_maintenance(dry_run boolean DEFAULT false)
LANGUAGE plpgsql
AS $$
DECLARE
    v_lock     integer[];
    -- how much the sweep yields to the database's other sessions: while one of them is
    -- busy, it pauses after each batch for this many times the batch's duration (at most
    -- 1 s), which leaves writers the WAL bandwidth their commits wait for (0: never pauses)
    v_yield    float8 := coalesce(nullif(pg_catalog.current_setting('memgov.maintenance_yield', true), '')::float8, 10.0);
    v_run      bigint;
    v_batch    integer;
    v_kind     text;
    v_taken    integer;
    v_started  timestamptz;
    v_pruned   bigint := 0;
BEGIN
    -- a second run while one is going returns at once (the lease is per database)
    v_lock := memgov.claim_maintenance();
    IF v_lock IS NULL THEN
        RAISE NOTICE 'memgov: another maintenance run is in progress; this one does nothing'
            USING ERRCODE = 'MG409';
        RETURN;
    END IF;
    -- the lease's lock belongs to the session: every step that can fail releases it before re-raising,
    -- so that a failed run in a long-lived session does not block the runs that follow
    BEGIN
        v_batch := greatest(1, memgov.policy_setting('*', 'retention', 'batch_size')::integer);
        v_run := memgov.start_maintenance(dry_run);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM memgov.release_maintenance(v_lock);
        RAISE;
    END;
    COMMIT;
    IF dry_run THEN
        BEGIN
            PERFORM memgov.finish_maintenance(v_run, memgov.retention_preview());
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    ELSE
        FOREACH v_kind IN ARRAY ARRAY['ttl', 'confidence', 'auto_delete', 'approvals'] LOOP
            LOOP
                v_started := pg_catalog.clock_timestamp();
                -- a batch's commit does not wait for its WAL to reach the disk: a crash may undo
                -- the last batches, each whole (deletions with their log rows), and the next run
                -- does them again; the run's last commit (below) waits, for them all
                PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
                BEGIN
                    v_taken := memgov.sweep_batch(v_run, v_kind, v_batch);
                EXCEPTION WHEN OTHERS OR query_canceled THEN
                    PERFORM memgov.release_maintenance(v_lock);
                    RAISE;
                END;
                COMMIT;
                EXIT WHEN v_taken < v_batch;
                -- other sessions are at work here: leave them WAL and CPU (a backend whose
                -- state the caller may not see counts as busy)
                IF v_yield > 0 AND EXISTS (
                       SELECT FROM pg_catalog.pg_stat_activity a
                        WHERE a.datname = pg_catalog.current_database()
                          AND a.pid <> pg_catalog.pg_backend_pid()
                          AND a.backend_type = 'client backend'
                          AND a.state IS DISTINCT FROM 'idle') THEN
                    PERFORM pg_catalog.pg_sleep(LEAST(1.0, v_yield
                        * pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - v_started)));
                END IF;
            END LOOP;
        END LOOP;
        -- this database's own pg_cron history, when it lives here and the caller may see it
        -- (pg_cron's row security shows each user its own jobs' runs)
        BEGIN
            IF pg_catalog.to_regclass('cron.job_run_details') IS NOT NULL THEN
                -- dynamic: the cron schema exists in pg_cron's database only
                EXECUTE pg_catalog.format($sql$
                    DELETE FROM %I.job_run_details d
                     USING %I.job j
                     WHERE d.jobid = j.jobid
                       AND j.database = pg_catalog.current_database()
                       AND j.command LIKE '%%memgov.run_maintenance%%'
                       AND d.end_time < pg_catalog.now() - interval '7 days'
                $sql$, 'cron', 'cron');
                GET DIAGNOSTICS v_pruned = ROW_COUNT;
            END IF;
        EXCEPTION WHEN insufficient_privilege OR undefined_table OR invalid_schema_name THEN
            v_pruned := 0;  -- not ours to prune
        END;
        BEGIN
            -- seal the decision log's new rows into its hash chain (sql/080_audit.sql; summary key 'sealed')
            PERFORM memgov.seal_decision_log(p_run_id => v_run);
            PERFORM memgov.prune_replay_samples(v_run);
            PERFORM memgov.finish_maintenance(v_run, NULL, v_pruned);
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    END IF;
    COMMIT;
    PERFORM memgov.release_maintenance(v_lock);
END
$$;

-- Applies the sweep's rules to one memory now; returns whether it was deleted and why.
CREATE FUNCTION memgov.apply_retention(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item    memgov.long_term_memory_items := memgov.memory_for_feedback(apply_retention.memory_id);
    v_reason  text := memgov.due_reason(v_item);
    v_held    boolean := v_reason IS NOT NULL AND memgov.retention_held(v_item);
BEGIN
    IF v_held THEN
        -- due, but a forget rule holds it: like the sweep, apply_retention leaves it
        RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', false, 'reason', v_reason,
                                  'held', true);
    END IF;
    IF v_reason IS NOT NULL THEN
        PERFORM memgov.log_deletion(v_item, v_reason, NULL);
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.drop_samples(v_item.org_id, ARRAY[v_item.memory_id]);
    END IF;
    RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', v_reason IS NOT NULL,
                              'reason', v_reason,
                              'rule_id', CASE WHEN v_reason = 'auto_delete' THEN memgov.retention_rule(v_item) END);
END
$$;

GRANT EXECUTE ON FUNCTION
    memgov.maintenance_holder(),
    memgov.claim_maintenance(),
    memgov.release_maintenance(integer[]),
    memgov.sweep_batch(bigint, text, integer),
    memgov.retention_preview(),
    memgov.start_maintenance(boolean),
    memgov.finish_maintenance(bigint, jsonb, bigint),
    memgov.prune_replay_samples(bigint)
    TO memgov_admin;
-- `memgov retention run` counts what the TTL sweep has to delete (its progress bar)
GRANT EXECUTE ON FUNCTION memgov.ttl_due(memgov.long_term_memory_items) TO memgov_admin;
GRANT EXECUTE ON PROCEDURE memgov.run_maintenance(boolean) TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.apply_retention(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;
-- `memgov status --check` counts the approvals and quarantined writes past approval_ttl
GRANT EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests),
    memgov.retention_interval(text, text) TO memgov_admin;

RESET ROLE;

-- pg_cron's two settings that memgov status, retention schedule and doctor need
-- (memgov_pg/pgcron.py). pg_cron makes cron.database_name and cron.log_run superuser-only:
-- only superusers and members of pg_read_all_settings read them. memgov_admin gets these two
-- and nothing else: pg_read_all_settings would show it every setting (primary_conninfo with
-- its password among them), and memgov_owner, whose functions every client calls, does not
-- hold it either. This function runs as memgov_settings_reader, which holds
-- pg_read_all_settings, owns nothing else and is granted to no one; it takes no argument
-- and returns the same three values whoever calls it. Created by the superuser who
-- migrates: memgov_owner cannot hand a function to a role it is not a member of.

-- pg_cron's database and cron.log_run (NULL: pg_cron is not loaded), and whether this function may read them.
CREATE FUNCTION memgov.cron_settings(OUT cron_database text, OUT log_run text, OUT readable boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    -- a config file may still set cron.* after pg_cron left shared_preload_libraries: such a
    -- placeholder has context 'user'; pg_cron's own settings are 'postmaster' ones
    SELECT (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.database_name' AND s.context = 'postmaster'),
           (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.log_run' AND s.context = 'postmaster'),
           pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')
$$;
ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader;
REVOKE ALL ON FUNCTION memgov.cron_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO memgov_admin;
