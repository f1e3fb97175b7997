-- memgov: the read class dispatchers (sql/060_recall.sql) and memgov.rebuild_dispatch.
--
-- memgov.read_class_source says what a tenant's active version contributes to the read
-- class dispatchers (read_class, read_epoch, read_classes), one generator each, and
-- memgov.recompute_read_classes recomputes the stored classes another version decided.
-- memgov.rebuild_dispatch runs every generator of sql/031_dispatch.sql and of this file,
-- each followed by its named step, then the shadow dispatchers; the schema's first
-- dispatchers come from its first run, at the end of this file.

SET ROLE memgov_owner;

-- The read class of a tenant's active version as the read dispatchers write it
-- (sql/060_recall.sql): where the version governs reads and its compiler wrote a read class
-- function (memgov.policy_<h>_read), governed, a row's class as SQL of p_item (its epoch in
-- the high 32 bits), its reader's class as PL/pgSQL statements and its epoch; else none.
CREATE FUNCTION memgov.read_class_source(p_org_id text, OUT governed boolean, OUT class_sql text,
                                         OUT reader_sql text, OUT epoch_sql text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_version  record;
    v_epoch    integer;
BEGIN
    SELECT v.settings, v.function_name || '_read' AS reader INTO v_version
      FROM memgov.policy_versions v WHERE v.org_id = p_org_id AND v.active;
    governed := false;
    IF FOUND AND coalesce((v_version.settings ->> 'reads')::boolean, false) THEN
        governed := to_regprocedure(format('memgov.%I(memgov.long_term_memory_items, text)', v_version.reader)) IS NOT NULL;
    END IF;
    IF governed THEN
        -- asked only here: a schema upgraded from before read classes has no read_epoch
        -- until its revision adds it, and no version that governs reads with a read class
        SELECT v.read_epoch INTO v_epoch FROM memgov.policy_versions v WHERE v.org_id = p_org_id AND v.active;
        class_sql := format('(%s::bigint << 32 | memgov.%I(p_item, NULL))', v_epoch, v_version.reader);
        reader_sql := format(E'        v_epoch := %s;\n        v_class := memgov.%I(NULL, memgov.invoker_role());\n',
                             v_epoch, v_version.reader);
        epoch_sql := v_epoch::text;
    ELSE
        class_sql := 'NULL::bigint';
        reader_sql := E'        RETURN NULL;\n';
        epoch_sql := 'NULL::bigint';
    END IF;
END
$$;

-- read_class: a row's, as the write trigger stores it (SQL, inlined into the trigger: a
-- constant NULL where no policy has read classes).
CREATE FUNCTION memgov.dispatch_read_class()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
DECLARE
    v_reads  text;
BEGIN
    SELECT coalesce(string_agg(format(E'        WHEN p_item.org_id = %L THEN %s\n', v.org_id,
                                      (memgov.read_class_source(v.org_id)).class_sql), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_reads
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.read_class(p_item memgov.long_term_memory_items)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT %s
$body$$f$,
        format(CASE WHEN v_reads = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_reads, (memgov.read_class_source('*')).class_sql));
END
$gen$;

-- read_epoch: the epoch a tenant's current rows carry.
CREATE FUNCTION memgov.dispatch_read_epoch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
DECLARE
    v_epochs  text;
BEGIN
    SELECT coalesce(string_agg(format(E'        WHEN p_org_id = %L THEN %s\n', v.org_id,
                                      (memgov.read_class_source(v.org_id)).epoch_sql), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_epochs
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.read_epoch(p_org_id text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_epochs = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_epochs, (memgov.read_class_source('*')).epoch_sql));
END
$gen$;

-- read_classes: the classes the session's role may read (p_allowed) or may not, in its
-- tenant, for row level security (once per statement; NULL where its policy has none:
-- every row is decided as before).
CREATE FUNCTION memgov.dispatch_read_classes()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
DECLARE
    v_readers  text;
    v_global   constant text := (memgov.read_class_source('*')).reader_sql;
BEGIN
    SELECT coalesce(string_agg(format(E'    WHEN v_org_id = %L THEN\n%s', v.org_id,
                                      (memgov.read_class_source(v.org_id)).reader_sql), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_readers
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.read_classes(p_allowed boolean)
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_org_id  text := memgov.session_tenant();
    v_epoch   bigint;
    v_class   integer;
BEGIN
%s    IF v_class IS NULL THEN
        RETURN NULL;
    END IF;
    -- a row's mask has a bit per reader class (4): the masks with this reader's bit, the most
    -- common first (every class, then none), or those without it
    RETURN ARRAY(SELECT v_epoch << 32 | m.mask
                   FROM generate_series(0, 15) AS m(mask)
                  WHERE (m.mask & (1 << v_class) <> 0) = p_allowed
                  ORDER BY CASE WHEN p_allowed THEN -m.mask ELSE m.mask END);
END
$body$$f$,
        CASE WHEN v_readers = '' THEN regexp_replace(v_global, '^    ', '', 'gn')
             ELSE format(E'    CASE\n%s    ELSE\n%s    END CASE;\n', v_readers, v_global) END);
END
$gen$;

-- Step: where a policy has read classes, the rows whose class another version decided are
-- recomputed (until then they are decided row by row: row level security trusts a class of
-- the tenant's current epoch only).
CREATE FUNCTION memgov.recompute_read_classes()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM memgov.policy_versions v
                WHERE v.active AND (memgov.read_class_source(v.org_id)).governed) THEN
        PERFORM memgov.engine_writes();
        UPDATE memgov.long_term_memory_items m
           SET read_class = memgov.read_class(m)
         WHERE memgov.read_epoch(m.org_id) IS NOT NULL
           AND (m.read_class >> 32) IS DISTINCT FROM memgov.read_epoch(m.org_id);
        PERFORM memgov.engine_writes_done();
    END IF;
END
$$;

-- Regenerates the dispatchers from the active policy versions, one generator each, with
-- the steps that keep the stored rows in step with them, then the shadow dispatchers (a
-- tenant's own policy takes it out of the global shadow's sight). The order matters: each
-- step runs right after the dispatcher it follows, before those after it are regenerated.
-- Runs at deploy and rollback only; the per-row path is static SQL.
CREATE FUNCTION memgov.rebuild_dispatch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $rebuild$
BEGIN
    PERFORM memgov.dispatch_decide();
    PERFORM memgov.dispatch_explain_decision();
    PERFORM memgov.dispatch_retention_rule();
    PERFORM memgov.dispatch_policy_settings();
    PERFORM memgov.dispatch_retention_held();
    PERFORM memgov.dispatch_reads_governed();
    IF memgov.dispatch_search_config() THEN
        PERFORM memgov.reindex_search_config();
    END IF;
    PERFORM memgov.dispatch_sample_rate();
    PERFORM memgov.drop_unsampled_replays();
    PERFORM memgov.dispatch_read_class();
    PERFORM memgov.dispatch_read_epoch();
    PERFORM memgov.dispatch_read_classes();
    PERFORM memgov.recompute_read_classes();
    PERFORM memgov.rebuild_shadow_dispatch();
END
$rebuild$;

-- Until the first deploy every tenant is routed to memgov.no_policy_decision().
SELECT memgov.rebuild_dispatch();

RESET ROLE;
