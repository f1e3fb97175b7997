-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- memgov_settings_reader: owns memgov.cron_settings() alone, and reads pg_cron's
-- superuser-only settings for it (sql/000_roles.sql, sql/070_retention.sql).
-- memgov_standby_logger (issue 30): may call memgov.log_standby_read() alone
-- (sql/065_standby_reads.sql); created here, before the routines' grants name it.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'memgov_settings_reader') THEN
        CREATE ROLE memgov_settings_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'memgov_standby_logger') THEN
        CREATE ROLE memgov_standby_logger NOLOGIN;
    END IF;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;
GRANT pg_read_all_settings TO memgov_settings_reader;

-- The write path: one row trigger without a WHEN clause (memgov's own writes are marked:
-- memgov.engine_writes), statement triggers that list a bulk statement's shared decisions,
-- and a DELETE refused to every client (forgetting goes through memgov.forget and
-- memgov.forget_where). Dropped here, created again below with the functions they call.
DROP TRIGGER enforce_write ON memgov.long_term_memory_items;
DROP TRIGGER engine_columns ON memgov.long_term_memory_items;
DROP TRIGGER forget_samples ON memgov.long_term_memory_items;

-- The governed table's value rules become domains: PostgreSQL prepares a table's CHECK
-- constraints anew for every statement, a domain's once a session (sql/010_schema.sql). Row
-- security policies that name the columns are dropped while their types change.
SET ROLE memgov_owner;
CREATE DOMAIN memgov.tenant AS text CHECK (VALUE <> '');
CREATE DOMAIN memgov.category AS text CHECK (VALUE <> '');
CREATE DOMAIN memgov.fact_source AS text
    CHECK (VALUE IN ('user_confirmed', 'agent_extracted', 'system_rule'));
CREATE DOMAIN memgov.confidence AS numeric(4,3) CHECK (VALUE BETWEEN 0 AND 1);
CREATE DOMAIN memgov.retention_kind AS text
    CHECK (VALUE IN ('permanent_until_revoked', 'ttl_7d', 'ttl_30d', 'confidence_based'));
CREATE DOMAIN memgov.metadata_object AS jsonb CHECK (jsonb_typeof(VALUE) = 'object');
CREATE DOMAIN memgov.memory_status AS text CHECK (VALUE IN ('active', 'pending_approval'));
DROP POLICY tenant_isolation ON memgov.long_term_memory_items;
DROP POLICY admin_all ON memgov.long_term_memory_items;
DROP POLICY governed_reads ON memgov.long_term_memory_items;
DROP POLICY governed_updates ON memgov.long_term_memory_items;
-- (memgov.readable's SQL body ties it to the table's row type, which stops a column's type
-- from changing: for the change, a body that reads nothing stands in, and its own comes back)
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean LANGUAGE plpgsql STABLE AS $stub$ BEGIN RETURN false; END $stub$;
ALTER TABLE memgov.long_term_memory_items
    DROP CONSTRAINT long_term_memory_items_org_id_check,
    DROP CONSTRAINT long_term_memory_items_category_check,
    DROP CONSTRAINT long_term_memory_items_source_check,
    DROP CONSTRAINT long_term_memory_items_confidence_check,
    DROP CONSTRAINT long_term_memory_items_retention_policy_check,
    DROP CONSTRAINT long_term_memory_items_metadata_check,
    DROP CONSTRAINT long_term_memory_items_status_check,
    ALTER COLUMN org_id TYPE memgov.tenant,
    ALTER COLUMN category TYPE memgov.category,
    ALTER COLUMN source TYPE memgov.fact_source,
    ALTER COLUMN confidence TYPE memgov.confidence,
    ALTER COLUMN retention_policy TYPE memgov.retention_kind,
    ALTER COLUMN metadata TYPE memgov.metadata_object,
    ALTER COLUMN status TYPE memgov.memory_status;
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN p_status = 'pending_approval'
            THEN pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') OR memgov.written_here(p_item)
            WHEN memgov.reads_governed(p_org_id)
            THEN memgov.get_allowed(p_item) OR memgov.written_here(p_item)
            ELSE true
       END;
CREATE POLICY tenant_isolation ON memgov.long_term_memory_items
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()))
    WITH CHECK (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_all ON memgov.long_term_memory_items TO memgov_admin USING (true) WITH CHECK (true);

-- The decision log: a decision a statement shares lists its memories; decided_at is when
-- the deciding statement began; one BRIN index instead of two.
ALTER TABLE memgov.decision_log
    ADD COLUMN memory_ids uuid[],
    ADD COLUMN memory_count integer,
    ALTER COLUMN decided_at SET DEFAULT statement_timestamp();
COMMENT ON COLUMN memgov.decision_log.memory_ids IS
    'the memories of a decision one statement took about several alike (memory_id is then NULL): '
    'WHERE memory_id = $1 OR memory_ids @> ARRAY[$1] finds a memory''s decisions';
DROP INDEX memgov.decision_log_decided_at_idx;
DROP INDEX memgov.decision_log_xact_id_idx;
CREATE INDEX decision_log_xact_id_decided_at_idx ON memgov.decision_log USING brin (xact_id, decided_at);
CREATE INDEX decision_log_memory_ids_idx ON memgov.decision_log USING gin (memory_ids)
    WITH (fastupdate = on, gin_pending_list_limit = 16384)
    WHERE memory_ids IS NOT NULL;

-- a session's secret, and the seal of a statement's shared decisions
CREATE SEQUENCE memgov.session_key AS bigint MINVALUE -9223372036854775808;
COMMENT ON SEQUENCE memgov.session_key IS 'Per session (currval), a secret of memgov''s: read and set by memgov only';
CREATE SEQUENCE memgov.batch_seal AS bigint MINVALUE -9223372036854775808;
COMMENT ON SEQUENCE memgov.batch_seal IS
    'Per session (currval), the keyed hash of memgov.batch as memgov last set it: memgov''s only';
CREATE TYPE memgov.shared_decision AS (org_id text, decision_id bigint, memory_ids uuid[]);
RESET ROLE;

-- audit: settings changes are recorded (issue 27): the record's table, which the routines
-- below name (its triggers and grant come after them)
SET ROLE memgov_owner;
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
RESET ROLE;

-- audit: the seal covers the settings trail (issue 27). Each new seal records the head of
-- memgov.settings_changes (its last change id and hash) and hashes it in ('memgov-seal-v2');
-- the seals made before keep NULL there and their 'memgov-seal-v1' hash, and verify as they
-- did. (Before the routines, which name the columns.)
SET ROLE memgov_owner;
ALTER TABLE memgov.decision_log_seals
    ADD COLUMN settings_change_id bigint,
    ADD COLUMN settings_hash bytea,
    ADD CONSTRAINT decision_log_seals_settings_head_check
        CHECK ((settings_change_id IS NULL) = (settings_hash IS NULL));
RESET ROLE;

-- langgraph store (issue 29): an item's columns, which the routines below name. Its
-- namespace and key, one memory per (tenant, namespace, key) (index and grants after the
-- routines); and its time to live in whole minutes (ttl_minutes), from which the write trigger
-- sets expires_at (memgov.item_expiry: never past the retention policy's expiry).
-- (a column of a domain with a CHECK is checked against the rows there are, which
-- memgov.readable's SQL body refuses, as above: its stand-in again for the change)
SET ROLE memgov_owner;
CREATE DOMAIN memgov.ttl_minutes AS integer CHECK (VALUE > 0);
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean LANGUAGE plpgsql STABLE AS $stub$ BEGIN RETURN false; END $stub$;
ALTER TABLE memgov.long_term_memory_items
    ADD COLUMN namespace text,
    ADD COLUMN item_key text,
    ADD COLUMN ttl_minutes memgov.ttl_minutes;
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN p_status = 'pending_approval'
            THEN pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') OR memgov.written_here(p_item)
            WHEN memgov.reads_governed(p_org_id)
            THEN memgov.get_allowed(p_item) OR memgov.written_here(p_item)
            ELSE true
       END;
RESET ROLE;

-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.session_key()
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF pg_catalog.current_setting('memgov.session_keyed', true) = 'on' THEN
        RETURN pg_catalog.currval('memgov.session_key');
    END IF;
    PERFORM pg_catalog.set_config('memgov.session_keyed', 'on', false);
    RETURN pg_catalog.setval('memgov.session_key',
                             (pg_catalog.floor(pg_catalog.random() * 18446744073709551615::numeric)
                              - 9223372036854775808::numeric)::bigint);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.engine_token()
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT pg_catalog.hashtextextended('memgov engine write ' || pg_catalog.txid_current(),
                                       pg_catalog.currval('memgov.session_key'))::text
$function$;

CREATE OR REPLACE FUNCTION memgov.is_engine_write(p_mark text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN p_mark = memgov.engine_token();
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN false;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.engine_writes()
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM memgov.session_key();
    PERFORM pg_catalog.set_config('memgov.engine_write', memgov.engine_token(), true);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.engine_writes_done()
 RETURNS void
 LANGUAGE sql
BEGIN ATOMIC
 SELECT set_config('memgov.engine_write'::text, ''::text, true) AS set_config;
END;

CREATE OR REPLACE FUNCTION memgov.setting_defaults()
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN '{"limits": {"archive_min_age": 31536000, "max_other_bytes": 16384, "max_fact_text_bytes": 65536}, "replay": {"keep": "7 days", "sample_rate": 0}, "search": {"text_config": "pg_catalog.simple"}, "feedback": {"reject_delta": -0.3, "confirm_delta": 0.1, "edit_confidence": 0.8, "reject_delete_below": 0.0}, "retention": {"schedule": "*/10 * * * *", "batch_size": 5000, "approval_ttl": "7 days", "confidence_floor": 0.3, "confidence_grace": "30 days"}, "risk_thresholds": {"low_max": 0.30, "high_max": 0.80, "medium_max": 0.60}}'::jsonb;
GRANT EXECUTE ON FUNCTION memgov.setting_defaults() TO pg_monitor;

CREATE OR REPLACE FUNCTION memgov.recorded_function(p_compiled_sql text, p_function text, OUT definition text, OUT body text)
 RETURNS record
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $functionxx$
DECLARE
    v_head   constant text := format('CREATE OR REPLACE FUNCTION memgov.%I(', p_function);
    v_rest   text := p_compiled_sql;
    v_at     integer;
    v_tag    text;
    v_start  integer;
    v_end    integer;
BEGIN
    WHILE v_rest <> '' LOOP
        v_at := strpos(v_rest, E'\nAS $function');  -- the header (name, signature, options) holds no such line
        EXIT WHEN v_at = 0;
        v_tag := substring(substr(v_rest, v_at + 4, 200) FROM '^\$functionx*\$');
        EXIT WHEN v_tag IS NULL;
        v_start := v_at + 4 + length(v_tag);
        v_end := strpos(substr(v_rest, v_start), v_tag);
        EXIT WHEN v_end = 0;
        IF starts_with(v_rest, v_head) THEN
            definition := left(v_rest, v_start + v_end + length(v_tag) - 2) || E'\n';
            body := substr(v_rest, v_start, v_end - 1);
            RETURN;
        END IF;
        -- the next statement: after the closing quote and the ";" stage_policy wrote
        v_rest := ltrim(substr(v_rest, v_start + v_end - 1 + length(v_tag)), E'\n;');
    END LOOP;
END
$functionxx$;

CREATE OR REPLACE FUNCTION memgov.decide_definition()
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $functionx$
DECLARE
    v_marker   constant text := E'\n    -- memgov:tenant-routing\n';
    v_routing  text;
    v_global   record;
    v_body     text;
    v_at       integer;
    v_quote    text := '$function';
BEGIN
    SELECT coalesce(string_agg(format(
               E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
               v.org_id, v.function_name), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_routing
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT v.version, v.function_name, v.compiled_sql INTO v_global
      FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    IF NOT FOUND THEN
        v_body := E'\nBEGIN\n' || v_routing || E'    RETURN memgov.no_policy_decision();\nEND\n';
    ELSE
        v_body := (memgov.recorded_function(v_global.compiled_sql, v_global.function_name)).body;
        IF v_body IS NULL THEN
            RAISE EXCEPTION 'the recorded source of the active global policy % holds no decide function memgov.%',
                            v_global.version, v_global.function_name
                USING ERRCODE = 'MG500',
                      HINT = 'its compiled_sql in memgov.policy_versions was changed outside memgov: deploy a new version';
        END IF;
        -- the routing goes right after the marker line, which a compiled body holds once (no
        -- policy value spans lines: the compiler writes line breaks in literals as escapes);
        -- plain string surgery: no pattern or replacement syntax that a tenant id could reach
        IF length(v_body) - length(replace(v_body, v_marker, '')) <> length(v_marker) THEN
            RAISE EXCEPTION 'the body of the active global policy (memgov.%) must hold the tenant routing marker line once',
                            v_global.function_name
                USING ERRCODE = 'MG500',
                      HINT = 'it was not compiled by this memgov: bump version: in the policy file and deploy it';
        END IF;
        v_at := strpos(v_body, v_marker) + length(v_marker);
        v_body := left(v_body, v_at - 1) || v_routing || substr(v_body, v_at);
    END IF;
    -- decide carries a compiled body: it runs as memgov_policy, like the compiled functions
    -- (the quote as PostgreSQL chooses it: a prefix the body does not hold)
    WHILE strpos(v_body, v_quote) > 0 LOOP
        v_quote := v_quote || 'x';
    END LOOP;
    v_quote := v_quote || '$';
    RETURN 'CREATE OR REPLACE FUNCTION memgov.decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)'
        || E'\n RETURNS memgov.decision\n LANGUAGE plpgsql\n STABLE PARALLEL SAFE SECURITY DEFINER\nAS '
        || v_quote || v_body || v_quote || E'\n';
END
$functionx$;

CREATE OR REPLACE FUNCTION memgov.dispatch_decide()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    EXECUTE memgov.decide_definition();
    PERFORM memgov.hand_to_policy_role('memgov.decide(memgov.long_term_memory_items, text, text)');
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_explain_decision()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_explain  text;
    v_global   text;
BEGIN
    SELECT coalesce(string_agg(format(
               E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
               v.org_id, v.function_name || '_explain'), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_explain
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT v.function_name INTO v_global FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.explain_decision(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$,
        v_explain,
        CASE WHEN v_global IS NULL THEN '''[]''::jsonb'
             ELSE format('memgov.%I(p_item, p_operation, p_actor)', v_global || '_explain') END);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_retention_rule()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_retention  text;
    v_global     text;
BEGIN
    SELECT coalesce(string_agg(format(E'        WHEN p_item.org_id = %L THEN memgov.%I(p_item)\n',
                                      v.org_id, v.function_name || '_retention'), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_retention
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT v.function_name INTO v_global FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_rule(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT %s
$body$$f$,
        format(CASE WHEN v_retention = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_retention,
               CASE WHEN v_global IS NULL THEN 'NULL::text'
                    ELSE format('memgov.%I(p_item)', v_global || '_retention') END));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_policy_settings()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_settings  text;
    v_global    jsonb;
BEGIN
    SELECT coalesce(string_agg(format(E'    IF p_org_id = %L THEN\n        RETURN %L::jsonb;\n    END IF;\n',
                                      v.org_id, v.settings), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_settings
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT v.settings INTO v_global FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.policy_settings(p_org_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %L::jsonb;
END
$body$$f$,
        v_settings, coalesce(v_global, '{}'::jsonb));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_retention_held()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_global_holds  boolean;
    v_held_apart    text[];  -- tenants whose own policy holds where the global does not, or the reverse
BEGIN
    SELECT memgov.policy_may_hold(v.org_id, v.version) INTO v_global_holds
      FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    IF NOT FOUND THEN
        v_global_holds := false;
    END IF;
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_held_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*' AND memgov.policy_may_hold(v.org_id, v.version) <> v_global_holds;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_held(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
AS $body$
    -- Whether a forget rule holds a memory against automatic deletion (generated by memgov.rebuild_dispatch)
    SELECT CASE WHEN p_item.org_id = ANY (%L::text[]) THEN %s ELSE %s END
$body$$f$,
        v_held_apart,
        CASE WHEN v_global_holds THEN 'false' ELSE 'memgov.forget_denied_by_rule(p_item)' END,
        CASE WHEN v_global_holds THEN 'memgov.forget_denied_by_rule(p_item)' ELSE 'false' END);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_reads_governed()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_global_reads  boolean;
    v_reads_apart   text[];  -- tenants whose own policy governs reads where the global does not, or the reverse
    v_body          text;
BEGIN
    v_global_reads := coalesce((SELECT coalesce((v.settings ->> 'reads')::boolean, false)
                                  FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*'), false);
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_reads_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*'
       AND coalesce((v.settings ->> 'reads')::boolean, false) <> v_global_reads;
    v_body := CASE WHEN cardinality(v_reads_apart) = 0 THEN v_global_reads::text
                   ELSE format('CASE WHEN %%s = ANY (%L::text[]) THEN %s ELSE %s END',
                               v_reads_apart, (NOT v_global_reads)::text, v_global_reads::text) END;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.reads_governed(p_org_id text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$, format(v_body, 'p_org_id'));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_search_config()
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_default  constant text := memgov.setting_defaults() #>> '{search,text_config}';
    v_configs  text;
    v_global   text;
    v_before   text := pg_get_functiondef(to_regprocedure('memgov.search_config(text)'));  -- NULL before the first
BEGIN
    SELECT coalesce(string_agg(format(E'        WHEN p_org_id = %L THEN %L::regconfig\n', v.org_id,
                                      coalesce(v.settings -> 'search' ->> 'text_config', v_default)),
                               '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_configs
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT v.settings -> 'search' ->> 'text_config' INTO v_global
      FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.search_config(p_org_id text)
RETURNS regconfig
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_configs = '' THEN '%2$L::regconfig' ELSE E'CASE\n%1$s        ELSE %2$L::regconfig\n    END' END,
               v_configs, coalesce(v_global, v_default)));
    RETURN v_before IS DISTINCT FROM pg_get_functiondef('memgov.search_config(text)'::regprocedure);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.reindex_search_config()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items m
       SET search_config = memgov.search_config(m.org_id)
     WHERE m.search_config <> memgov.search_config(m.org_id);
    PERFORM memgov.engine_writes_done();
END
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_sample_rate()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_default  constant numeric := (memgov.setting_defaults() -> 'replay' ->> 'sample_rate')::numeric;
    v_rates    text;
    v_global   numeric;
BEGIN
    SELECT coalesce(string_agg(format(E'        WHEN p_org_id = %L THEN %s\n', v.org_id,
                                      coalesce((v.settings -> 'replay' ->> 'sample_rate')::numeric, v_default)),
                               '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_rates
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*';
    SELECT (v.settings -> 'replay' ->> 'sample_rate')::numeric INTO v_global
      FROM memgov.policy_versions v WHERE v.active AND v.org_id = '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.sample_rate(p_org_id text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_rates = '' THEN '%2$s::numeric' ELSE E'CASE\n%1$s        ELSE %2$s::numeric\n    END' END,
               v_rates, coalesce(v_global, v_default)));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.drop_unsampled_replays()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    DELETE FROM memgov.replay_samples s WHERE memgov.sample_rate(s.org_id) = 0;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.read_class_source(p_org_id text, OUT governed boolean, OUT class_sql text, OUT reader_sql text, OUT epoch_sql text)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_read_class()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_read_epoch()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.dispatch_read_classes()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.recompute_read_classes()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.rebuild_dispatch()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.read_class(p_item memgov.long_term_memory_items)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT NULL::bigint
$function$;

CREATE OR REPLACE FUNCTION memgov.read_epoch(p_org_id text)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN NULL::bigint;

CREATE OR REPLACE FUNCTION memgov.read_classes(p_allowed boolean)
 RETURNS bigint[]
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_org_id  text := memgov.session_tenant();
    v_epoch   bigint;
    v_class   integer;
BEGIN
    RETURN NULL;
    IF v_class IS NULL THEN
        RETURN NULL;
    END IF;
    -- a row's mask has a bit per reader class (4): the masks with this reader's bit, the most
    -- common first (every class, then none), or those without it
    RETURN ARRAY(SELECT v_epoch << 32 | m.mask
                   FROM generate_series(0, 15) AS m(mask)
                  WHERE (m.mask & (1 << v_class) <> 0) = p_allowed
                  ORDER BY CASE WHEN p_allowed THEN -m.mask ELSE m.mask END);
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.read_classes(boolean) TO memgov_writer, memgov_reviewer;

GRANT EXECUTE ON FUNCTION memgov.retention_interval(text,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.activate_policy(p_org_id text, p_version text, p_revision boolean DEFAULT false)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_previous  text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF NOT EXISTS (SELECT FROM memgov.policy_versions
                    WHERE org_id = p_org_id AND version = p_version) THEN
        RAISE EXCEPTION 'policy version % is not deployed for %', p_version,
                        CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
            USING ERRCODE = 'MG404',
                  HINT = 'list the deployed versions: SELECT org_id, version FROM memgov.policy_versions';
    END IF;
    SELECT version INTO v_previous FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    UPDATE memgov.policy_versions SET active = false
     WHERE org_id = p_org_id AND active AND version <> p_version;
    UPDATE memgov.policy_versions SET active = true
     WHERE org_id = p_org_id AND version = p_version AND NOT active;
    -- the history memgov.undeploy_policy reads: a change of the active version, and every
    -- deploy of a policy revision (one of the version active already undoes to that version)
    IF v_previous IS DISTINCT FROM p_version OR p_revision THEN
        INSERT INTO memgov.policy_activations (org_id, version, previous_version)
        VALUES (p_org_id, p_version, v_previous);
    END IF;
    PERFORM memgov.rebuild_dispatch();
    RETURN p_version;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.activate_policy(text,text,boolean) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.stage_policy(p_org_id text, p_version text, p_sha256 text, p_mode text, p_function_name text, p_source_yaml text, p_decide_body text, p_explain_body text, p_retention_body text, p_settings jsonb, p_rules jsonb, p_read_body text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_existing   memgov.policy_versions;
    v_function   record;
    v_compiled   text := '';
    v_taken      text;
BEGIN
    -- one deploy at a time; concurrent writers keep using the old dispatchers until commit
    PERFORM memgov.lock_deploys();

    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_function_name IS NULL OR p_function_name !~ '^policy_[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'invalid compiled function name %', p_function_name USING ERRCODE = '22023';
    END IF;

    SELECT * INTO v_existing FROM memgov.policy_versions
     WHERE org_id = p_org_id AND version = p_version;
    IF FOUND THEN
        IF v_existing.sha256 <> p_sha256 THEN
            RAISE EXCEPTION 'policy version % is already deployed with different content', p_version
                USING ERRCODE = 'MG409',
                      HINT = 'bump `version:` in the policy file; deployed versions never change';
        END IF;
        RETURN p_version;
    END IF;
    -- a new version's functions are new: a name that exists already (in pg_proc, or recorded
    -- for another version) would replace code that decides for another version, unrecorded
    SELECT format('memgov.%s exists already%s', p.proname,
                  coalesce(format(' (policy version %s of %s)', v.version,
                                  CASE WHEN v.org_id = '*' THEN 'the global policy' ELSE 'tenant ' || v.org_id END),
                           ''))
      INTO v_taken
      FROM pg_catalog.pg_proc p
      LEFT JOIN memgov.policy_versions v ON v.function_name = p_function_name
     WHERE p.pronamespace = 'memgov'::regnamespace
       AND p.proname IN (p_function_name, p_function_name || '_explain', p_function_name || '_retention',
                         p_function_name || '_read')
     LIMIT 1;
    IF NOT FOUND THEN
        SELECT format('policy version %s of %s is recorded with it', v.version,
                      CASE WHEN v.org_id = '*' THEN 'the global policy' ELSE 'tenant ' || v.org_id END)
          INTO v_taken
          FROM memgov.policy_versions v WHERE v.function_name = p_function_name
         LIMIT 1;
    END IF;
    IF v_taken IS NOT NULL THEN
        RAISE EXCEPTION 'the compiled function name % is taken: %', p_function_name, v_taken
            USING ERRCODE = 'MG409',
                  HINT = 'memgov names compiled functions after the tenant and the policy''s content: deploy with '
                         '`memgov deploy` (or the statement `memgov compile` prints), which never reuses a name';
    END IF;

    FOR v_function IN
        SELECT f.name, f.args, f.types, f.returns, f.body
          FROM (VALUES
                (p_function_name, 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'memgov.decision', p_decide_body),
                (p_function_name || '_explain', 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'jsonb', p_explain_body),
                (p_function_name || '_retention', 'p_item memgov.long_term_memory_items',
                 'memgov.long_term_memory_items', 'text', p_retention_body),
                (p_function_name || '_read', 'p_item memgov.long_term_memory_items, p_actor text',
                 'memgov.long_term_memory_items, text', 'integer', p_read_body)) AS f(name, args, types, returns, body)
    LOOP
        -- a policy whose reads cannot be decided ahead has no read class function (its reads
        -- are decided row by row), and neither has a version compiled before read classes
        CONTINUE WHEN v_function.body IS NULL AND v_function.name = p_function_name || '_read';
        IF v_function.body IS NULL THEN
            RAISE EXCEPTION 'the compiled policy has no body for %', v_function.name USING ERRCODE = '22023';
        END IF;
        BEGIN
            EXECUTE format('CREATE OR REPLACE FUNCTION memgov.%I(%s) RETURNS %s '
                           'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                           v_function.name, v_function.args, v_function.returns, v_function.body);
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'PostgreSQL rejected the compiled policy %: %', p_version, SQLERRM
                USING ERRCODE = 'MG500',
                      HINT = 'this is a memgov compiler bug: run `memgov compile` and report the output';
        END;
        PERFORM memgov.hand_to_policy_role(format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure);
        EXECUTE format('COMMENT ON FUNCTION memgov.%I(%s) IS %L', v_function.name, v_function.types,
                       format('memgov policy %s (%s), sha256 %s', p_version, p_org_id, p_sha256));
        v_compiled := v_compiled || pg_get_functiondef(
            format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure) || E';\n\n';
    END LOOP;

    INSERT INTO memgov.policy_versions
           (org_id, version, sha256, mode, function_name, source_yaml, compiled_sql, settings, deployed_by)
    VALUES (p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml, v_compiled,
            p_settings, session_user);

    INSERT INTO memgov.memory_policy_rules
           (org_id, policy_version, rule_id, rule_key, position, category, condition, action,
            priority, reason_codes, description)
    SELECT p_org_id, p_version, r.rule_id, r.rule_key, r.position, r.category, r.condition,
           r.action, r.priority, r.reason_codes, r.description
      FROM jsonb_to_recordset(p_rules) AS r(rule_id text, rule_key text, position integer,
           category text[], condition jsonb, action text, priority integer, reason_codes text[],
           description text);
    RETURN p_version;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.stage_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.install_policy(p_org_id text, p_version text, p_sha256 text, p_mode text, p_function_name text, p_source_yaml text, p_decide_body text, p_explain_body text, p_retention_body text, p_settings jsonb, p_rules jsonb, p_read_body text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN memgov.activate_policy(p_org_id,
        memgov.stage_policy(p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml,
                            p_decide_body, p_explain_body, p_retention_body, p_settings, p_rules,
                            p_read_body));
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.install_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_scope       text := CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END;
    v_active      text;
    v_activation  memgov.policy_activations;
    v_target      text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_version IS NULL OR p_version = '' THEN
        RAISE EXCEPTION 'undeploy_policy needs the version to undeploy' USING ERRCODE = '22023';
    END IF;
    SELECT version INTO v_active FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    IF v_active IS DISTINCT FROM p_version THEN
        RAISE NOTICE 'policy version % is not the active one of % (active: %): nothing to undeploy',
                     p_version, v_scope, coalesce(v_active, 'none');
        RETURN v_active;
    END IF;

    -- the latest activation of this version that nothing has undone yet (an undo row is
    -- itself never undone: undeploying twice walks back two activations)
    SELECT a.* INTO v_activation FROM memgov.policy_activations a
     WHERE a.org_id = p_org_id AND a.version = p_version AND a.undoes IS NULL
       AND NOT EXISTS (SELECT FROM memgov.policy_activations u
                        WHERE u.org_id = a.org_id AND u.undoes = a.activation_id)
     ORDER BY a.activation_id DESC
     LIMIT 1;
    v_target := v_activation.previous_version;
    IF v_target IS NOT NULL AND NOT EXISTS (SELECT FROM memgov.policy_versions
                                             WHERE org_id = p_org_id AND version = v_target) THEN
        RAISE NOTICE 'policy version % of % is no longer deployed: no policy is active now', v_target, v_scope;
        v_target := NULL;
    END IF;

    INSERT INTO memgov.policy_activations (org_id, version, previous_version, undoes)
    VALUES (p_org_id, v_target, p_version, v_activation.activation_id);
    -- undoing a deploy of the version that was active already changes nothing else
    IF v_target IS DISTINCT FROM p_version THEN
        UPDATE memgov.policy_versions SET active = false WHERE org_id = p_org_id AND active;
        UPDATE memgov.policy_versions SET active = true WHERE org_id = p_org_id AND version = v_target;
        PERFORM memgov.rebuild_dispatch();
    END IF;
    RETURN v_target;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.definition_drift(p_live regprocedure, p_function text, p_definition text)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_head      constant text := format('CREATE OR REPLACE FUNCTION memgov.%I(', p_function);
    v_scratch   constant text := 'drift_check_' || pg_backend_pid();
    v_live      text;
    v_recorded  text;
BEGIN
    IF p_definition IS NULL OR NOT starts_with(p_definition, v_head) THEN
        RETURN 'its recorded definition is missing';
    ELSIF p_live IS NULL THEN
        RETURN 'the function is missing';
    END IF;
    v_live := pg_get_functiondef(p_live);
    IF v_live = p_definition THEN
        RETURN NULL;
    ELSIF current_setting('transaction_read_only') = 'on' THEN
        RETURN 'it differs from its recorded definition (as printed: a read-only transaction cannot create '
               'the recorded one to compare)';
    END IF;
    BEGIN
        EXECUTE format('CREATE FUNCTION memgov.%I(', v_scratch) || substr(p_definition, length(v_head) + 1);
        SELECT pg_get_functiondef(p.oid) INTO STRICT v_recorded
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace AND p.proname = v_scratch;
        RAISE EXCEPTION USING ERRCODE = 'MG000';  -- undoes the scratch function
    EXCEPTION
        WHEN SQLSTATE 'MG000' THEN NULL;
        WHEN OTHERS THEN
            RETURN format('its recorded definition does not compile: %s', SQLERRM);
    END;
    IF substr(v_live, length(v_head) + 1)
       IS DISTINCT FROM substr(v_recorded, length(format('CREATE OR REPLACE FUNCTION memgov.%I(', v_scratch)) + 1) THEN
        RETURN 'its body or attributes differ from its recorded definition';
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.policy_drift()
 RETURNS TABLE(org_id text, version text, function_name text, problem text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_version   record;
    v_function  record;
    v_decide    text;
BEGIN
    FOR v_version IN
        SELECT v.org_id, v.version, v.function_name, v.compiled_sql
          FROM memgov.policy_versions v
         ORDER BY v.org_id COLLATE "C", v.deployed_at, v.version COLLATE "C"
    LOOP
        FOR v_function IN
            SELECT f.name, f.types
              FROM (VALUES (v_version.function_name, 'memgov.long_term_memory_items, text, text'),
                           (v_version.function_name || '_explain', 'memgov.long_term_memory_items, text, text'),
                           (v_version.function_name || '_retention', 'memgov.long_term_memory_items'),
                           (v_version.function_name || '_read', 'memgov.long_term_memory_items, text'))
                   AS f(name, types)
        LOOP
            -- a version without a read class function (none recorded, none live) is as deployed
            CONTINUE WHEN v_function.name = v_version.function_name || '_read'
                      AND to_regprocedure(format('memgov.%I(%s)', v_function.name, v_function.types)) IS NULL
                      AND (memgov.recorded_function(v_version.compiled_sql, v_function.name)).definition IS NULL;
            org_id := v_version.org_id;
            version := v_version.version;
            function_name := 'memgov.' || v_function.name;
            problem := memgov.definition_drift(
                to_regprocedure(format('memgov.%I(%s)', v_function.name, v_function.types)), v_function.name,
                (memgov.recorded_function(v_version.compiled_sql, v_function.name)).definition);
            IF problem IS NOT NULL THEN
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;

    org_id := '*';
    function_name := 'memgov.decide';
    SELECT v.version INTO version FROM memgov.policy_versions v WHERE v.org_id = '*' AND v.active;
    BEGIN
        v_decide := memgov.decide_definition();
    EXCEPTION WHEN SQLSTATE 'MG500' THEN
        problem := SQLERRM;
        RETURN NEXT;
        RETURN;
    END;
    problem := memgov.definition_drift(
        to_regprocedure('memgov.decide(memgov.long_term_memory_items, text, text)'), 'decide', v_decide);
    IF problem IS NOT NULL THEN
        RETURN NEXT;
    END IF;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.policy_drift() TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.drop_samples(p_org_id text, p_memory_ids uuid[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF memgov.sample_rate(p_org_id) > 0 THEN
        DELETE FROM memgov.replay_samples s WHERE s.org_id = p_org_id AND s.memory_id = ANY (p_memory_ids);
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.shortens_life(p_old memgov.long_term_memory_items, p_new memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT (p_new.retention_policy IS DISTINCT FROM p_old.retention_policy
            AND p_new.retention_policy <> 'permanent_until_revoked'
            OR p_new.ttl_minutes IS DISTINCT FROM p_old.ttl_minutes AND p_new.ttl_minutes IS NOT NULL)
           AND NOT (p_new.expires_at IS NOT NULL AND p_old.expires_at IS NOT NULL
                    AND p_new.expires_at >= p_old.expires_at)
$function$;

CREATE OR REPLACE FUNCTION memgov.log_decision(p_operation text, p_memory_id uuid, p_org_id text, p_actor text, p_decision memgov.decision, p_fingerprint text DEFAULT NULL::text, p_returned integer DEFAULT NULL::integer, p_withheld integer DEFAULT NULL::integer, p_login text DEFAULT NULL::text)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level,
            query_fingerprint, returned, withheld)
    VALUES (p_operation, p_memory_id, p_org_id, p_decision.action,
            p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
            p_decision.mode, p_decision.enforced, p_actor, coalesce(p_login, session_user),
            pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
            p_fingerprint, p_returned, p_withheld)
    RETURNING decision_id INTO v_id;
    RETURN v_id;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.raise_denied(p_operation text, p_outcome memgov.write_outcome)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
              HINT = CASE WHEN p_operation IN ('search', 'get')
                          THEN 'the active policy refuses this read; `memgov evaluate --operation ' || p_operation
                               || ' --explain` shows why'
                          ELSE 'the active policy refuses this write; `memgov evaluate --explain` shows why' END;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.govern(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision, p_shadow memgov.shadow_verdict, p_payload jsonb DEFAULT NULL::jsonb, p_file boolean DEFAULT true, p_raise boolean DEFAULT true, p_fingerprint text DEFAULT NULL::text, p_returned integer DEFAULT NULL::integer, p_withheld integer DEFAULT NULL::integer, p_silent boolean DEFAULT false, p_login text DEFAULT NULL::text)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_outcome   memgov.write_outcome;
    v_read      boolean;
BEGIN
    v_read := p_operation IN ('search', 'get');
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;
    IF v_read AND pg_catalog.pg_is_in_recovery() THEN
        -- a standby writes nothing: the primary logs the read and files it (no shadow verdict)
        SELECT r.decision_id, r.request_id, r.quarantine_id
          INTO v_outcome.decision_id, v_outcome.request_id, v_outcome.quarantine_id
          FROM memgov.log_read_on_primary(p_operation, p_item, p_actor, p_decision, p_payload, p_file,
                                          p_fingerprint, p_returned, p_withheld) AS r;
    ELSE
        -- memgov.log_decision's INSERT, written out: a PL/pgSQL call less per decision
        INSERT INTO memgov.decision_log
               (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
                policy_version, mode, enforced, actor, login, risk_score, risk_level,
                query_fingerprint, returned, withheld)
        VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action,
                p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
                p_decision.mode, p_decision.enforced, p_actor, coalesce(p_login, session_user),
                pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
                p_fingerprint, p_returned, p_withheld)
        RETURNING decision_id INTO v_outcome.decision_id;
        IF p_shadow.shadow_id IS NOT NULL THEN
            PERFORM memgov.record_shadow(p_shadow, p_operation, p_item, p_decision, v_outcome.decision_id);
        END IF;

        IF p_file AND v_outcome.action = 'require_approval' THEN
            INSERT INTO memgov.approval_requests
                   (memory_id, org_id, operation, payload, requested_by, requested_login,
                    decision_id, policy_version)
            VALUES (p_item.memory_id, p_item.org_id, p_operation, coalesce(p_payload, to_jsonb(p_item)), p_actor,
                    coalesce(p_login, session_user), v_outcome.decision_id, p_decision.policy_version)
            RETURNING request_id INTO v_outcome.request_id;
            PERFORM pg_notify(memgov.approval_channel(p_item.org_id), v_outcome.request_id::text);
        ELSIF p_file AND v_outcome.action = 'quarantine' THEN
            INSERT INTO memgov.quarantine
                   (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
            VALUES (p_item.org_id, p_operation, p_item.memory_id, coalesce(p_payload, to_jsonb(p_item)),
                    memgov.decision_json(p_decision), v_outcome.decision_id, p_actor,
                    coalesce(p_login, session_user))
            RETURNING quarantine_id INTO v_outcome.quarantine_id;
        END IF;
    END IF;

    -- a sample of what stays in the table: stored writes and held ones (not a forget)
    IF NOT v_read AND p_operation <> 'forget' AND v_outcome.action IN ('allow', 'require_approval')
       AND memgov.sample_rate(p_item.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(p_item.org_id) THEN
        PERFORM memgov.keep_sample(p_operation, p_item, p_actor, v_outcome.decision_id);
    END IF;

    IF v_outcome.action = 'allow' AND p_silent THEN
        RETURN v_outcome;  -- a stored write: nothing to tell
    END IF;
    -- the decision as JSON is for errors, notices and the functions' results
    v_outcome.decision := memgov.decision_json(p_decision)
        || jsonb_build_object('decision_id', v_outcome.decision_id,
                              'memory_id', p_item.memory_id,
                              'request_id', v_outcome.request_id,
                              'quarantine_id', v_outcome.quarantine_id);
    CASE v_outcome.action
    WHEN 'allow' THEN
        NULL;
    WHEN 'deny' THEN
        IF p_raise THEN
            PERFORM memgov.raise_denied(p_operation, v_outcome);
        END IF;
    WHEN 'require_approval' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % held for approval (request %): nothing returned', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG203', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
                USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
        END IF;
    WHEN 'quarantine' THEN
        IF v_read THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %): nothing returned', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG204', DETAIL = v_outcome.decision::text;
        ELSIF p_file THEN
            RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
                USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
        END IF;
    END CASE;
    RETURN v_outcome;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.seal_batch(p_batch text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_catalog.setval('memgov.batch_seal', pg_catalog.hashtextextended(p_batch, memgov.session_key()));
    PERFORM pg_catalog.set_config('memgov.batch_sealed', 'on', false);
    PERFORM pg_catalog.set_config('memgov.batch', p_batch, true);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.first_shared(p_batch text, p_key text, p_org_id text, p_operation text, p_actor text, p_decision memgov.decision)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.share_decision(p_batch text, p_key text, p_decision_id bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.enforce_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.flush_batch()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_batch  pg_catalog.text := pg_catalog.current_setting('memgov.batch', true);
BEGIN
    -- (every name, type and operator qualified, and no SET clause, which would cost each
    -- statement 12k instructions: this runs as the statement's role, with its rights and
    -- search_path, where a type of the client's pg_temp would come first;
    -- strpos of NULL is NULL, and NULL is not > 0)
    IF pg_catalog.strpos(v_batch, E'\x1e') OPERATOR(pg_catalog.>) 0 THEN
        PERFORM pg_catalog.set_config('memgov.batch', '', true);
        PERFORM memgov.list_shared(ARRAY(
            SELECT ROW(w.org_id, w.decision_id, pg_catalog.array_agg(w.memory_id ORDER BY w.memory_id))::memgov.shared_decision
              FROM written w
             WHERE w.status OPERATOR(pg_catalog.=) 'active'
             GROUP BY w.org_id, w.decision_id));
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.list_shared(p_shared memgov.shared_decision[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION memgov.list_shared(memgov.shared_decision[]) TO memgov_writer, memgov_admin;

CREATE OR REPLACE FUNCTION memgov.refuse_delete()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF current_user <> 'memgov_owner' THEN
        RAISE EXCEPTION 'memgov: DELETE on % is refused: forgetting is decided memory by memory', TG_TABLE_NAME
            USING ERRCODE = 'MG403',
                  HINT = 'forget with memgov.forget(memory_id) or memgov.forget_where(filter)';
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.remember(item jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
            source, confidence, is_sensitive, retention_policy, context_source, metadata,
            namespace, item_key, ttl_minutes)
    VALUES (coalesce(v_row.memory_id, gen_random_uuid()), v_row.org_id, v_row.project_id,
            v_row.agent_id, v_row.subject_id, v_row.session_id, v_row.category, v_row.fact_text,
            v_row.source, v_row.confidence, v_row.is_sensitive, v_row.retention_policy,
            v_row.context_source, v_row.metadata, v_row.namespace, v_row.item_key, v_row.ttl_minutes);
    v_outcome := current_setting('memgov.last_outcome', true);
    PERFORM set_config('memgov.capture', '', true);
    PERFORM set_config('memgov.on_deny', '', true);
    PERFORM set_config('memgov.last_outcome', '', true);
    RETURN nullif(v_outcome, '')::jsonb;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.close_request(p_request memgov.approval_requests, p_status text, p_actor text, p_note text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    UPDATE memgov.approval_requests
       SET status = p_status, decided_at = now(), decided_by = p_actor, decided_login = session_user,
           note = p_note
     WHERE request_id = p_request.request_id AND org_id = p_request.org_id;
    IF p_status <> 'approved' AND p_request.operation = 'remember' THEN
        DELETE FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval' AND decision_id = p_request.decision_id;
        IF FOUND THEN
            PERFORM memgov.drop_samples(p_request.org_id, ARRAY[p_request.memory_id]);
        END IF;
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.apply_write(p_operation text, p_item memgov.long_term_memory_items, p_policy_version text, p_decision_id bigint, p_pending boolean)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    PERFORM memgov.engine_writes();  -- decided already: the write trigger keeps the derived columns
    CASE p_operation
    WHEN 'remember' THEN
        IF p_pending THEN
            UPDATE memgov.long_term_memory_items AS m
               SET status = 'active', policy_version = p_policy_version, decision_id = p_decision_id
             WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
               AND m.status = 'pending_approval';
        ELSE
            BEGIN
                INSERT INTO memgov.long_term_memory_items
                       (memory_id, org_id, project_id, agent_id, subject_id, session_id, category,
                        fact_text, source, confidence, is_sensitive, retention_policy, context_source,
                        metadata, status, created_at, updated_at, policy_version, decision_id,
                        namespace, item_key, ttl_minutes)
                VALUES (p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id,
                        p_item.subject_id, p_item.session_id, p_item.category, p_item.fact_text,
                        p_item.source, p_item.confidence, p_item.is_sensitive, p_item.retention_policy,
                        p_item.context_source, p_item.metadata, 'active', p_item.created_at,
                        p_item.created_at, p_policy_version, p_decision_id,
                        p_item.namespace, p_item.item_key, p_item.ttl_minutes);
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
               metadata = p_item.metadata, ttl_minutes = p_item.ttl_minutes,
               policy_version = p_policy_version, decision_id = p_decision_id
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
           AND m.status = 'active';
    WHEN 'forget' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
        PERFORM memgov.drop_samples(p_item.org_id, ARRAY[p_item.memory_id]);
    END CASE;
    PERFORM memgov.engine_writes_done();
END
$function$;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_id        bigint;
    v_status    text;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
    v_item.org_id := p_request.org_id;
    v_item.memory_id := p_request.memory_id;
    IF p_request.operation = 'remember' THEN
        SELECT * INTO v_row FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval' AND decision_id = p_request.decision_id
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

    -- decided for the role that asked, logged as the reviewer's; nothing new is filed
    v_decision := memgov.decide(v_item, p_request.operation, p_request.requested_by);
    v_id := (memgov.govern(p_request.operation, v_item, v_actor, v_decision,
                           memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by),
                           p_file => false, p_raise => false)).decision_id;

    IF v_decision.enforced AND v_decision.action IN ('deny', 'quarantine') THEN
        v_status := 'denied';
        PERFORM memgov.close_request(p_request, v_status, v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
    ELSE
        v_status := 'approved';
        PERFORM memgov.apply_write(p_request.operation, v_item, v_decision.policy_version, v_id, true);
        PERFORM memgov.close_request(p_request, v_status, v_actor, p_note);
    END IF;
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', v_status,
                              'memory_id', v_item.memory_id,
                              'decision', memgov.decision_json(v_decision) || jsonb_build_object(
                                  'action', CASE v_status WHEN 'approved' THEN 'allow' ELSE 'deny' END,
                                  'policy_action', v_decision.action, 'decision_id', v_id,
                                  'memory_id', v_item.memory_id, 'request_id', p_request.request_id));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.purge_quarantine(quarantine_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_entry     memgov.quarantine := memgov.held_quarantine(purge_quarantine.quarantine_id);
    v_actor     text := memgov.check_reviewer(v_entry.quarantined_login, v_entry.quarantined_by);
    v_decision  memgov.decision := jsonb_populate_record(NULL::memgov.decision, v_entry.decision);
    v_id        bigint;
BEGIN
    v_decision.action := 'deny';
    v_decision.reason_codes := ARRAY['QUARANTINE_PURGED'];
    v_decision.matched_rule_ids := coalesce(v_decision.matched_rule_ids, ARRAY[]::text[]);
    v_decision.enforced := true;
    v_id := memgov.log_decision(v_entry.operation::text, v_entry.memory_id, v_entry.org_id, v_actor, v_decision);
    UPDATE memgov.quarantine AS q
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = v_actor, resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged', 'decision_id', v_id);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.held_insert_request(p_item memgov.long_term_memory_items)
 RETURNS memgov.approval_requests
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.memory_id = p_item.memory_id AND r.org_id = p_item.org_id
       AND r.status = 'pending' AND r.operation = 'remember' AND r.decision_id = p_item.decision_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: pending memory % has no open approval request', p_item.memory_id
            USING ERRCODE = 'MG404';
    END IF;
    RETURN v_request;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.govern_feedback_write(p_operation text, p_item memgov.long_term_memory_items)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor  text := memgov.invoker_role();
BEGIN
    RETURN memgov.govern(p_operation, p_item, v_actor, memgov.decide(p_item, p_operation, v_actor),
                         memgov.judge_shadow(p_operation, p_item, NULL, v_actor));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.confirm(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(confirm.memory_id);
    v_after    numeric(4,3);
    v_result   jsonb;
BEGIN
    IF v_item.status = 'pending_approval' THEN
        v_result := memgov.approve_request(memgov.held_insert_request(v_item), 'confirmed by the user');
        IF v_result ->> 'status' <> 'approved' THEN
            RETURN memgov.record_feedback(v_item, 'confirm', NULL, 'refused')
                   || jsonb_build_object('decision', v_result -> 'decision');
        END IF;
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta')));
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now()
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    PERFORM memgov.engine_writes_done();
    RETURN memgov.record_feedback(v_item, 'confirm', v_after,
        CASE WHEN v_item.status = 'pending_approval' THEN 'approved' ELSE 'confirmed' END);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.reject(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(reject.memory_id);
    v_after    numeric(4,3);
BEGIN
    IF v_item.status = 'pending_approval' THEN
        PERFORM memgov.deny_request(memgov.held_insert_request(v_item), 'rejected by the user');
        RETURN memgov.record_feedback(v_item, 'reject', NULL, 'refused');
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta')));
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below')
       AND NOT memgov.retention_held(v_item) THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.drop_samples(v_item.org_id, ARRAY[v_item.memory_id]);
        PERFORM memgov.log_deletion(v_item, 'rejected', NULL);
        RETURN memgov.record_feedback(v_item, 'reject', v_after, 'deleted');
    END IF;
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    PERFORM memgov.engine_writes_done();
    RETURN memgov.record_feedback(v_item, 'reject', v_after, 'lowered');
END
$function$;

CREATE OR REPLACE FUNCTION memgov.edit(memory_id uuid, new_text text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(edit.memory_id);
    v_after    numeric(4,3) := least(1, greatest(0,
                   memgov.feedback_setting(v_item.org_id, 'edit_confidence')));
    v_new      memgov.long_term_memory_items;
    v_outcome  memgov.write_outcome;
BEGIN
    IF new_text IS NULL THEN
        RAISE EXCEPTION 'memgov: new_text must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM memgov.check_not_pending(v_item, 'edited');
    PERFORM memgov.check_fact_size(new_text);
    v_new := v_item;
    v_new.fact_text := new_text;
    v_new.confidence := v_after;
    v_new.updated_at := now();
    v_outcome := memgov.govern_feedback_write('update', v_new);
    IF v_outcome.action = 'allow' THEN
        PERFORM memgov.engine_writes();
        UPDATE memgov.long_term_memory_items AS m
           SET fact_text = new_text, confidence = v_after,
               policy_version = v_outcome.policy_version, decision_id = v_outcome.decision_id
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.engine_writes_done();
    END IF;
    RETURN v_outcome.decision || memgov.record_feedback(v_item, 'edit',
        CASE WHEN v_outcome.action = 'allow' THEN v_after ELSE v_item.confidence END,
        v_outcome.action);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.forget(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(forget.memory_id);
    v_outcome  memgov.write_outcome;
BEGIN
    PERFORM memgov.check_not_pending(v_item, 'forgotten');
    v_outcome := memgov.govern_feedback_write('forget', v_item);
    IF v_outcome.action = 'allow' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.drop_samples(v_item.org_id, ARRAY[v_item.memory_id]);
        PERFORM memgov.log_deletion(v_item, 'forgotten', NULL);
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.forget_filter(p_filter jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c_scope    constant text[] := ARRAY['project_id', 'agent_id', 'subject_id', 'session_id'];
    c_keys     constant text[] := ARRAY['org_id', 'project_id', 'agent_id', 'subject_id', 'session_id',
                                        'categories', 'created_before', 'created_after'];
    v_key      text;
    v_value    jsonb;
    v_unknown  text;
    v_at       timestamptz;
BEGIN
    IF p_filter IS NULL OR jsonb_typeof(p_filter) <> 'object' THEN
        RAISE EXCEPTION 'memgov: forget_where takes a JSON object, not %', coalesce(jsonb_typeof(p_filter), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'for example {"org_id": "acme", "subject_id": "user-42"}';
    END IF;
    SELECT string_agg(format('%I', k), ', ' ORDER BY k) INTO v_unknown
      FROM jsonb_object_keys(p_filter) AS k WHERE k <> ALL (c_keys);
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION 'memgov: forget_where does not know the filter key(s) %', v_unknown
            USING ERRCODE = '22023', HINT = 'the keys are ' || array_to_string(c_keys, ', ');
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(p_filter) AS e LOOP
        IF v_key = 'categories' THEN
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0
               OR EXISTS (SELECT FROM jsonb_array_elements(v_value) AS c
                           WHERE jsonb_typeof(c) <> 'string' OR c #>> '{}' = '') THEN
                RAISE EXCEPTION 'memgov: forget_where''s categories must be a non-empty array of category names, not %',
                                left(v_value::text, 200)
                    USING ERRCODE = '22023', HINT = 'for example "categories": ["preference", "contact"]';
            END IF;
        ELSIF jsonb_typeof(v_value) <> 'string' OR v_value #>> '{}' = '' THEN
            RAISE EXCEPTION 'memgov: forget_where''s % must be a non-empty string, not %', v_key, left(v_value::text, 200)
                USING ERRCODE = '22023';
        ELSIF v_key IN ('created_before', 'created_after') THEN
            BEGIN
                v_at := (v_value #>> '{}')::timestamptz;
            EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_parameter_value THEN
                RAISE EXCEPTION 'memgov: forget_where''s % is not a timestamp: %', v_key, left(v_value::text, 200)
                    USING ERRCODE = '22023', HINT = 'an ISO 8601 timestamp, for example "2026-01-31T00:00:00Z"';
            END;
        END IF;
    END LOOP;
    IF NOT p_filter ?| c_scope THEN
        RAISE EXCEPTION 'memgov: forget_where needs a scope besides the tenant: one of %', array_to_string(c_scope, ', ')
            USING ERRCODE = '22023',
                  HINT = 'categories and creation times narrow a scope; they never make one';
    END IF;
    IF (p_filter ->> 'created_after')::timestamptz >= (p_filter ->> 'created_before')::timestamptz THEN
        RAISE EXCEPTION 'memgov: forget_where''s created_after (%) is not before its created_before (%)',
                        p_filter ->> 'created_after', p_filter ->> 'created_before'
            USING ERRCODE = '22023';
    END IF;
    RETURN p_filter || jsonb_build_object('org_id', memgov.check_tenant_id(
        coalesce(p_filter ->> 'org_id', nullif(current_setting('memgov.org_id', true), ''))));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.forget_matches(p_item memgov.long_term_memory_items, p_filter jsonb)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT (p_filter ->> 'project_id' IS NULL OR p_item.project_id = p_filter ->> 'project_id')
       AND (p_filter ->> 'agent_id' IS NULL OR p_item.agent_id = p_filter ->> 'agent_id')
       AND (p_filter ->> 'subject_id' IS NULL OR p_item.subject_id = p_filter ->> 'subject_id')
       AND (p_filter ->> 'session_id' IS NULL OR p_item.session_id = p_filter ->> 'session_id')
       AND (p_filter -> 'categories' IS NULL OR (p_filter -> 'categories') ? p_item.category)
       AND (p_filter ->> 'created_before' IS NULL
            OR p_item.created_at < (p_filter ->> 'created_before')::timestamptz)
       AND (p_filter ->> 'created_after' IS NULL
            OR p_item.created_at > (p_filter ->> 'created_after')::timestamptz)
$function$;

CREATE OR REPLACE FUNCTION memgov.forget_where(filter jsonb, dry_run boolean DEFAULT false)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_filter      jsonb := memgov.forget_filter(forget_where.filter);
    v_org         text := memgov.check_tenant(v_filter ->> 'org_id');
    v_actor       text := memgov.invoker_role();
    v_shadowed    boolean := memgov.shadow_of(v_org) IS NOT NULL;
    v_matches     refcursor;
    v_item        memgov.long_term_memory_items;
    v_decision    memgov.decision;
    v_shadow      memgov.shadow_verdict;
    v_outcome     memgov.write_outcome;
    v_action      text;
    v_key         text;
    v_at          integer;
    v_keys        text[] := '{}';     -- the distinct decisions of what is deleted, and their log rows
    v_logged      bigint[] := '{}';
    v_ids         uuid[] := '{}';     -- what is deleted, and the log row of each
    v_of          bigint[] := '{}';
    v_deleted     integer;
    v_counts      jsonb := '{"forgotten": 0, "held": 0, "denied": 0, "pending": 0}';
BEGIN
    IF forget_where.dry_run IS NULL THEN
        RAISE EXCEPTION 'memgov: forget_where''s dry_run must be true or false' USING ERRCODE = '22023';
    END IF;
    -- in memory_id order, each locked as forget() locks its memory (a dry run locks nothing)
    IF forget_where.dry_run THEN
        OPEN v_matches FOR SELECT * FROM memgov.long_term_memory_items m
         WHERE m.org_id = v_org AND memgov.forget_matches(m, v_filter) ORDER BY m.memory_id;
    ELSE
        OPEN v_matches FOR SELECT * FROM memgov.long_term_memory_items m
         WHERE m.org_id = v_org AND memgov.forget_matches(m, v_filter) ORDER BY m.memory_id FOR UPDATE;
    END IF;
    LOOP
        FETCH v_matches INTO v_item;
        EXIT WHEN NOT FOUND;
        IF v_item.status = 'pending_approval' THEN
            v_counts := jsonb_set(v_counts, '{pending}', to_jsonb((v_counts ->> 'pending')::integer + 1));
            CONTINUE;
        END IF;
        v_decision := memgov.decide(v_item, 'forget', v_actor);
        v_action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
        IF NOT forget_where.dry_run THEN
            v_shadow := CASE WHEN v_shadowed THEN memgov.judge_shadow('forget', v_item, NULL, v_actor) END;
            IF v_action = 'allow' AND v_shadow.shadow_id IS NULL THEN
                -- deleted: its decision logged once for every memory deleted under it
                v_key := concat_ws(E'\x1f', v_decision.action, v_decision.enforced, v_decision.policy_version,
                                   v_decision.mode, v_decision.risk_level,
                                   array_to_string(v_decision.reason_codes, E'\x1f', ''),
                                   array_to_string(v_decision.matched_rule_ids, E'\x1f', ''));
                v_at := array_position(v_keys, v_key);
                IF v_at IS NULL THEN
                    v_keys := v_keys || v_key;
                    v_logged := v_logged || memgov.log_decision('forget', v_item.memory_id, v_org, v_actor, v_decision);
                    v_at := cardinality(v_keys);
                END IF;
                v_ids := v_ids || v_item.memory_id;
                v_of := v_of || v_logged[v_at];
            ELSE
                -- a row of its own: a request, a quarantine entry, a denial, or a shadow's verdict beside it
                v_outcome := memgov.govern('forget', v_item, v_actor, v_decision, v_shadow, p_raise => false);
                v_action := v_outcome.action;
                IF v_action = 'allow' THEN
                    v_ids := v_ids || v_item.memory_id;
                    v_of := v_of || v_outcome.decision_id;
                END IF;
            END IF;
        END IF;
        v_key := CASE v_action WHEN 'allow' THEN 'forgotten' WHEN 'deny' THEN 'denied' ELSE 'held' END;
        v_counts := jsonb_set(v_counts, ARRAY[v_key], to_jsonb((v_counts ->> v_key)::integer + 1));
    END LOOP;
    CLOSE v_matches;

    IF cardinality(v_ids) > 0 THEN
        DELETE FROM memgov.long_term_memory_items m WHERE m.org_id = v_org AND m.memory_id = ANY (v_ids);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> cardinality(v_ids) THEN
            RAISE EXCEPTION 'memgov: forget_where deleted % of the % memories it had locked', v_deleted, cardinality(v_ids)
                USING ERRCODE = 'XX000';
        END IF;
        PERFORM memgov.drop_samples(v_org, v_ids);
        -- each shared decision lists its memories (a decision of one memory keeps its memory_id)
        UPDATE memgov.decision_log d
           SET memory_id = NULL, memory_ids = g.ids, memory_count = cardinality(g.ids)
          FROM (SELECT o.decision_id, array_agg(o.memory_id ORDER BY o.memory_id) AS ids
                  FROM unnest(v_ids, v_of) AS o (memory_id, decision_id)
                 GROUP BY o.decision_id HAVING count(*) > 1) AS g
         WHERE d.org_id = v_org AND d.decision_id = g.decision_id;
        INSERT INTO memgov.deletion_log (org_id, reason, policy_version, memory_count, memory_ids)
        VALUES (v_org, 'forgotten', memgov.policy_settings(v_org) ->> 'version', cardinality(v_ids),
                ARRAY(SELECT i FROM unnest(v_ids) AS i ORDER BY i));
    END IF;
    RETURN v_counts || jsonb_build_object('dry_run', forget_where.dry_run);
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.forget_where(jsonb,boolean) TO memgov_writer, memgov_reviewer, memgov_admin;

CREATE OR REPLACE FUNCTION memgov.refuse_read_only(p_operation text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        RETURN;
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        IF memgov.standby_logger_ready() THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'memgov: % is a governed read: it logs its decision, and this server is a standby (read-only) without a standby logger',
                        p_operation
            USING ERRCODE = '25006',
                  HINT = 'send memgov.search and memgov.get to the primary, or let the primary log this standby''s reads: '
                         'memgov standby-logger setup, run on the primary (docs/operations.md, "Reads on a standby")';
    END IF;
    RAISE EXCEPTION 'memgov: % is a governed read: it logs its decision, and this transaction is read-only', p_operation
        USING ERRCODE = '25006',
              HINT = 'run it in a read-write transaction (default_transaction_read_only, SET TRANSACTION READ WRITE)';
END
$function$;

CREATE OR REPLACE FUNCTION memgov.search(query jsonb DEFAULT '{}'::jsonb)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_org_id       text := memgov.recall_tenant();
    v_query        jsonb := memgov.recall_query(query);
    v_actor        text := memgov.invoker_role();
    v_governed     boolean := memgov.reads_governed(v_org_id);
    v_limit        integer := (v_query ->> 'limit')::integer;
    v_categories   text[] := ARRAY(SELECT jsonb_array_elements_text(v_query -> 'categories'));
    v_min          numeric := (v_query ->> 'min_confidence')::numeric;
    v_project_id   text := v_query ->> 'project_id';
    v_agent_id     text := v_query ->> 'agent_id';
    v_subject_id   text := v_query ->> 'subject_id';
    v_session_id   text := v_query ->> 'session_id';
    v_asked        memgov.long_term_memory_items := memgov.search_item(v_org_id, v_query);
    v_shadow       memgov.shadow_verdict;
    v_text         tsquery;
    v_decision     memgov.decision;
    v_get          memgov.decision;
    v_cursor       refcursor;
    v_candidate    record;
    v_offset       integer := 0;
    v_batch        integer;
    v_examined     integer;
    v_returned     integer := 0;
    v_withheld     integer := 0;
    v_id           bigint;
    v_outcome      jsonb;
BEGIN
    PERFORM memgov.refuse_read_only('memgov.search');
    v_decision := memgov.read_decision(v_asked, 'search', v_actor);
    v_shadow := memgov.judge_shadow('search', v_asked, NULL, v_actor);
    IF v_decision.enforced AND v_decision.action <> 'allow' THEN
        -- logged, filed and announced (MG403 raises; a hold or quarantine returns nothing)
        v_outcome := (memgov.govern('search', v_asked, v_actor, v_decision, v_shadow,
                                    p_payload => jsonb_build_object('query', v_query),
                                    p_fingerprint => memgov.query_fingerprint(v_query),
                                    p_returned => 0, p_withheld => 0)).decision;
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    IF v_query ? 'text' THEN
        v_text := websearch_to_tsquery(memgov.search_config(v_org_id), v_query ->> 'text');
    END IF;

    -- candidates are read in batches, best first, until `limit` are allowed or the matches
    -- run out: never fewer because of how many rows were withheld (a cap on the candidates
    -- examined would make what a search returns tell of the rows it may not return)
    v_batch := v_limit;
    -- a text without a word to match matches nothing
    WHILE v_text IS NULL OR numnode(v_text) > 0 LOOP
        -- two static queries, so that each keeps its plan: with a text the index finds the matches
        IF v_text IS NULL THEN
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(1, m.confidence, m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        ELSE
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(ts_rank_cd(m.search_vector, v_text, 32), m.confidence,
                                           m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.search_vector @@ v_text
                   AND m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        END IF;
        v_examined := 0;
        LOOP
            FETCH v_cursor INTO v_candidate;
            EXIT WHEN NOT FOUND;
            v_examined := v_examined + 1;
            IF v_governed THEN
                v_get := memgov.decide(v_candidate.item, 'get', v_actor);
                IF v_get.action <> 'allow' THEN
                    v_withheld := v_withheld + 1;
                    -- monitor mode returns it and counts what would have been withheld
                    CONTINUE WHEN v_get.enforced;
                END IF;
            END IF;
            v_returned := v_returned + 1;
            RETURN NEXT memgov.recalled_of(v_candidate.item, v_candidate.score);
            EXIT WHEN v_returned = v_limit;
        END LOOP;
        CLOSE v_cursor;
        v_offset := v_offset + v_examined;
        EXIT WHEN v_returned = v_limit OR v_examined < v_batch;
        v_batch := v_batch * 2;  -- the rows past a withheld stretch, in ever larger batches
    END LOOP;

    v_id := (memgov.govern('search', v_asked, v_actor, v_decision, v_shadow,
                           p_fingerprint => memgov.query_fingerprint(v_query),
                           p_returned => v_returned, p_withheld => v_withheld)).decision_id;
    -- how many candidates were withheld tells of rows the caller may not read (a search for
    -- a word, or a min_confidence, per probe): only a role that reads the log is told, and
    -- everyone where reads are not governed (nothing is withheld: the count is always 0)
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'returned', v_returned,
                              'withheld', CASE WHEN NOT v_governed
                                                    OR pg_catalog.has_table_privilege(v_actor, 'memgov.decision_log', 'SELECT')
                                               THEN v_withheld END));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.get(memory_id uuid)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_org_id    text := memgov.recall_tenant();
    v_actor     text := memgov.invoker_role();
    v_item      memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_allowed   boolean;
    v_outcome   jsonb;
BEGIN
    PERFORM memgov.refuse_read_only('memgov.get');
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = get.memory_id AND m.org_id = v_org_id AND m.status = 'active'
       AND (m.expires_at IS NULL OR m.expires_at > now());
    IF NOT FOUND THEN
        PERFORM memgov.note_recall(jsonb_build_object('decision_id', NULL, 'returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    v_decision := memgov.read_decision(v_item, 'get', v_actor);
    v_shadow := memgov.judge_shadow('get', v_item, NULL, v_actor);
    v_allowed := NOT v_decision.enforced OR v_decision.action = 'allow';
    -- logged; a refusal also filed and announced (MG403 raises)
    v_outcome := (memgov.govern('get', v_item, v_actor, v_decision, v_shadow,
                                p_payload => jsonb_build_object('memory_id', v_item.memory_id),
                                p_returned => CASE WHEN v_allowed THEN 1 ELSE 0 END,
                                p_withheld => CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END)).decision;
    IF NOT v_allowed THEN
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 1));
        RETURN;
    END IF;
    PERFORM memgov.note_recall(v_outcome
        || jsonb_build_object('returned', 1, 'withheld', CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END));
    RETURN NEXT memgov.recalled_of(v_item, NULL);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.row_token(p_item memgov.long_term_memory_items, p_key bigint)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
RETURN (hashtextextended(((((((p_item).decision_id)::text || ':'::text) || ((p_item).memory_id)::text) || ':'::text) || ((p_item).org_id)::text), p_key))::text;

CREATE OR REPLACE FUNCTION memgov.written_here(p_item memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_mark  text := current_setting('memgov.written', true);
BEGIN
    IF v_mark IS NULL OR v_mark = '' THEN
        RETURN false;
    END IF;
    RETURN v_mark = memgov.row_token(p_item, pg_catalog.currval('memgov.session_key'));
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN false;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.read_allowed(p_status text, p_org_id text, p_read_class bigint, p_item memgov.long_term_memory_items, p_tenant text, p_allowed bigint[], p_refused bigint[])
 RETURNS boolean
 LANGUAGE sql
 STABLE
RETURN CASE WHEN ((NOT memgov.reads_governed(p_org_id)) OR (p_read_class IS NULL) OR (p_status = 'pending_approval'::text) OR (p_org_id IS DISTINCT FROM p_tenant)) THEN memgov.readable(p_status, p_org_id, p_item) WHEN (p_read_class = ANY (p_allowed)) THEN true WHEN (p_read_class = ANY (p_refused)) THEN memgov.written_here(p_item) ELSE memgov.readable(p_status, p_org_id, p_item) END;
GRANT EXECUTE ON FUNCTION memgov.read_allowed(text,text,bigint,memgov.long_term_memory_items,text,bigint[],bigint[]) TO memgov_writer, memgov_reviewer;

CREATE OR REPLACE FUNCTION memgov.standby_read_seal(p_read jsonb)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT pg_catalog.encode(pg_catalog.sha256(
               pg_catalog.convert_to(s.secret, 'UTF8')
               || pg_catalog.sha256(pg_catalog.convert_to('memgov-standby-read:' || p_read::text, 'UTF8'))), 'hex')
      FROM memgov.channel_secret s
$function$;

CREATE OR REPLACE FUNCTION memgov.dblink_schema()
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT e.extnamespace::regnamespace::text FROM pg_catalog.pg_extension e WHERE e.extname = 'dblink'
$function$;

CREATE OR REPLACE FUNCTION memgov.standby_logger_ready()
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'dblink')
       AND EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary')
$function$;

CREATE OR REPLACE FUNCTION memgov.log_read_on_primary(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision, p_payload jsonb, p_file boolean, p_fingerprint text, p_returned integer, p_withheld integer)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_dblink   text := memgov.dblink_schema();
    v_read     jsonb;
    v_call     text;
    v_answer   jsonb;
    v_cached   boolean;
    v_error    text;
    v_outcome  memgov.write_outcome;
BEGIN
    v_read := jsonb_build_object(
        'operation', p_operation, 'org_id', p_item.org_id, 'memory_id', p_item.memory_id,
        'actor', p_actor, 'login', session_user::text, 'decision', to_jsonb(p_decision),
        'payload', p_payload, 'file', p_file, 'fingerprint', p_fingerprint,
        'returned', p_returned, 'withheld', p_withheld,
        'nonce', gen_random_uuid(), 'sent_at', clock_timestamp());
    v_call := format('SELECT memgov.log_standby_read(%L::jsonb)',
                     jsonb_build_object('read', v_read, 'seal', memgov.standby_read_seal(v_read)));
    LOOP
        BEGIN
            EXECUTE format('SELECT coalesce(%L = ANY (%I.dblink_get_connections()), false)', 'memgov_primary', v_dblink)
                INTO v_cached;
            IF NOT v_cached THEN
                EXECUTE format('SELECT %I.dblink_connect(%L, %L)', v_dblink, 'memgov_primary', 'memgov_primary');
            END IF;
            EXECUTE format('SELECT t.r FROM %I.dblink(%L, %L) AS t(r jsonb)', v_dblink, 'memgov_primary', v_call)
                INTO v_answer;
            EXIT;
        EXCEPTION WHEN connection_exception THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
            BEGIN
                EXECUTE format('SELECT %I.dblink_disconnect(%L)', v_dblink, 'memgov_primary');
            EXCEPTION WHEN OTHERS THEN
                NULL;  -- not open
            END;
            IF NOT v_cached THEN
                RAISE EXCEPTION 'memgov: % on a standby is logged on the primary, which cannot be reached: %',
                                p_operation, pg_catalog.rtrim(v_error, E'\n')
                    USING ERRCODE = 'MG503',
                          DETAIL = 'nothing was returned: a governed read is never returned unlogged',
                          HINT = 'start the primary or repair the connection to it (the foreign server memgov_primary; '
                                 'after a failover run memgov standby-logger setup on the new primary), or send the '
                                 'read to the primary (docs/operations.md, "Reads on a standby")';
            END IF;
            -- a connection the primary dropped since this session's last read: once more, anew
        END;
    END LOOP;
    v_outcome.decision_id := (v_answer ->> 'decision_id')::bigint;
    v_outcome.request_id := (v_answer ->> 'request_id')::uuid;
    v_outcome.quarantine_id := (v_answer ->> 'quarantine_id')::uuid;
    RETURN v_outcome;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.log_standby_read(p_request jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_read       jsonb := p_request -> 'read';
    v_operation  text := v_read ->> 'operation';
    v_org_id     text := v_read ->> 'org_id';
    v_login      text := v_read ->> 'login';
    v_actor      text := v_read ->> 'actor';
    v_sent_at    timestamptz;
    v_decision   memgov.decision;
    v_item       memgov.long_term_memory_items;
    v_outcome    memgov.write_outcome;
BEGIN
    IF jsonb_typeof(v_read) IS DISTINCT FROM 'object'
       OR (p_request ->> 'seal') IS DISTINCT FROM memgov.standby_read_seal(v_read) THEN
        RAISE EXCEPTION 'memgov: not a read of a standby of this database: its seal does not match'
            USING ERRCODE = '42501',
                  HINT = 'only memgov.search and memgov.get on a standby send reads to log';
    END IF;
    -- sealed: memgov made it, on this database or a physical copy of it. Fresh and new:
    v_sent_at := (v_read ->> 'sent_at')::timestamptz;
    IF v_sent_at NOT BETWEEN clock_timestamp() - interval '5 minutes' AND clock_timestamp() + interval '5 minutes' THEN
        RAISE EXCEPTION 'memgov: a standby''s read sent at % is not logged: it is more than five minutes away', v_sent_at
            USING ERRCODE = '42501',
                  HINT = 'a read is logged within five minutes of being sent: check the clocks of primary and standby';
    END IF;
    DELETE FROM memgov.standby_reads r WHERE r.received_at < clock_timestamp() - interval '10 minutes';
    INSERT INTO memgov.standby_reads (nonce) VALUES ((v_read ->> 'nonce')::uuid) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: this standby read (nonce %) is logged already', v_read ->> 'nonce'
            USING ERRCODE = '42501', HINT = 'each read is logged once';
    END IF;
    -- what a standby of a copy of this database could claim: a login and role of this cluster
    IF v_operation IS DISTINCT FROM 'search' AND v_operation IS DISTINCT FROM 'get'
       OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = v_login AND r.rolcanlogin)
       OR to_regrole(quote_ident(v_actor)) IS NULL
       OR NOT pg_catalog.pg_has_role(v_login, v_actor, 'MEMBER')
       OR NOT (pg_catalog.pg_has_role(v_actor, 'memgov_writer', 'MEMBER')
               OR pg_catalog.pg_has_role(v_actor, 'memgov_reviewer', 'MEMBER')
               OR pg_catalog.pg_has_role(v_actor, 'memgov_admin', 'MEMBER')) THEN
        RAISE EXCEPTION 'memgov: a standby''s % as % (login %) is not a read that role may make here',
                        v_operation, v_actor, v_login
            USING ERRCODE = '42501', HINT = 'the login must exist on the primary and be a member of the role';
    END IF;
    PERFORM memgov.check_tenant_id(v_org_id);
    IF memgov.binding_on() AND NOT pg_catalog.pg_has_role(v_actor, 'memgov_admin', 'MEMBER')
       AND NOT EXISTS (SELECT FROM memgov.tenant_grants g
                        WHERE g.org_id = v_org_id
                          AND coalesce(pg_catalog.pg_has_role(v_login, to_regrole(quote_ident(g.role_name)), 'MEMBER'),
                                       false)) THEN
        RAISE EXCEPTION 'memgov: login % is not bound to tenant %', v_login, v_org_id
            USING ERRCODE = '42501',
                  HINT = 'an administrator binds logins to tenants: memgov tenant grant ROLE ORG';
    END IF;
    v_decision := jsonb_populate_record(NULL::memgov.decision, v_read -> 'decision');
    v_item := memgov.item_from_json(jsonb_build_object('org_id', v_org_id, 'memory_id', v_read -> 'memory_id'));
    v_outcome := memgov.govern(v_operation, v_item, v_actor, v_decision, NULL::memgov.shadow_verdict,
                               p_payload => v_read -> 'payload',
                               p_file => coalesce((v_read ->> 'file')::boolean, true),
                               p_raise => false,
                               p_fingerprint => v_read ->> 'fingerprint',
                               p_returned => (v_read ->> 'returned')::integer,
                               p_withheld => (v_read ->> 'withheld')::integer,
                               p_login => v_login);
    RETURN jsonb_build_object('decision_id', v_outcome.decision_id, 'request_id', v_outcome.request_id,
                              'quarantine_id', v_outcome.quarantine_id);
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.log_standby_read(jsonb) TO memgov_standby_logger;

CREATE OR REPLACE FUNCTION memgov.setup_standby_logger(p_host text, p_port integer, p_dbname text, p_login text, p_password text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_dblink  text := memgov.dblink_schema();
    v_other   text;
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) THEN
        RAISE EXCEPTION 'memgov: the standby logger is set up by a superuser'
            USING ERRCODE = '42501';
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'memgov: the standby logger is set up on the primary: this server is a standby'
            USING ERRCODE = '25006', HINT = 'run it on the primary; it replicates to every standby';
    END IF;
    IF coalesce(p_password, '') = '' OR p_host IS NULL OR p_dbname IS NULL OR p_login IS NULL THEN
        RAISE EXCEPTION 'memgov: the standby logger needs the primary''s host and database, a login and a password'
            USING ERRCODE = '22023';
    END IF;
    IF v_dblink IS NULL THEN
        CREATE SCHEMA memgov_dblink;
        REVOKE ALL ON SCHEMA memgov_dblink FROM PUBLIC;
        CREATE EXTENSION dblink SCHEMA memgov_dblink;
        REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA memgov_dblink FROM PUBLIC;
        v_dblink := 'memgov_dblink';
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace = v_dblink::regnamespace
                     AND (p.proacl IS NULL
                          OR EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0))) THEN
        -- a client that may call dblink could use the connection memgov keeps open in its session
        RAISE EXCEPTION 'memgov: dblink is installed in schema % and every role may call it', v_dblink
            USING ERRCODE = '42501',
                  HINT = pg_catalog.format('REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC (and grant it to '
                                           'the roles that need it), then run this again', v_dblink);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO memgov_owner', v_dblink);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO memgov_owner', v_dblink);

    -- the login: memgov_standby_logger's alone
    IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = p_login) THEN
        SELECT string_agg(g.rolname, ', ') INTO v_other
          FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
         WHERE m.member = to_regrole(quote_ident(p_login)) AND g.rolname <> 'memgov_standby_logger';
        IF v_other IS NOT NULL OR (SELECT r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls
                                     FROM pg_catalog.pg_roles r WHERE r.rolname = p_login) THEN
            RAISE EXCEPTION 'memgov: % may do more than log standby reads (%)', p_login,
                            coalesce('a member of ' || v_other, 'attributes')
                USING ERRCODE = '42501', HINT = 'give the standby logger a login of its own';
        END IF;
        EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', p_login, p_password);
    ELSE
        EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', p_login, p_password);
    END IF;
    EXECUTE format('GRANT memgov_standby_logger TO %I', p_login);

    -- the server and memgov_owner's way in (a new setup replaces the old one)
    DROP SERVER IF EXISTS memgov_primary CASCADE;
    EXECUTE format('CREATE SERVER memgov_primary FOREIGN DATA WRAPPER dblink_fdw OPTIONS (host %L, port %L, dbname %L)',
                   p_host, coalesce(p_port, 5432)::text, p_dbname);
    GRANT USAGE ON FOREIGN SERVER memgov_primary TO memgov_owner;
    EXECUTE format('CREATE USER MAPPING FOR memgov_owner SERVER memgov_primary OPTIONS (user %L, password %L)',
                   p_login, p_password);
    RETURN jsonb_build_object('server', 'memgov_primary', 'host', p_host, 'port', coalesce(p_port, 5432),
                              'dbname', p_dbname, 'login', p_login, 'dblink_schema', v_dblink);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.remove_standby_logger()
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_found  boolean := EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary');
BEGIN
    DROP SERVER IF EXISTS memgov_primary CASCADE;
    RETURN v_found;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.standby_logger_status()
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_dblink  text := memgov.dblink_schema();
    v_server  pg_catalog.pg_foreign_server;
    v_status  jsonb;
    v_may     boolean;
BEGIN
    SELECT * INTO v_server FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary';
    v_status := jsonb_build_object(
        'standby', pg_catalog.pg_is_in_recovery(),
        'configured', v_server.oid IS NOT NULL,
        'options', (SELECT jsonb_object_agg(o.option_name, o.option_value)
                      FROM pg_catalog.pg_options_to_table(v_server.srvoptions) AS o),
        'dblink_schema', v_dblink,
        'public_dblink', v_dblink IS NOT NULL AND EXISTS (
            SELECT FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = v_dblink::regnamespace
               AND (p.proacl IS NULL OR EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0))),
        'user_mapping', EXISTS (SELECT FROM pg_catalog.pg_user_mappings u
                                 WHERE u.srvname = 'memgov_primary' AND u.usename = 'memgov_owner'));
    IF v_server.oid IS NULL OR v_dblink IS NULL THEN
        RETURN v_status;
    END IF;
    BEGIN
        EXECUTE format('SELECT t.may FROM %I.dblink(%L, %L) AS t(may boolean)', v_dblink, 'memgov_primary',
                       'SELECT pg_catalog.has_function_privilege(''memgov.log_standby_read(jsonb)'', ''EXECUTE'')')
            INTO v_may;
        RETURN v_status || jsonb_build_object('reachable', true, 'may_log', v_may);
    EXCEPTION WHEN OTHERS THEN
        RETURN v_status || jsonb_build_object('reachable', false, 'error', pg_catalog.rtrim(SQLERRM, E'\n'));
    END;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.standby_logger_status() TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.drop_vectors()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE memgov.memory_vectors;
    ELSE
        DELETE FROM memgov.memory_vectors v
         USING gone g
         WHERE v.memory_id = g.memory_id AND v.org_id = g.org_id;
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.store_vectors(memory_id uuid, fact_text text, paths text[], vectors real[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_memory_id  uuid := $1;
    v_text       text := $2;
    v_paths      text[] := $3;
    v_vectors    real[] := $4;
    v_org        text := memgov.session_tenant();
    v_item       memgov.long_term_memory_items;
    v_hash       bytea;
    v_held       bytea[];
    v_decided    boolean;
    v_xact       bigint := pg_current_xact_id()::text::bigint;
    v_count      integer;
BEGIN
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = v_memory_id AND m.org_id = v_org
       FOR UPDATE;
    -- what the caller may not see looks like what does not exist (as for a SELECT)
    IF v_item.memory_id IS NULL
       OR (v_item.status = 'pending_approval' AND NOT memgov.written_here(v_item))
       OR (v_item.status = 'active' AND memgov.reads_governed(v_org)
           AND NOT memgov.get_allowed(v_item) AND NOT memgov.written_here(v_item)) THEN
        PERFORM memgov.check_found('memory', v_memory_id, NULL);
    END IF;
    IF v_text IS NULL OR v_paths IS NULL OR v_vectors IS NULL THEN
        RAISE EXCEPTION 'memgov: store_vectors needs a text, paths and vectors' USING ERRCODE = '22023';
    END IF;
    v_hash := sha256(convert_to(v_text, 'UTF8'));
    -- the texts of the memory's held updates: what it may hold once a reviewer approves
    SELECT coalesce(array_agg(sha256(convert_to(r.payload ->> 'fact_text', 'UTF8'))), '{}') INTO v_held
      FROM memgov.approval_requests r
     WHERE r.memory_id = v_memory_id AND r.org_id = v_org AND r.status = 'pending'
       AND r.operation = 'update' AND r.payload ? 'fact_text';
    IF cardinality(v_paths) > 0 AND (array_ndims(v_vectors) IS DISTINCT FROM 2
                                     OR array_length(v_vectors, 1) <> cardinality(v_paths)
                                     OR array_length(v_vectors, 2) > 16000) THEN
        RAISE EXCEPTION 'memgov: vectors must be one row per path (% paths), of at most 16000 dimensions',
                        cardinality(v_paths)
            USING ERRCODE = '22023';
    END IF;
    IF array_position(v_paths, NULL) IS NOT NULL
       OR (SELECT count(DISTINCT p) <> count(*) FROM unnest(v_paths) AS p)
       OR EXISTS (SELECT FROM unnest(v_vectors) AS x
                   WHERE x IS NULL OR x IN ('NaN'::real, 'Infinity'::real, '-Infinity'::real)) THEN
        RAISE EXCEPTION 'memgov: paths must be distinct and not NULL, vectors finite numbers'
            USING ERRCODE = '22023';
    END IF;
    -- the write this transaction's decision stored (the row's decision) or held (a request's)
    IF v_text = v_item.fact_text THEN
        v_decided := EXISTS (SELECT FROM memgov.decision_log d
                              WHERE d.org_id = v_org AND d.decision_id = v_item.decision_id AND d.xact_id = v_xact);
    END IF;
    IF NOT coalesce(v_decided, false) THEN
        v_decided := EXISTS (SELECT FROM memgov.approval_requests r
                               JOIN memgov.decision_log d ON d.org_id = r.org_id AND d.decision_id = r.decision_id
                              WHERE r.memory_id = v_memory_id AND r.org_id = v_org AND r.status = 'pending'
                                AND r.operation = 'update' AND r.payload ->> 'fact_text' = v_text
                                AND d.xact_id = v_xact);
    END IF;
    IF NOT v_decided THEN
        RAISE EXCEPTION 'memgov: no write of this transaction stored or held this text of memory %', v_memory_id
            USING ERRCODE = '42501',
                  HINT = 'a put stores its vectors in its own transaction, right after the write memgov decided';
    END IF;
    -- the previous vectors of this text, and those of texts that can no longer be the memory's
    DELETE FROM memgov.memory_vectors v
     WHERE v.memory_id = v_memory_id AND v.org_id = v_org
       AND (v.content_hash = v_hash
            OR NOT (v.content_hash = sha256(convert_to(v_item.fact_text, 'UTF8')) OR v.content_hash = ANY (v_held)));
    INSERT INTO memgov.memory_vectors (memory_id, org_id, content_hash, path, vector, norm)
    SELECT v_memory_id, v_org, v_hash, v_paths[i], r.vector,
           (SELECT sqrt(coalesce(sum(x::float8 * x), 0)) FROM unnest(r.vector) AS x)
      FROM generate_subscripts(v_paths, 1) AS i
     CROSS JOIN LATERAL (SELECT v_vectors[i:i][:] AS slice) s
     CROSS JOIN LATERAL (SELECT ARRAY(SELECT unnest(s.slice)) AS vector) r;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.store_vectors(uuid,text,text[],real[]) TO memgov_writer;

CREATE OR REPLACE FUNCTION memgov.store_vector_search(prefix text, query double precision[], distance text DEFAULT 'cosine'::text, filters jsonb DEFAULT '[]'::jsonb, "limit" integer DEFAULT 10, "offset" integer DEFAULT 0)
 RETURNS TABLE(namespace text, key text, value text, created_at timestamp with time zone, updated_at timestamp with time zone, score double precision)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_prefix    text := coalesce($1, '');
    v_query     double precision[] := $2;
    v_distance  text := $3;
    v_filters   jsonb := coalesce($4, '[]');
    v_org       text := memgov.session_tenant();
    v_qnorm     double precision;
    v_dims      integer := cardinality($2);
BEGIN
    IF v_distance IS NULL OR v_distance NOT IN ('cosine', 'inner_product', 'l2') THEN
        RAISE EXCEPTION 'memgov: distance must be cosine, inner_product or l2, not %', v_distance
            USING ERRCODE = '22023';
    END IF;
    IF array_ndims(v_query) IS DISTINCT FROM 1 OR array_position(v_query, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'memgov: the query vector must be one row of numbers' USING ERRCODE = '22023';
    END IF;
    v_qnorm := (SELECT sqrt(sum(x * x)) FROM unnest(v_query) AS x);
    -- Each vector's dot product with the query is a scalar subquery over the two arrays side
    -- by side (measured: half the cost of the same sum as a LATERAL join); an item's score is
    -- the best of its vectors of its current text.
    RETURN QUERY
    SELECT s.namespace, s.item_key, s.fact_text, s.created_at, s.updated_at, s.score
      FROM (SELECT m.namespace, m.item_key, m.fact_text, m.created_at, m.updated_at,
                   (SELECT max(CASE v_distance
                               WHEN 'cosine' THEN CASE WHEN d.norm > 0 AND v_qnorm > 0
                                                       THEN d.dot / (d.norm * v_qnorm) ELSE 0 END
                               WHEN 'inner_product' THEN d.dot
                               -- |v - q|² = |v|² + |q|² - 2 v·q, never below 0 by rounding
                               ELSE -sqrt(greatest(d.norm * d.norm + v_qnorm * v_qnorm - 2 * d.dot, 0))
                               END)
                      FROM (SELECT v.norm, (SELECT sum(e.x * e.y) FROM unnest(v.vector, v_query) AS e(x, y)) AS dot
                              FROM memgov.memory_vectors v
                             WHERE v.memory_id = m.memory_id AND v.org_id = m.org_id
                               AND v.content_hash = sha256(convert_to(m.fact_text, 'UTF8'))
                               AND cardinality(v.vector) = v_dims) d) AS score
              FROM memgov.long_term_memory_items m
             WHERE m.org_id = v_org AND m.namespace IS NOT NULL
               AND (v_prefix = '' OR m.namespace = v_prefix OR starts_with(m.namespace, v_prefix || '.'))
               AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
               AND NOT EXISTS (
                   SELECT FROM jsonb_to_recordset(v_filters) AS f(path text, op text, val jsonb)
                    CROSS JOIN LATERAL (SELECT (m.fact_text::jsonb) -> f.path AS x) j
                    WHERE NOT coalesce(CASE f.op
                                           WHEN '$eq' THEN j.x = f.val
                                           WHEN '$ne' THEN j.x <> f.val
                                           WHEN '$gt' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x > f.val
                                           WHEN '$gte' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x >= f.val
                                           WHEN '$lt' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x < f.val
                                           WHEN '$lte' THEN jsonb_typeof(j.x) = jsonb_typeof(f.val) AND j.x <= f.val
                                       END, false))
            OFFSET 0) s  -- a fence: pulled up, the score would be computed twice (output, filter)
     WHERE s.score IS NOT NULL
     ORDER BY s.score DESC, s.updated_at DESC, s.namespace, s.item_key
     LIMIT $5 OFFSET $6;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.store_vector_search(text,double precision[],text,jsonb,integer,integer) TO memgov_writer, memgov_reviewer, memgov_admin;

CREATE OR REPLACE FUNCTION memgov.ttl_due(p_item memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT p_item.expires_at <= pg_catalog.now() AND (p_item.retention_policy <> 'permanent_until_revoked' OR p_item.ttl_minutes IS NOT NULL)
$function$;

GRANT EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.sweep_batch(p_run_id bigint, p_kind text, p_batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_batch    tid[];     -- the locked rows, and what the log says of each
    v_ids      uuid[];
    v_orgs     text[];
    v_rules    text[];
    v_taken    integer := 0;
    v_deleted  integer := 0;
    v_more     boolean;
    v_path     text[];
    v_cutoff   timestamptz;
BEGIN
    PERFORM memgov.check_lease();
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE memgov.ttl_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.expires_at
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'confidence' THEN
        -- the loosest grace of any active policy (or the default, for tenants that have
        -- none) bounds the index scan; each row is then held to its own tenant's grace and floor
        SELECT now() - least((memgov.setting_defaults() #>> '{retention,confidence_grace}')::interval,
                             min(memgov.retention_interval(v.org_id, 'confidence_grace')))
          INTO v_cutoff
          FROM memgov.policy_versions v
         WHERE v.active;
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE d.low_confidence_since <= v_cutoff
                   AND memgov.confidence_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.low_confidence_since
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'auto_delete' THEN
        -- the rows the rules may match, from the index ranges that hold them, else the whole
        -- table in physical order (memgov.auto_delete_batch, sql/072_retention_candidates.sql)
        SELECT a.batch, a.ids, a.orgs, a.rules, a.more INTO v_batch, v_ids, v_orgs, v_rules, v_more
          FROM memgov.auto_delete_batch(p_run_id, p_batch_size) AS a;
    ELSIF p_kind = 'approvals' THEN
        -- expired requests, each locked without waiting, and a held INSERT's with the pending row
        -- its decision stored (decision_id), locked the same way: a request or row that a session
        -- holds (a client's SELECT ... FOR UPDATE, a call inside its open transaction) waits for a
        -- later run, and another pending row under the same memory_id is never this request's
        SELECT array_agg(b.request_id), array_agg(b.org_id), array_agg(b.ctid)
          INTO v_ids, v_orgs, v_batch
          FROM (SELECT r.request_id, r.org_id, m.ctid
                  FROM memgov.approval_requests r
                  JOIN memgov.long_term_memory_items m
                    ON m.memory_id = r.memory_id AND m.org_id = r.org_id
                   AND m.status = 'pending_approval' AND m.decision_id = r.decision_id
                 WHERE r.operation = 'remember' AND memgov.approval_expired(r)
                 LIMIT p_batch_size
                   FOR UPDATE OF r, m SKIP LOCKED) AS b;
        -- the others: held updates, forgets and reads, and held INSERTs whose row is gone
        SELECT coalesce(v_ids, '{}') || coalesce(array_agg(b.request_id), '{}'),
               coalesce(v_orgs, '{}') || coalesce(array_agg(b.org_id), '{}')
          INTO v_ids, v_orgs
          FROM (SELECT r.request_id, r.org_id
                  FROM memgov.approval_requests r
                 WHERE memgov.approval_expired(r)
                   AND (r.operation <> 'remember'
                        OR NOT EXISTS (SELECT FROM memgov.long_term_memory_items m
                                        WHERE m.memory_id = r.memory_id AND m.org_id = r.org_id
                                          AND m.status = 'pending_approval' AND m.decision_id = r.decision_id))
                 LIMIT p_batch_size - coalesce(cardinality(v_batch), 0)
                   FOR UPDATE SKIP LOCKED) AS b;
        UPDATE memgov.approval_requests r
           SET status = 'expired', decided_at = now(), decided_by = 'memgov', note = 'approval_ttl passed'
          FROM unnest(v_ids, v_orgs) AS e (request_id, org_id)
         WHERE r.request_id = e.request_id AND r.org_id = e.org_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        -- a held INSERT that nobody approved goes with its request
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        v_taken := v_deleted;
    ELSE
        RAISE EXCEPTION 'unknown sweep kind %', p_kind USING ERRCODE = '22023';
    END IF;

    IF p_kind <> 'approvals' THEN
        -- the batch through a subquery, whose size the planner cannot see: it looks the tids up
        -- (a TID scan); shown an array of thousands of tids, it would scan the whole table
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> coalesce(cardinality(v_batch), 0) THEN
            RAISE EXCEPTION 'memgov: the sweep deleted % of the % rows it had locked', v_deleted, cardinality(v_batch)
                USING ERRCODE = 'XX000';
        END IF;
        -- the ids in order: the GIN index sorts a row's ids before it stores them, and a sorted
        -- array costs that sort a single pass
        INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
        SELECT b.org_id, p_kind, b.rule_id, memgov.policy_settings(b.org_id) ->> 'version', p_run_id,
               count(*), array_agg(b.memory_id ORDER BY b.memory_id)
          FROM unnest(v_ids, v_orgs, v_rules) AS b (memory_id, org_id, rule_id)
         GROUP BY b.org_id, b.rule_id;
        -- auto_delete: a full batch while candidates remain, whatever it deleted
        v_taken := CASE WHEN p_kind <> 'auto_delete' THEN v_deleted
                        WHEN v_more THEN p_batch_size ELSE 0 END;
    END IF;

    v_path := CASE p_kind WHEN 'approvals' THEN ARRAY['expired', 'approvals'] ELSE ARRAY['deleted', p_kind] END;
    UPDATE memgov.maintenance_runs
       SET summary = jsonb_set(summary, v_path, to_jsonb(coalesce((summary #>> v_path)::bigint, 0) + v_deleted))
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_taken;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.retention_preview()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT jsonb_build_object(
        'deleted', jsonb_build_object(
            'ttl',         count(*) FILTER (WHERE d.reason = 'ttl'),
            'confidence',  count(*) FILTER (WHERE d.reason = 'confidence'),
            'auto_delete', count(*) FILTER (WHERE d.reason = 'auto_delete')),
        'expired', jsonb_build_object(
            'approvals', (SELECT count(*) FROM memgov.approval_requests r WHERE memgov.approval_expired(r))))
      FROM (SELECT memgov.due_reason(m) AS reason
              FROM memgov.long_term_memory_items m
             WHERE m.retention_policy <> 'permanent_until_revoked' OR m.ttl_minutes IS NOT NULL) AS d
$function$;

CREATE OR REPLACE FUNCTION memgov.finish_maintenance(p_run_id bigint, p_preview jsonb DEFAULT NULL::jsonb, p_cron_pruned bigint DEFAULT 0)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_summary  jsonb;
    v_now      timestamptz := clock_timestamp();  -- a dry run's preview ran in this transaction
BEGIN
    PERFORM memgov.check_lease();
    UPDATE memgov.maintenance_runs
       SET status = 'finished', finished_at = v_now,
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks' - 'range')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
    RETURNING summary INTO v_summary;
    RETURN v_summary;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.apply_retention(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

RESET ROLE;
CREATE OR REPLACE FUNCTION memgov.cron_settings(OUT cron_database text, OUT log_run text, OUT readable boolean)
 RETURNS record
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    -- a config file may still set cron.* after pg_cron left shared_preload_libraries: such a
    -- placeholder has context 'user'; pg_cron's own settings are 'postmaster' ones
    SELECT (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.database_name' AND s.context = 'postmaster'),
           (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.log_run' AND s.context = 'postmaster'),
           pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')
$function$;
ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader;
REVOKE ALL ON FUNCTION memgov.cron_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO memgov_admin;
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.auto_delete_anchors(OUT org_id text, OUT rule_id text, OUT anchor text, OUT confidence_bound numeric, OUT created_bound timestamp with time zone)
 RETURNS SETOF record
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT r.org_id, r.rule_id,
           CASE WHEN c.bound <= 0.5 THEN 'confidence' WHEN t.bound IS NOT NULL THEN 'created_at' END,
           CASE WHEN c.bound <= 0.5 THEN c.bound END,
           CASE WHEN c.bound <= 0.5 THEN NULL ELSE t.bound END
      FROM memgov.memory_policy_rules r
      JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
     CROSS JOIN LATERAL (
           SELECT min((x ->> 'value')::numeric)
                      FILTER (WHERE x ->> 'field' = 'confidence' AND jsonb_typeof(x -> 'value') = 'number')
                      AS bound
             FROM jsonb_array_elements(r.condition -> 'conditions') AS x
            WHERE x ->> 'operator' IN ('lt', 'lte')) AS c
     CROSS JOIN LATERAL (
           SELECT min(CASE jsonb_typeof(x -> 'value')
                          WHEN 'object' THEN now() - (x -> 'value' ->> 'older_than')::interval
                          ELSE (x ->> 'value')::timestamptz END)
                      FILTER (WHERE x ->> 'field' = 'created_at'
                                AND (jsonb_typeof(x -> 'value') = 'string' OR x -> 'value' ? 'older_than'))
                      AS bound
             FROM jsonb_array_elements(r.condition -> 'conditions') AS x
            WHERE x ->> 'operator' IN ('lt', 'lte')) AS t
     WHERE v.active AND r.action = 'auto_delete'
       -- a rule whose tests are alternatives (match any) is bounded by none of them
       AND (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
    UNION ALL
    SELECT r.org_id, r.rule_id, NULL, NULL, NULL
      FROM memgov.memory_policy_rules r
      JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
     WHERE v.active AND r.action = 'auto_delete'
       AND NOT (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
$function$;
GRANT EXECUTE ON FUNCTION memgov.auto_delete_anchors() TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.auto_delete_batch(p_run_id bigint, p_batch_size integer, OUT batch tid[], OUT ids uuid[], OUT orgs text[], OUT rules text[], OUT more boolean)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_sort TO 'off'
AS $function$
DECLARE
    v_cursor   jsonb;
    v_walk     boolean;
    v_conf     numeric;
    v_cut      timestamptz;
    v_step     text;
    v_keys     numeric[];
    v_times    timestamptz[];
    v_block    bigint;
    v_blocks   bigint;
    v_width    bigint;
    v_bound    numeric;
BEGIN
    PERFORM memgov.check_lease();
    more := false;
    SELECT bool_or(a.anchor IS NULL), max(a.confidence_bound), max(a.created_bound)
      INTO v_walk, v_conf, v_cut
      FROM memgov.auto_delete_anchors() AS a;
    IF v_walk IS NULL THEN
        RETURN;  -- no active policy has an auto_delete rule: nothing to read
    END IF;
    -- where the run is: the index range being read and its last key ('range'), or the walk's
    -- block and the blocks it walks ('cursor', 'blocks', which `memgov retention run` shows)
    SELECT CASE WHEN v_walk THEN jsonb_build_object('block', r.summary -> 'cursor', 'blocks', r.summary -> 'blocks')
                ELSE r.summary -> 'range' END
      INTO v_cursor
      FROM memgov.maintenance_runs r WHERE r.org_id = '*' AND r.run_id = p_run_id;

    IF NOT v_walk THEN
        v_step := coalesce(v_cursor ->> 'step', CASE WHEN v_conf IS NOT NULL THEN 'confidence' ELSE 'created_at' END);
        IF v_step = 'confidence' AND v_conf IS NULL THEN
            v_step := 'created_at';  -- the policy changed during the run: start the other range
            v_cursor := NULL;
        END IF;
        IF v_step = 'confidence' THEN
            -- (the partial index's own predicate is repeated, so that the planner may use it)
            SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id),
                   array_agg(b.confidence)
              INTO batch, ids, orgs, rules, v_keys
              FROM (SELECT d.ctid, d.memory_id, d.org_id, d.confidence, memgov.retention_rule(d) AS rule_id
                      FROM memgov.long_term_memory_items d
                     WHERE d.retention_policy <> 'permanent_until_revoked' AND d.confidence <= 0.5
                       AND d.confidence <= v_conf
                       AND (d.confidence, d.memory_id)
                           >= (coalesce((v_cursor ->> 'key')::numeric, -1),
                               coalesce((v_cursor ->> 'memory_id')::uuid, '00000000-0000-0000-0000-000000000000'))
                       AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                     ORDER BY d.confidence, d.memory_id
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED) AS b;
            v_cursor := CASE WHEN cardinality(batch) >= p_batch_size
                             THEN jsonb_build_object('step', 'confidence', 'key', v_keys[cardinality(v_keys)],
                                                     'memory_id', ids[cardinality(ids)])
                             WHEN v_cut IS NOT NULL THEN jsonb_build_object('step', 'created_at') END;
        ELSE
            SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id),
                   array_agg(b.created_at)
              INTO batch, ids, orgs, rules, v_times
              FROM (SELECT d.ctid, d.memory_id, d.org_id, d.created_at, memgov.retention_rule(d) AS rule_id
                      FROM memgov.long_term_memory_items d
                     WHERE d.retention_policy <> 'permanent_until_revoked'
                       AND d.created_at <= v_cut
                       AND (d.created_at, d.memory_id)
                           >= (coalesce((v_cursor ->> 'key')::timestamptz, '-infinity'),
                               coalesce((v_cursor ->> 'memory_id')::uuid, '00000000-0000-0000-0000-000000000000'))
                       AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                     ORDER BY d.created_at, d.memory_id
                     LIMIT p_batch_size
                       FOR UPDATE SKIP LOCKED) AS b;
            v_cursor := CASE WHEN cardinality(batch) >= p_batch_size
                             THEN jsonb_build_object('step', 'created_at', 'key', v_times[cardinality(v_times)],
                                                     'memory_id', ids[cardinality(ids)]) END;
        END IF;
    ELSE
        -- some rule no index bounds: walk the table once per run in physical order (a TID range
        -- scan), up to the size the table had when the walk began. A batch reads at most four
        -- times p_batch_size rows' worth of blocks (reading is cheap, a batch's commit and
        -- bookkeeping are not) and takes at most p_batch_size of them; a full batch ends the
        -- step at the block of its last row
        v_block := (v_cursor ->> 'block')::bigint;
        v_blocks := (v_cursor ->> 'blocks')::bigint;
        IF v_block IS NULL OR v_blocks IS NULL THEN
            v_block := 0;
            v_blocks := pg_relation_size('memgov.long_term_memory_items') / current_setting('block_size')::bigint;
        END IF;
        v_bound := memgov.auto_delete_confidence_bound();
        SELECT greatest(1, ceil(4.0 * p_batch_size / CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                                    THEN c.reltuples / c.relpages ELSE 50 END))::bigint
          INTO v_width
          FROM pg_class c WHERE c.oid = 'memgov.long_term_memory_items'::regclass;
        -- (the rule is named from the locked version of the row)
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id)
          INTO batch, ids, orgs, rules
          FROM (SELECT d.ctid, d.memory_id, d.org_id, memgov.retention_rule(d) AS rule_id
                  FROM memgov.long_term_memory_items d
                 WHERE d.ctid >= ('(' || v_block || ',0)')::tid
                   AND d.ctid < ('(' || (v_block + v_width) || ',0)')::tid
                   AND (v_bound IS NULL OR d.confidence <= v_bound)
                   AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
        -- a TID range scan returns rows in ctid order: a full batch resumes at its last row's
        -- block (its rows are deleted by then; the block's others are read again, so each full
        -- batch moves on by p_batch_size deletions), any other ends the step
        v_block := CASE WHEN cardinality(batch) >= p_batch_size
                        THEN (batch[cardinality(batch)]::text::point)[0]::bigint
                        ELSE v_block + v_width END;
        more := v_block < v_blocks;
        UPDATE memgov.maintenance_runs
           SET summary = CASE WHEN more THEN summary || jsonb_build_object('cursor', v_block, 'blocks', v_blocks)
                              ELSE summary - 'cursor' - 'blocks' END
         WHERE org_id = '*' AND run_id = p_run_id;
        RETURN;
    END IF;
    more := v_cursor IS NOT NULL;
    UPDATE memgov.maintenance_runs
       SET summary = CASE WHEN more THEN summary || jsonb_build_object('range', v_cursor) ELSE summary - 'range' END
     WHERE org_id = '*' AND run_id = p_run_id;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.item_expiry(p_item memgov.long_term_memory_items, p_ttl_end timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT least(memgov.expiry_of(p_item.retention_policy, p_item.created_at),
                 CASE WHEN p_item.ttl_minutes IS NOT NULL THEN p_ttl_end END)
$function$;

CREATE OR REPLACE FUNCTION memgov.refresh_ttl(memory_ids uuid[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION memgov.refresh_ttl(uuid[]) TO memgov_writer, memgov_admin;

CREATE OR REPLACE FUNCTION memgov.sweep_expired(batch_size integer DEFAULT 1000)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION memgov.sweep_expired(integer) TO memgov_writer, memgov_admin;

CREATE OR REPLACE FUNCTION memgov.refuse_log_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.settings_change_hash(p_prev_hash bytea, p_change_id bigint, p_changed_at timestamp with time zone, p_login text, p_actor text, p_name text, p_old_value bigint, p_new_value bigint)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-settings-v1 %s %s %s %s %s %s %s',
                      p_change_id, EXTRACT(epoch FROM p_changed_at), pg_catalog.quote_literal(p_login),
                      pg_catalog.quote_literal(p_actor), pg_catalog.quote_literal(p_name),
                      coalesce(p_old_value::text, 'NULL'), coalesce(p_new_value::text, 'NULL')), 'UTF8'))
$function$;

CREATE OR REPLACE FUNCTION memgov.record_setting_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.guard_settings()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.seal_hash(p_prev_hash bytea, p_seal_id bigint, p_after_xact_id bigint, p_after_decision_id bigint, p_last_xact_id bigint, p_last_decision_id bigint, p_settings_change_id bigint, p_settings_hash bytea, p_decision_ids bigint[], p_row_digests bytea)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-seal-v2 %s %s:%s %s:%s %s:%s %s',
                      p_seal_id, p_after_xact_id, p_after_decision_id, p_last_xact_id, p_last_decision_id,
                      p_settings_change_id, pg_catalog.encode(p_settings_hash, 'hex'),
                      pg_catalog.array_to_string(p_decision_ids, ',')), 'UTF8')
               || p_row_digests)
$function$;

CREATE OR REPLACE FUNCTION memgov.seal_decision_log(p_batch_rows integer DEFAULT 10000, p_run_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.verify_decision_log(p_anchor_seal_id bigint DEFAULT NULL::bigint, p_anchor_hash text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.archive_decision_log(p_before timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
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
$function$;

DROP FUNCTION memgov.mark_written(memgov.long_term_memory_items,text);

DROP FUNCTION memgov.row_token(memgov.long_term_memory_items);

DROP FUNCTION memgov.refuse_read(text,text,uuid,jsonb,text,memgov.decision,bigint);

DROP FUNCTION memgov.log_read(text,memgov.long_term_memory_items,text,memgov.decision,memgov.shadow_verdict,text,integer,integer);

DROP FUNCTION memgov.forget_samples();

DROP FUNCTION memgov.engine_columns();

DROP FUNCTION memgov.record_write(text,memgov.long_term_memory_items,text,memgov.decision);

DROP FUNCTION memgov.log_decision(text,uuid,text,text,memgov.decision);

DROP FUNCTION memgov.install_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb);

DROP FUNCTION memgov.stage_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb);

DROP FUNCTION memgov.activate_policy(text,text);

RESET ROLE;
-- generated routines: end

SET ROLE memgov_owner;
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items))
    WITH CHECK (true);
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
CREATE TRIGGER refuse_delete
    BEFORE DELETE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_delete();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER flush_inserted;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER flush_updated;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER refuse_delete;
RESET ROLE;

-- policy_activations also records a policy revision's deploy of the version active already
COMMENT ON TABLE memgov.policy_activations IS
    'Every change of the active policy version of an org_id (''*'' = global), and every deploy '
    'of a policy revision, in activation_id order';

-- A read claims no source: the sources: check of a decide function compiled by compiler 1
-- tested every operation, reads included. It is rewritten here into the check compiler 2
-- writes (memgov_pg/compiler.py SOURCE_CHECK_COMMENT, SOURCE_CHECK_TEST: remember, update and
-- forget only), in every deployed version and its compiled_sql, and memgov.decide, which
-- carries the global body, is generated anew. The check follows the routing marker, which a
-- body holds once, and no policy value spans lines: the two lines are found nowhere else.
SET ROLE memgov_owner;
DO $sources$
DECLARE
    v_old      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source\n'
                                 || '    IF p_item.source IN (';
    v_new      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source (writes only: a read claims none)\n'
                                 || '    IF p_operation IN (''remember'', ''update'', ''forget'') AND p_item.source IN (';
    v_version  record;
    v_body     text;
    v_changed  boolean := false;
BEGIN
    FOR v_version IN SELECT org_id, version, function_name FROM memgov.policy_versions ORDER BY org_id, version LOOP
        SELECT p.prosrc INTO v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = pg_catalog.to_regprocedure(
                   pg_catalog.format('memgov.%I(memgov.long_term_memory_items, text, text)', v_version.function_name));
        IF v_body IS NULL OR pg_catalog.strpos(v_body, v_old) = 0 THEN
            CONTINUE;
        END IF;
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION memgov.%I(p_item memgov.long_term_memory_items, '
                                  'p_operation text, p_actor text) RETURNS memgov.decision '
                                  'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                                  v_version.function_name, pg_catalog.replace(v_body, v_old, v_new));
        UPDATE memgov.policy_versions SET compiled_sql = pg_catalog.replace(compiled_sql, v_old, v_new)
         WHERE org_id = v_version.org_id AND version = v_version.version;
        v_changed := true;
    END LOOP;
    IF v_changed THEN
        PERFORM memgov.rebuild_dispatch();
    END IF;
END
$sources$;
RESET ROLE;

-- forget_where (issue 26): the deletion log records what memgov.forget and
-- memgov.forget_where delete (reason 'forgotten')
ALTER TABLE memgov.deletion_log DROP CONSTRAINT deletion_log_reason_check,
    ADD CONSTRAINT deletion_log_reason_check
        CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected', 'forgotten'));
COMMENT ON TABLE memgov.deletion_log IS
    'Memories deleted by retention, rejection or forgetting, a row per batch and tenant: ids, reason, rule; '
    'never the content';

-- monitoring views (issue 30)
-- What a DBA asks at 3 a.m., for memgov_admin and pg_monitor (sql/090_monitoring.sql,
-- docs/monitoring.md).
SET ROLE memgov_owner;

-- Decisions of the last hour (decided_at: BRIN decision_log_xact_id_decided_at_idx).
-- memories counts what a bulk statement's shared decision covers (memory_count).
CREATE VIEW memgov.monitor_decisions AS
SELECT d.org_id,
       d.operation,
       d.action,
       d.enforced,
       count(*) FILTER (WHERE d.decided_at > pg_catalog.now() - interval '1 minute') AS decisions_last_minute,
       count(*) AS decisions_last_hour,
       coalesce(sum(coalesce(d.memory_count, 1)) FILTER (WHERE d.decided_at > pg_catalog.now() - interval '1 minute'),
                0)::bigint AS memories_last_minute,
       sum(coalesce(d.memory_count, 1))::bigint AS memories_last_hour
  FROM memgov.decision_log d
 WHERE d.decided_at > pg_catalog.now() - interval '1 hour'
 GROUP BY d.org_id, d.operation, d.action, d.enforced;
COMMENT ON VIEW memgov.monitor_decisions IS
    'Decisions of the last minute and hour by tenant, operation, action and enforced (monitor mode: false)';

-- Pending approval requests (index approval_requests_pending_idx).
CREATE VIEW memgov.monitor_approvals AS
SELECT r.org_id,
       count(*) AS pending,
       min(r.requested_at) AS oldest_requested_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - min(r.requested_at)) AS oldest_age_seconds
  FROM memgov.approval_requests r
 WHERE r.status = 'pending'
 GROUP BY r.org_id;
COMMENT ON VIEW memgov.monitor_approvals IS 'Pending approval requests by tenant, and the age of the oldest';

-- Quarantine held (index quarantine_held_idx).
CREATE VIEW memgov.monitor_quarantine AS
SELECT q.org_id,
       count(*) AS held,
       min(q.quarantined_at) AS oldest_quarantined_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - min(q.quarantined_at)) AS oldest_age_seconds
  FROM memgov.quarantine q
 WHERE q.status = 'held'
 GROUP BY q.org_id;
COMMENT ON VIEW memgov.monitor_quarantine IS 'Quarantine entries held by tenant, and the age of the oldest';

-- The sweep (memgov.run_maintenance), from memgov's own record of its runs: one row. The
-- last finished run (not a dry run) by the primary key, newest first; the runs after it
-- that are interrupted (killed, or failed: the next run marks them) or still running; the
-- schedule of the active global policy (retention.schedule) and its period in seconds
-- when it is a plain one (every N seconds / minutes, hourly, daily; else NULL).
CREATE VIEW memgov.monitor_sweep AS
WITH last_run AS (
    SELECT r.run_id, r.started_at, r.finished_at, r.summary
      FROM memgov.maintenance_runs r
     WHERE r.org_id = '*' AND r.status = 'finished' AND NOT r.dry_run
     ORDER BY r.run_id DESC
     LIMIT 1
), later AS (
    SELECT count(*) FILTER (WHERE r.status = 'interrupted') AS interrupted,
           min(r.started_at) FILTER (WHERE r.status = 'running') AS running_since
      FROM memgov.maintenance_runs r
     WHERE r.org_id = '*' AND NOT r.dry_run
       AND r.run_id > coalesce((SELECT l.run_id FROM last_run l), 0)
), schedule AS (
    SELECT coalesce((SELECT v.settings #>> '{retention,schedule}'
                       FROM memgov.policy_versions v
                      WHERE v.org_id = '*' AND v.active),
                    memgov.setting_defaults() #>> '{retention,schedule}') AS schedule
)
SELECT l.run_id AS last_run_id,
       l.started_at AS last_started_at,
       l.finished_at AS last_finished_at,
       pg_catalog.date_part('epoch', l.finished_at - l.started_at) AS last_duration_seconds,
       pg_catalog.date_part('epoch', pg_catalog.now() - l.finished_at) AS last_finished_age_seconds,
       coalesce((l.summary #>> '{deleted,ttl}')::bigint, 0)
           + coalesce((l.summary #>> '{deleted,confidence}')::bigint, 0)
           + coalesce((l.summary #>> '{deleted,auto_delete}')::bigint, 0) AS last_deleted,
       coalesce((l.summary #>> '{expired,approvals}')::bigint, 0) AS last_expired_approvals,
       coalesce((l.summary ->> 'sealed')::bigint, 0) AS last_sealed,
       coalesce(a.interrupted, 0) AS interrupted_since,
       a.running_since,
       pg_catalog.date_part('epoch', pg_catalog.now() - a.running_since) AS running_seconds,
       s.schedule,
       CASE
           WHEN s.schedule ~ '^\s*[1-5]?[0-9]\s+seconds?\s*$'
               THEN (pg_catalog.substring(s.schedule, '[0-9]+'))::double precision
           WHEN s.schedule ~ '^\*\s+\*\s+\*\s+\*\s+\*$' THEN 60
           WHEN s.schedule ~ '^\*/[0-9]+\s+\*\s+\*\s+\*\s+\*$'
               THEN 60 * (pg_catalog.substring(s.schedule, '^\*/([0-9]+)'))::double precision
           WHEN s.schedule ~ '^[0-9]+\s+\*\s+\*\s+\*\s+\*$' THEN 3600
           WHEN s.schedule ~ '^[0-9]+\s+\*/[0-9]+\s+\*\s+\*\s+\*$'
               THEN 3600 * (pg_catalog.substring(s.schedule, '^[0-9]+\s+\*/([0-9]+)'))::double precision
           WHEN s.schedule ~ '^[0-9]+\s+[0-9]+\s+\*\s+\*\s+\*$' THEN 86400
       END AS schedule_seconds
  FROM schedule s
  LEFT JOIN last_run l ON true
 CROSS JOIN later a;
COMMENT ON VIEW memgov.monitor_sweep IS
    'The last finished sweep (end, duration, deletions), runs after it interrupted or running, and the schedule';

-- The seal lag: the log's rows after the chain's end (its last seal, else the last archive
-- record), by the BRIN index on xact_id; none sealed yet: every row.
CREATE VIEW memgov.monitor_seal AS
WITH bounds AS (
    SELECT e.seal_id, e.xact_id, e.decision_id, e.sealed_at
      FROM ((SELECT 1 AS pick, s.seal_id, s.last_xact_id AS xact_id, s.last_decision_id AS decision_id, s.sealed_at
               FROM memgov.decision_log_seals s
              WHERE s.org_id = '*'
              ORDER BY s.seal_id DESC
              LIMIT 1)
            UNION ALL
            (SELECT 2, a.last_seal_id, a.last_xact_id, a.last_decision_id, a.archived_at
               FROM memgov.decision_log_archives a
              WHERE a.org_id = '*'
              ORDER BY a.archive_id DESC
              LIMIT 1)
            UNION ALL
            SELECT 3, NULL, 0, 0, NULL) AS e
     ORDER BY e.pick
     LIMIT 1
), unsealed AS (
    SELECT count(*) AS rows, min(d.decided_at) AS oldest
      FROM memgov.decision_log d, bounds b
     WHERE d.xact_id >= b.xact_id
       AND (d.xact_id, d.decision_id) > (b.xact_id, b.decision_id)
)
SELECT b.seal_id AS last_seal_id,
       b.sealed_at AS last_sealed_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - b.sealed_at) AS last_sealed_age_seconds,
       u.rows AS unsealed_rows,
       u.oldest AS oldest_unsealed_at,
       coalesce(pg_catalog.date_part('epoch', pg_catalog.now() - u.oldest), 0) AS oldest_unsealed_age_seconds
  FROM bounds b, unsealed u;
COMMENT ON VIEW memgov.monitor_seal IS
    'The decision log''s seal lag: rows after the last seal, and the age of the oldest of them';

-- Running shadows (index policy_shadows_running_idx) and what their candidate decided
-- (shadow_decisions by its primary key's shadow_id: a global shadow's are every tenant's).
CREATE VIEW memgov.monitor_shadows AS
SELECT s.org_id,
       s.version,
       s.started_at,
       pg_catalog.date_part('epoch', pg_catalog.now() - s.started_at) AS running_seconds,
       count(d.decision_id) AS decisions,
       count(d.decision_id) FILTER (WHERE d.candidate_action <> d.active_action) AS divergences
  FROM memgov.policy_shadows s
  LEFT JOIN memgov.shadow_decisions d ON d.shadow_id = s.shadow_id
 WHERE s.ended_at IS NULL
 GROUP BY s.org_id, s.shadow_id, s.version, s.started_at;
COMMENT ON VIEW memgov.monitor_shadows IS 'Running shadows: their decisions so far and how many diverge';

-- The active version of each scope ('*' = global; index policy_versions_one_active_idx)
-- and its latest activation (policy_activations by its primary key).
CREATE VIEW memgov.monitor_policies AS
SELECT v.org_id,
       v.version,
       v.mode,
       v.sha256,
       v.deployed_at,
       a.activated_at,
       pg_catalog.date_part('epoch', coalesce(a.activated_at, v.deployed_at)) AS activated_epoch
  FROM memgov.policy_versions v
  LEFT JOIN LATERAL (
      SELECT p.activated_at
        FROM memgov.policy_activations p
       WHERE p.org_id = v.org_id AND p.version = v.version
       ORDER BY p.activation_id DESC
       LIMIT 1) a ON true
 WHERE v.active;
COMMENT ON VIEW memgov.monitor_policies IS 'The active policy version of each scope (''*'' = global) and when it was activated';

-- Who reads them: admins, and monitoring roles (pg_monitor: postgres_exporter's role joins
-- it). pg_monitor may use the schema for these views alone: it holds no other right here;
-- monitor_sweep reads the engine's default schedule.
GRANT SELECT ON memgov.monitor_decisions, memgov.monitor_approvals, memgov.monitor_quarantine,
                memgov.monitor_sweep, memgov.monitor_seal, memgov.monitor_shadows, memgov.monitor_policies
    TO memgov_admin, pg_monitor;
GRANT EXECUTE ON FUNCTION memgov.setting_defaults() TO pg_monitor;

GRANT USAGE ON SCHEMA memgov TO pg_monitor;

RESET ROLE;

-- audit: archival has a floor (issue 27). memgov.settings' archive_min_age (seconds, default
-- 365 days) is the youngest cut memgov.archive_decision_log takes; only a superuser lowers it
-- (memgov.guard_settings). Each archive record keeps the floor it ran under.
SET ROLE memgov_owner;
ALTER TABLE memgov.settings
    DROP CONSTRAINT settings_name_check,
    DROP CONSTRAINT settings_value_check,
    ADD CONSTRAINT settings_name_check
        CHECK (name IN ('max_fact_text_bytes', 'max_other_bytes', 'archive_min_age')),
    ADD CONSTRAINT settings_value_check
        CHECK (CASE WHEN name = 'archive_min_age' THEN value BETWEEN 0 AND 3153600000
                    ELSE value BETWEEN 1024 AND 1073741823 END);
COMMENT ON TABLE memgov.settings IS
    'Engine settings: max_fact_text_bytes caps fact_text, max_other_bytes the other columns together, '
    'before any decision; archive_min_age (seconds) is the youngest cut of the decision log''s archival '
    '(defaults: memgov.setting_defaults() -> ''limits'')';
INSERT INTO memgov.settings (name, value)
SELECT 'archive_min_age', (memgov.setting_defaults() -> 'limits' ->> 'archive_min_age')::bigint;
ALTER TABLE memgov.decision_log_archives ADD COLUMN min_age interval;
CREATE TRIGGER guard_settings BEFORE UPDATE ON memgov.settings
    FOR EACH ROW EXECUTE FUNCTION memgov.guard_settings();
ALTER TABLE memgov.settings ENABLE ALWAYS TRIGGER guard_settings;
RESET ROLE;

-- audit: settings changes are recorded (issue 27). Every change of memgov.settings lands in
-- memgov.settings_changes (who, when, old and new value), append-only for every role (the
-- log's guard, enabled ALWAYS) and hash-chained (memgov.settings_change_hash), which
-- memgov.verify_decision_log checks. (The table is created before the routines, which name
-- its row type.)
SET ROLE memgov_owner;
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.settings_changes
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.settings_changes
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
ALTER TABLE memgov.settings_changes ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.settings_changes ENABLE ALWAYS TRIGGER refuse_truncate;
CREATE TRIGGER record_change AFTER INSERT OR UPDATE OR DELETE ON memgov.settings
    FOR EACH ROW EXECUTE FUNCTION memgov.record_setting_change();
ALTER TABLE memgov.settings ENABLE ALWAYS TRIGGER record_change;
GRANT SELECT ON memgov.settings_changes TO memgov_admin;
RESET ROLE;

-- langgraph store (issue 29): where a LangGraph store keeps an item (memgov_pg.langgraph):
-- its namespace and key, one memory per (tenant, namespace, key); writers set them on INSERT
-- (memgov.remember passes them through). No trigger work: an index and two nullable columns
-- (added before the routines).
SET ROLE memgov_owner;
CREATE UNIQUE INDEX long_term_memory_items_store_key_idx
    ON memgov.long_term_memory_items (org_id, namespace, item_key)
    WHERE namespace IS NOT NULL;
GRANT INSERT (namespace, item_key) ON memgov.long_term_memory_items TO memgov_writer, memgov_admin;
RESET ROLE;

-- standby reads (issue 30): reads on a hot standby are logged on the primary
-- (sql/065_standby_reads.sql): the nonces of the reads logged in the last minutes, and the
-- standby logger's role may use the schema (for memgov.log_standby_read alone).
SET ROLE memgov_owner;
CREATE TABLE memgov.standby_reads (
    nonce        uuid        PRIMARY KEY,
    received_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE memgov.standby_reads IS
    'Reads logged for a standby in the last ten minutes, by nonce: each is logged once (memgov.log_standby_read)';
CREATE INDEX standby_reads_received_at_idx ON memgov.standby_reads (received_at);
-- (pg_monitor's grant again after it: the schema's ACL lists them in sql/'s order)
REVOKE USAGE ON SCHEMA memgov FROM pg_monitor;
GRANT USAGE ON SCHEMA memgov TO memgov_standby_logger;
GRANT USAGE ON SCHEMA memgov TO pg_monitor;
-- read classes (issue 26): a memory's read_class (sql/060_recall.sql) is what its tenant's
-- policy lets each class of reader read, decided by the write trigger from the row alone and
-- named by the deciding version's read_epoch; row level security trusts a class of the
-- current epoch only. Versions deployed before have no read class function, so every row
-- stays NULL (decided row by row, as before) until a deploy of a policy that has one.
SET ROLE memgov_owner;
ALTER TABLE memgov.policy_versions ADD COLUMN read_epoch integer GENERATED ALWAYS AS IDENTITY;
ALTER TABLE memgov.long_term_memory_items ADD COLUMN read_class bigint;
DROP POLICY governed_reads ON memgov.long_term_memory_items;
DROP POLICY governed_updates ON memgov.long_term_memory_items;
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.read_allowed(status, org_id, read_class, long_term_memory_items, (SELECT memgov.session_tenant()),
                               (SELECT memgov.read_classes(true)), (SELECT memgov.read_classes(false))));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.read_allowed(status, org_id, read_class, long_term_memory_items, (SELECT memgov.session_tenant()),
                               (SELECT memgov.read_classes(true)), (SELECT memgov.read_classes(false))))
    WITH CHECK (true);
RESET ROLE;

-- langgraph store TTL (issue 29): writers give an item a time to live (ttl_minutes, added
-- before the routines); the engine sets expires_at from it. An expired memory is gone for its
-- readers from the moment it expires, swept or not: row level security hides it from a
-- writer's or reviewer's SELECT and UPDATE (memgov.search and memgov.get skip it themselves).
SET ROLE memgov_owner;
GRANT INSERT (ttl_minutes), UPDATE (ttl_minutes) ON memgov.long_term_memory_items TO memgov_writer, memgov_admin;
CREATE POLICY unexpired_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (expires_at IS NULL OR expires_at > pg_catalog.now());
CREATE POLICY unexpired_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (expires_at IS NULL OR expires_at > pg_catalog.now())
    WITH CHECK (true);
RESET ROLE;

-- sweep candidates (issue 26): auto_delete rules bound by confidence or by age find their
-- rows in these two partial indexes (sql/072_retention_candidates.sql), not in a walk of
-- the whole table. Built here as memgov_owner: a large table takes its time building them.
SET ROLE memgov_owner;
CREATE INDEX long_term_memory_items_low_confidence_idx
    ON memgov.long_term_memory_items (confidence, memory_id)
    WHERE retention_policy <> 'permanent_until_revoked' AND confidence <= 0.5;
CREATE INDEX long_term_memory_items_created_at_idx
    ON memgov.long_term_memory_items (created_at, memory_id)
    WHERE retention_policy <> 'permanent_until_revoked';
RESET ROLE;

-- langgraph vectors (issue 29): the LangGraph store's semantic search without pgvector
-- (sql/066_vectors.sql): one real[] vector per indexed path of an item, outside the memory
-- row, counted while the memory holds the text it embeds, and removed with its memory by a
-- statement trigger. Its functions are in the generated block above (plpgsql: they name the
-- table only when they run).
SET ROLE memgov_owner;
CREATE TABLE memgov.memory_vectors (
    memory_id     uuid             NOT NULL,
    org_id        text             NOT NULL,
    -- sha256 of the fact_text the vector embeds (UTF-8)
    content_hash  bytea            NOT NULL,
    -- the indexed field, as LangGraph names it ("$" the whole value, "a.b", "list[*].c.0")
    path          text             NOT NULL,
    vector        real[]           NOT NULL,
    -- its euclidean norm, so that a cosine or L2 distance is one dot product at search time
    norm          double precision NOT NULL,
    created_at    timestamptz      NOT NULL DEFAULT now(),
    -- no foreign key: ON DELETE CASCADE runs one query per deleted memory, vectors or not
    -- (measured: a DELETE of 20,000 memories took 200 ms with it, 18 ms without); the
    -- statement trigger drop_vectors removes them in one join instead. A vector row whose
    -- memory is gone is never read: every search and the row level security join the memory.
    PRIMARY KEY (memory_id, org_id, content_hash, path),
    -- pgvector's bound; a search compares only vectors of its query's dimensions
    CHECK (array_ndims(vector) = 1 AND cardinality(vector) BETWEEN 1 AND 16000)
)
-- a vector stays in its row, uncompressed, up to ~2,000 dimensions (8 KB): random floats do
-- not compress, and a TOAST fetch per vector would cost more than its dot product
WITH (toast_tuple_target = 8160);
ALTER TABLE memgov.memory_vectors ALTER COLUMN vector SET STORAGE MAIN;
COMMENT ON TABLE memgov.memory_vectors IS
    'Embeddings of LangGraph store items (one per indexed path), counted while the memory holds the text they embed';

-- Readers: a writer or reviewer sees the vectors of the memories it may read (the memory
-- table's own row level security applies inside the subquery), of their current text only.
-- Nobody but memgov's functions writes here.
GRANT SELECT ON memgov.memory_vectors TO memgov_writer, memgov_reviewer, memgov_admin;
ALTER TABLE memgov.memory_vectors ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.memory_vectors
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY governed_reads ON memgov.memory_vectors
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (EXISTS (SELECT FROM memgov.long_term_memory_items m
                    WHERE m.memory_id = memory_vectors.memory_id AND m.org_id = memory_vectors.org_id
                      AND pg_catalog.sha256(pg_catalog.convert_to(m.fact_text, 'UTF8')) = memory_vectors.content_hash));
CREATE POLICY admin_read ON memgov.memory_vectors TO memgov_admin USING (true);
-- Every role's DELETE and TRUNCATE, replica mode included (ENABLE ALWAYS): like the write
-- triggers, nothing switches them off.
CREATE TRIGGER drop_vectors AFTER DELETE ON memgov.long_term_memory_items
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.drop_vectors();
CREATE TRIGGER drop_vectors_truncated AFTER TRUNCATE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.drop_vectors();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER drop_vectors;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER drop_vectors_truncated;
RESET ROLE;

-- search by tenant: the full-text index leads with the tenant (btree_gin), so that a
-- search reads its own tenant's matches, not the whole table's (sql/000_roles.sql,
-- sql/010_schema.sql). The new index is built before the old one goes: searches keep an
-- index throughout (the table is locked against writes while it builds).
DO $btree_gin$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'btree_gin') THEN
        CREATE SCHEMA memgov_btree_gin;
        REVOKE ALL ON SCHEMA memgov_btree_gin FROM PUBLIC;
        CREATE EXTENSION btree_gin SCHEMA memgov_btree_gin;
    END IF;
END
$btree_gin$;
CREATE INDEX long_term_memory_items_tenant_search_idx
    ON memgov.long_term_memory_items USING gin (org_id, search_vector);
DROP INDEX memgov.long_term_memory_items_search_vector_idx;

-- the schema says which revision it is at (0001_initial said none)
COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0002_second_release)';

-- migrate:downgrade
-- search by tenant, undone first: the full-text index on the text alone again, and btree_gin
-- removed where this revision installed it (its own schema), unless something else uses it now
CREATE INDEX long_term_memory_items_search_vector_idx
    ON memgov.long_term_memory_items USING gin (search_vector);
DROP INDEX memgov.long_term_memory_items_tenant_search_idx;
DO $btree_gin$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension
                WHERE extname = 'btree_gin' AND extnamespace::regnamespace::text = 'memgov_btree_gin') THEN
        DROP EXTENSION btree_gin;
        DROP SCHEMA memgov_btree_gin;
    END IF;
EXCEPTION
    WHEN dependent_objects_still_exist THEN
        RAISE NOTICE 'memgov: btree_gin stays installed in schema memgov_btree_gin: other objects use it';
END
$btree_gin$;
-- langgraph vectors (issue 29), undone first: its triggers are on the memory table, whose
-- columns change below (the trigger function goes with the generated block)
SET ROLE memgov_owner;
DROP TRIGGER drop_vectors ON memgov.long_term_memory_items;
DROP TRIGGER drop_vectors_truncated ON memgov.long_term_memory_items;
DROP TABLE memgov.memory_vectors;
RESET ROLE;

-- read classes (issue 26), undone: row level security decides every row again, the columns
-- go, and so do the versions' read class functions (0001_initial names none)
SET ROLE memgov_owner;
DROP POLICY governed_reads ON memgov.long_term_memory_items;
DROP POLICY governed_updates ON memgov.long_term_memory_items;
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items))
    WITH CHECK (true);
ALTER TABLE memgov.long_term_memory_items DROP COLUMN read_class;
ALTER TABLE memgov.policy_versions DROP COLUMN read_epoch;
DO $read_functions$
DECLARE
    v_function  regprocedure;
BEGIN
    FOR v_function IN
        SELECT pg_catalog.to_regprocedure(pg_catalog.format('memgov.%I(memgov.long_term_memory_items, text)',
                                                            v.function_name || '_read'))
          FROM memgov.policy_versions v
    LOOP
        IF v_function IS NOT NULL THEN
            EXECUTE pg_catalog.format('DROP FUNCTION %s', v_function);
        END IF;
    END LOOP;
END
$read_functions$;
RESET ROLE;

-- sweep candidates (issue 26)
SET ROLE memgov_owner;
DROP INDEX memgov.long_term_memory_items_low_confidence_idx;
DROP INDEX memgov.long_term_memory_items_created_at_idx;
RESET ROLE;

-- audit: the seal covers the settings trail (issue 27), undone. 0001_initial's verification
-- knows only 'memgov-seal-v1' hashes: a seal that covers the settings trail would read as
-- altered there, so the downgrade refuses while one is left (archive them first); with none,
-- the columns go.
DO $seal_v2$
BEGIN
    IF EXISTS (SELECT FROM memgov.decision_log_seals WHERE settings_change_id IS NOT NULL) THEN
        RAISE EXCEPTION 'memgov: the decision log has seals that cover the settings trail (memgov-seal-v2), which 0001_initial cannot verify'
            USING ERRCODE = '55000',
                  HINT = 'archive them first (memgov.archive_decision_log) or stay at 0002_second_release';
    END IF;
END
$seal_v2$;
SET ROLE memgov_owner;
ALTER TABLE memgov.decision_log_seals
    DROP CONSTRAINT decision_log_seals_settings_head_check,
    DROP COLUMN settings_change_id,
    DROP COLUMN settings_hash;
RESET ROLE;

-- audit: settings changes are recorded (issue 27), undone: the record goes with its table
SET ROLE memgov_owner;
DROP TRIGGER record_change ON memgov.settings;
DROP TABLE memgov.settings_changes;
RESET ROLE;

-- audit: archival has a floor (issue 27), undone: archive_min_age and the floor of each
-- archive record go
SET ROLE memgov_owner;
DROP TRIGGER guard_settings ON memgov.settings;
DELETE FROM memgov.settings WHERE name = 'archive_min_age';
ALTER TABLE memgov.settings
    DROP CONSTRAINT settings_name_check,
    DROP CONSTRAINT settings_value_check,
    ADD CONSTRAINT settings_name_check CHECK (name IN ('max_fact_text_bytes', 'max_other_bytes')),
    ADD CONSTRAINT settings_value_check CHECK (value BETWEEN 1024 AND 1073741823);
COMMENT ON TABLE memgov.settings IS
    'Engine settings: max_fact_text_bytes caps fact_text, max_other_bytes the other columns together, '
    'before any decision (defaults: memgov.setting_defaults() -> ''limits'')';
ALTER TABLE memgov.decision_log_archives DROP COLUMN min_age;
RESET ROLE;
-- A decision log that lists shared decisions cannot go back: 0001 has nowhere to keep the
-- memories of a bulk statement's decision, and its seals cover them.
DO $compact$
BEGIN
    IF EXISTS (SELECT FROM memgov.decision_log WHERE memory_ids IS NOT NULL) THEN
        RAISE EXCEPTION 'memgov: the decision log holds decisions of bulk statements (memory_ids), which 0001_initial cannot keep'
            USING ERRCODE = '55000',
                  HINT = 'archive them first (memgov.archive_decision_log) or stay at 0002_second_release';
    END IF;
END
$compact$;
-- monitoring views (issue 30)
SET ROLE memgov_owner;
DROP VIEW memgov.monitor_decisions, memgov.monitor_approvals, memgov.monitor_quarantine, memgov.monitor_sweep,
          memgov.monitor_seal, memgov.monitor_shadows, memgov.monitor_policies;
REVOKE EXECUTE ON FUNCTION memgov.setting_defaults() FROM pg_monitor;
REVOKE USAGE ON SCHEMA memgov FROM pg_monitor;
RESET ROLE;

-- standby reads (issue 30); memgov_standby_logger is kept, as memgov_settings_reader is
SET ROLE memgov_owner;
REVOKE USAGE ON SCHEMA memgov FROM memgov_standby_logger;
DROP TABLE memgov.standby_reads;
-- langgraph store TTL (issue 29), undone: the policies, the column and its domain go
SET ROLE memgov_owner;
DROP POLICY unexpired_reads ON memgov.long_term_memory_items;
DROP POLICY unexpired_updates ON memgov.long_term_memory_items;
REVOKE INSERT (ttl_minutes), UPDATE (ttl_minutes) ON memgov.long_term_memory_items FROM memgov_writer, memgov_admin;
ALTER TABLE memgov.long_term_memory_items DROP COLUMN ttl_minutes;
DROP DOMAIN memgov.ttl_minutes;
RESET ROLE;

-- langgraph store (issue 29)
SET ROLE memgov_owner;
REVOKE INSERT (namespace, item_key) ON memgov.long_term_memory_items FROM memgov_writer, memgov_admin;
DROP INDEX memgov.long_term_memory_items_store_key_idx;
ALTER TABLE memgov.long_term_memory_items
    DROP COLUMN namespace,
    DROP COLUMN item_key;
RESET ROLE;
SET ROLE memgov_owner;
DROP TRIGGER enforce_write ON memgov.long_term_memory_items;
DROP TRIGGER flush_inserted ON memgov.long_term_memory_items;
DROP TRIGGER flush_updated ON memgov.long_term_memory_items;
DROP TRIGGER refuse_delete ON memgov.long_term_memory_items;
DROP POLICY governed_reads ON memgov.long_term_memory_items;
DROP POLICY governed_updates ON memgov.long_term_memory_items;
RESET ROLE;

-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.setting_defaults()
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN '{"limits": {"max_other_bytes": 16384, "max_fact_text_bytes": 65536}, "replay": {"keep": "7 days", "sample_rate": 0}, "feedback": {"reject_delta": -0.3, "confirm_delta": 0.1, "edit_confidence": 0.8, "reject_delete_below": 0.0}, "retention": {"schedule": "*/10 * * * *", "batch_size": 5000, "approval_ttl": "7 days", "confidence_floor": 0.3, "confidence_grace": "30 days"}}'::jsonb;
REVOKE EXECUTE ON FUNCTION memgov.setting_defaults() FROM pg_monitor;

CREATE OR REPLACE FUNCTION memgov.rebuild_dispatch()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_decide     text := '';
    v_explain    text := '';
    v_retention  text := '';
    v_settings   text := '';
    v_global     text;
    v_global_settings jsonb;
    v_global_holds boolean := false;
    v_held_apart   text[] := '{}';  -- tenants whose own policy holds where the global does not, or the reverse
    v_global_reads boolean := false;
    v_reads_apart  text[] := '{}';  -- tenants whose own policy governs reads where the global does not, or the reverse
    v_configs      text := '';
    v_old_configs  text;
    v_body       text;
    v_at         integer;
    v_version    record;
    -- the line the compiler writes right after BEGIN of every decide body (TENANT_ROUTING_MARKER
    -- in memgov_pg/compiler.py): where the tenants' routing goes when that body serves as decide
    v_marker     constant text := E'\n    -- memgov:tenant-routing\n';
BEGIN
    FOR v_version IN
        SELECT org_id, function_name, settings, memgov.policy_may_hold(org_id, version) AS holds
          FROM memgov.policy_versions
         WHERE active
         ORDER BY org_id COLLATE "C"
    LOOP
        IF v_version.org_id = '*' THEN
            v_global := v_version.function_name;
            v_global_settings := v_version.settings;
            v_global_holds := v_version.holds;
            v_global_reads := coalesce((v_version.settings ->> 'reads')::boolean, false);
            CONTINUE;
        END IF;
        -- a tenant's own policy decides all its settings (one it leaves out: the default)
        v_configs := v_configs || format(E'        WHEN p_org_id = %L THEN %L::regconfig\n', v_version.org_id,
                                         coalesce(v_version.settings -> 'search' ->> 'text_config', 'pg_catalog.simple'));
        v_settings := v_settings || format(
            E'    IF p_org_id = %L THEN\n        RETURN %L::jsonb;\n    END IF;\n',
            v_version.org_id, v_version.settings);
        v_decide := v_decide || format(
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
            v_version.org_id, v_version.function_name);
        v_explain := v_explain || format(
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
            v_version.org_id, v_version.function_name || '_explain');
        v_retention := v_retention || format(
            E'        WHEN p_item.org_id = %L THEN memgov.%I(p_item)\n',
            v_version.org_id, v_version.function_name || '_retention');
    END LOOP;

    -- memgov.decide carries the global policy's own body (one PL/pgSQL call per
    -- row, not two), preceded by the tenant overrides' routing
    IF v_global IS NULL THEN
        v_body := E'\nBEGIN\n' || v_decide || E'    RETURN memgov.no_policy_decision();\nEND\n';
    ELSE
        SELECT p.prosrc INTO STRICT v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = format('memgov.%I(memgov.long_term_memory_items, text, text)', v_global)::regprocedure;
        -- the routing goes right after the marker line, which a compiled body holds once (no
        -- policy value spans lines: the compiler writes line breaks in literals as escapes);
        -- plain string surgery: no pattern or replacement syntax that a tenant id could reach
        IF length(v_body) - length(replace(v_body, v_marker, '')) <> length(v_marker) THEN
            RAISE EXCEPTION 'the body of the active global policy (memgov.%) must hold the tenant routing marker line once',
                            v_global
                USING ERRCODE = 'MG500',
                      HINT = 'it was not compiled by this memgov: bump version: in the policy file and deploy it';
        END IF;
        v_at := strpos(v_body, v_marker) + length(v_marker);
        v_body := left(v_body, v_at - 1) || v_decide || substr(v_body, v_at);
    END IF;
    -- decide carries a compiled body: it runs as memgov_policy, like the compiled functions
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER
AS %L$f$, v_body);
    PERFORM memgov.hand_to_policy_role('memgov.decide(memgov.long_term_memory_items, text, text)');

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.explain_decision(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$,
        v_explain,
        CASE WHEN v_global IS NULL THEN '''[]''::jsonb'
             ELSE format('memgov.%I(p_item, p_operation, p_actor)', v_global || '_explain') END);

    -- retention_rule is SQL, which the planner inlines into the sweep's walk: one call per
    -- row (the compiled function), not two
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_rule(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT %s
$body$$f$,
        format(CASE WHEN v_retention = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_retention,
               CASE WHEN v_global IS NULL THEN 'NULL::text'
                    ELSE format('memgov.%I(p_item)', v_global || '_retention') END));

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.policy_settings(p_org_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %L::jsonb;
END
$body$$f$,
        v_settings, coalesce(v_global_settings, '{}'::jsonb));

    -- retention_held: SQL that the planner inlines into the sweep's queries, so that a tenant
    -- whose active policy cannot deny a forget by a rule costs no decision per row (tenants
    -- without a policy of their own follow the global one; with none at all, nothing holds)
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_held_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*' AND memgov.policy_may_hold(v.org_id, v.version) <> v_global_holds;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_held(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
AS $body$
    -- Whether a forget rule holds a memory against automatic deletion (generated by memgov.rebuild_dispatch)
    SELECT CASE WHEN p_item.org_id = ANY (%L::text[]) THEN %s ELSE %s END
$body$$f$,
        v_held_apart,
        CASE WHEN v_global_holds THEN 'false' ELSE 'memgov.forget_denied_by_rule(p_item)' END,
        CASE WHEN v_global_holds THEN 'memgov.forget_denied_by_rule(p_item)' ELSE 'false' END);

    -- reads_governed and search_config: SQL-standard bodies (bound at creation, whatever the
    -- caller's search_path) that the planner inlines into row level security and the write
    -- trigger, a constant where no tenant's policy sets them apart
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_reads_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*'
       AND coalesce((v.settings ->> 'reads')::boolean, false) <> v_global_reads;
    v_body := CASE WHEN cardinality(v_reads_apart) = 0 THEN v_global_reads::text
                   ELSE format('CASE WHEN %%s = ANY (%L::text[]) THEN %s ELSE %s END',
                               v_reads_apart, (NOT v_global_reads)::text, v_global_reads::text) END;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.reads_governed(p_org_id text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$, format(v_body, 'p_org_id'));
    v_old_configs := pg_get_functiondef(to_regprocedure('memgov.search_config(text)'));  -- NULL before the first
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.search_config(p_org_id text)
RETURNS regconfig
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_configs = '' THEN '%2$L::regconfig' ELSE E'CASE\n%1$s        ELSE %2$L::regconfig\n    END' END,
               v_configs, coalesce(v_global_settings -> 'search' ->> 'text_config', 'pg_catalog.simple')));
    -- a tenant whose text search configuration changed has its memories indexed anew
    -- (search_vector follows search_config), in the deploy's transaction
    IF v_old_configs IS DISTINCT FROM pg_get_functiondef('memgov.search_config(text)'::regprocedure) THEN
        UPDATE memgov.long_term_memory_items m
           SET search_config = memgov.search_config(m.org_id)
         WHERE m.search_config <> memgov.search_config(m.org_id);
    END IF;
    -- sample_rate: the share of a tenant's stored or held writes kept for replay (its policy's
    -- replay.sample_rate; none by default), a constant in the write trigger's test
    SELECT coalesce(string_agg(format(E'        WHEN p_org_id = %L THEN %s\n', v.org_id, r.rate), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_body
      FROM memgov.policy_versions v,
           LATERAL (SELECT coalesce(v.settings -> 'replay' ->> 'sample_rate',
                                    memgov.setting_defaults() -> 'replay' ->> 'sample_rate')::numeric AS rate) AS r
     WHERE v.active AND v.org_id <> '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.sample_rate(p_org_id text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_body = '' THEN '%2$s::numeric' ELSE E'CASE\n%1$s        ELSE %2$s::numeric\n    END' END,
               v_body, coalesce(v_global_settings -> 'replay' ->> 'sample_rate',
                                memgov.setting_defaults() -> 'replay' ->> 'sample_rate')::numeric));
    -- a tenant whose policy stops sampling has its samples deleted: samples exist only where
    -- the memories' deletion deletes them (the trigger forget_samples)
    DELETE FROM memgov.replay_samples s WHERE memgov.sample_rate(s.org_id) = 0;
    PERFORM memgov.rebuild_shadow_dispatch();
END
$function$;

REVOKE EXECUTE ON FUNCTION memgov.retention_interval(text,text) FROM memgov_admin;

CREATE OR REPLACE FUNCTION memgov.activate_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_previous  text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF NOT EXISTS (SELECT FROM memgov.policy_versions
                    WHERE org_id = p_org_id AND version = p_version) THEN
        RAISE EXCEPTION 'policy version % is not deployed for %', p_version,
                        CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
            USING ERRCODE = 'MG404',
                  HINT = 'list the deployed versions: SELECT org_id, version FROM memgov.policy_versions';
    END IF;
    SELECT version INTO v_previous FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    UPDATE memgov.policy_versions SET active = false
     WHERE org_id = p_org_id AND active AND version <> p_version;
    UPDATE memgov.policy_versions SET active = true
     WHERE org_id = p_org_id AND version = p_version AND NOT active;
    -- the history memgov.undeploy_policy reads: only a change of the active version
    IF v_previous IS DISTINCT FROM p_version THEN
        INSERT INTO memgov.policy_activations (org_id, version, previous_version)
        VALUES (p_org_id, p_version, v_previous);
    END IF;
    PERFORM memgov.rebuild_dispatch();
    RETURN p_version;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.activate_policy(text,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.stage_policy(p_org_id text, p_version text, p_sha256 text, p_mode text, p_function_name text, p_source_yaml text, p_decide_body text, p_explain_body text, p_retention_body text, p_settings jsonb, p_rules jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_existing   memgov.policy_versions;
    v_function   record;
    v_compiled   text := '';
BEGIN
    -- one deploy at a time; concurrent writers keep using the old dispatchers until commit
    PERFORM memgov.lock_deploys();

    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_function_name IS NULL OR p_function_name !~ '^policy_[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'invalid compiled function name %', p_function_name USING ERRCODE = '22023';
    END IF;

    SELECT * INTO v_existing FROM memgov.policy_versions
     WHERE org_id = p_org_id AND version = p_version;
    IF FOUND THEN
        IF v_existing.sha256 <> p_sha256 THEN
            RAISE EXCEPTION 'policy version % is already deployed with different content', p_version
                USING ERRCODE = 'MG409',
                      HINT = 'bump `version:` in the policy file; deployed versions never change';
        END IF;
        RETURN p_version;
    END IF;

    FOR v_function IN
        SELECT f.name, f.args, f.types, f.returns, f.body
          FROM (VALUES
                (p_function_name, 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'memgov.decision', p_decide_body),
                (p_function_name || '_explain', 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'jsonb', p_explain_body),
                (p_function_name || '_retention', 'p_item memgov.long_term_memory_items',
                 'memgov.long_term_memory_items', 'text', p_retention_body)) AS f(name, args, types, returns, body)
    LOOP
        IF v_function.body IS NULL THEN
            RAISE EXCEPTION 'the compiled policy has no body for %', v_function.name USING ERRCODE = '22023';
        END IF;
        BEGIN
            EXECUTE format('CREATE OR REPLACE FUNCTION memgov.%I(%s) RETURNS %s '
                           'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                           v_function.name, v_function.args, v_function.returns, v_function.body);
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'PostgreSQL rejected the compiled policy %: %', p_version, SQLERRM
                USING ERRCODE = 'MG500',
                      HINT = 'this is a memgov compiler bug: run `memgov compile` and report the output';
        END;
        PERFORM memgov.hand_to_policy_role(format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure);
        EXECUTE format('COMMENT ON FUNCTION memgov.%I(%s) IS %L', v_function.name, v_function.types,
                       format('memgov policy %s (%s), sha256 %s', p_version, p_org_id, p_sha256));
        v_compiled := v_compiled || pg_get_functiondef(
            format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure) || E';\n\n';
    END LOOP;

    INSERT INTO memgov.policy_versions
           (org_id, version, sha256, mode, function_name, source_yaml, compiled_sql, settings, deployed_by)
    VALUES (p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml, v_compiled,
            p_settings, session_user);

    INSERT INTO memgov.memory_policy_rules
           (org_id, policy_version, rule_id, rule_key, position, category, condition, action,
            priority, reason_codes, description)
    SELECT p_org_id, p_version, r.rule_id, r.rule_key, r.position, r.category, r.condition,
           r.action, r.priority, r.reason_codes, r.description
      FROM jsonb_to_recordset(p_rules) AS r(rule_id text, rule_key text, position integer,
           category text[], condition jsonb, action text, priority integer, reason_codes text[],
           description text);
    RETURN p_version;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.stage_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.install_policy(p_org_id text, p_version text, p_sha256 text, p_mode text, p_function_name text, p_source_yaml text, p_decide_body text, p_explain_body text, p_retention_body text, p_settings jsonb, p_rules jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN memgov.activate_policy(p_org_id,
        memgov.stage_policy(p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml,
                            p_decide_body, p_explain_body, p_retention_body, p_settings, p_rules));
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.install_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_scope       text := CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END;
    v_active      text;
    v_activation  memgov.policy_activations;
    v_target      text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_version IS NULL OR p_version = '' THEN
        RAISE EXCEPTION 'undeploy_policy needs the version to undeploy' USING ERRCODE = '22023';
    END IF;
    SELECT version INTO v_active FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    IF v_active IS DISTINCT FROM p_version THEN
        RAISE NOTICE 'policy version % is not the active one of % (active: %): nothing to undeploy',
                     p_version, v_scope, coalesce(v_active, 'none');
        RETURN v_active;
    END IF;

    -- the latest activation of this version that nothing has undone yet (an undo row is
    -- itself never undone: undeploying twice walks back two activations)
    SELECT a.* INTO v_activation FROM memgov.policy_activations a
     WHERE a.org_id = p_org_id AND a.version = p_version AND a.undoes IS NULL
       AND NOT EXISTS (SELECT FROM memgov.policy_activations u
                        WHERE u.org_id = a.org_id AND u.undoes = a.activation_id)
     ORDER BY a.activation_id DESC
     LIMIT 1;
    v_target := v_activation.previous_version;
    IF v_target IS NOT NULL AND NOT EXISTS (SELECT FROM memgov.policy_versions
                                             WHERE org_id = p_org_id AND version = v_target) THEN
        RAISE NOTICE 'policy version % of % is no longer deployed: no policy is active now', v_target, v_scope;
        v_target := NULL;
    END IF;

    UPDATE memgov.policy_versions SET active = false WHERE org_id = p_org_id AND active;
    UPDATE memgov.policy_versions SET active = true WHERE org_id = p_org_id AND version = v_target;
    INSERT INTO memgov.policy_activations (org_id, version, previous_version, undoes)
    VALUES (p_org_id, v_target, p_version, v_activation.activation_id);
    PERFORM memgov.rebuild_dispatch();
    RETURN v_target;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.shortens_life(p_old memgov.long_term_memory_items, p_new memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT p_new.retention_policy IS DISTINCT FROM p_old.retention_policy
           AND p_new.retention_policy <> 'permanent_until_revoked'
           AND NOT (p_new.expires_at IS NOT NULL AND p_old.expires_at IS NOT NULL
                    AND p_new.expires_at >= p_old.expires_at)
$function$;

CREATE OR REPLACE FUNCTION memgov.log_decision(p_operation text, p_memory_id uuid, p_org_id text, p_actor text, p_decision memgov.decision)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.record_write(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.raise_denied(p_operation text, p_outcome memgov.write_outcome)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.enforce_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
        -- changing the policy, never by changing the memory)
        v_forget := memgov.decide(OLD, 'forget', v_actor);
        IF memgov.shortens_life(OLD, NEW) OR (memgov.denied_by_rule(v_forget) AND NOT memgov.retention_held(NEW)) THEN
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
$function$;

CREATE OR REPLACE FUNCTION memgov.engine_columns()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.forget_samples()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    DELETE FROM memgov.replay_samples s WHERE s.memory_id = OLD.memory_id AND s.org_id = OLD.org_id;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.remember(item jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.close_request(p_request memgov.approval_requests, p_status text, p_actor text, p_note text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.apply_write(p_operation text, p_item memgov.long_term_memory_items, p_policy_version text, p_decision_id bigint, p_pending boolean)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    CASE p_operation
    WHEN 'remember' THEN
        IF p_pending THEN
            UPDATE memgov.long_term_memory_items AS m
               SET status = 'active', policy_version = p_policy_version, decision_id = p_decision_id
             WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
               AND m.status = 'pending_approval';
        ELSE
            BEGIN
                INSERT INTO memgov.long_term_memory_items
                       (memory_id, org_id, project_id, agent_id, subject_id, session_id, category,
                        fact_text, source, confidence, is_sensitive, retention_policy, context_source,
                        metadata, status, created_at, updated_at, policy_version, decision_id)
                VALUES (p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id,
                        p_item.subject_id, p_item.session_id, p_item.category, p_item.fact_text,
                        p_item.source, p_item.confidence, p_item.is_sensitive, p_item.retention_policy,
                        p_item.context_source, p_item.metadata, 'active', p_item.created_at,
                        p_item.created_at, p_policy_version, p_decision_id);
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
$function$;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_id        bigint;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
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
    v_shadow := memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by);
    v_id := memgov.log_decision(p_request.operation, v_item.memory_id, v_item.org_id, v_actor, v_decision);
    PERFORM memgov.record_shadow(v_shadow, p_request.operation, v_item, v_decision, v_id);

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
$function$;

CREATE OR REPLACE FUNCTION memgov.purge_quarantine(quarantine_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_entry  memgov.quarantine := memgov.held_quarantine(purge_quarantine.quarantine_id);
BEGIN
    UPDATE memgov.quarantine AS q
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = memgov.invoker_role(), resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged');
END
$function$;

CREATE OR REPLACE FUNCTION memgov.held_insert_request(p_item memgov.long_term_memory_items)
 RETURNS memgov.approval_requests
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.memory_id = p_item.memory_id AND r.org_id = p_item.org_id
       AND r.status = 'pending' AND r.operation = 'remember'
     ORDER BY r.requested_at
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: pending memory % has no open approval request', p_item.memory_id
            USING ERRCODE = 'MG404';
    END IF;
    RETURN v_request;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.govern_feedback_write(p_operation text, p_item memgov.long_term_memory_items)
 RETURNS memgov.write_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_capture   text := current_setting('memgov.capture', true);
    v_actor     text := memgov.invoker_role();
    v_decision  memgov.decision := memgov.decide(p_item, p_operation, v_actor);
    v_shadow    memgov.shadow_verdict := memgov.judge_shadow(p_operation, p_item, NULL, v_actor);
    v_outcome   memgov.write_outcome;
BEGIN
    PERFORM set_config('memgov.capture', 'on', true);
    v_outcome := memgov.record_write(p_operation, p_item, v_actor, v_decision);
    PERFORM set_config('memgov.capture', coalesce(v_capture, ''), true);
    PERFORM memgov.record_shadow(v_shadow, p_operation, p_item, v_decision, v_outcome.decision_id);
    CASE v_outcome.action
    WHEN 'deny' THEN
        PERFORM memgov.raise_denied(p_operation, v_outcome);
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
            USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
    WHEN 'quarantine' THEN
        RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
            USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
    ELSE
        NULL;
    END CASE;
    RETURN v_outcome;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.confirm(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(confirm.memory_id);
    v_after    numeric(4,3);
    v_result   jsonb;
BEGIN
    IF v_item.status = 'pending_approval' THEN
        v_result := memgov.approve_request(memgov.held_insert_request(v_item), 'confirmed by the user');
        IF v_result ->> 'status' <> 'approved' THEN
            RETURN memgov.record_feedback(v_item, 'confirm', NULL, 'refused')
                   || jsonb_build_object('decision', v_result -> 'decision');
        END IF;
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta')));
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now()
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'confirm', v_after,
        CASE WHEN v_item.status = 'pending_approval' THEN 'approved' ELSE 'confirmed' END);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.reject(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(reject.memory_id);
    v_after    numeric(4,3);
BEGIN
    IF v_item.status = 'pending_approval' THEN
        PERFORM memgov.deny_request(memgov.held_insert_request(v_item), 'rejected by the user');
        RETURN memgov.record_feedback(v_item, 'reject', NULL, 'refused');
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta')));
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below')
       AND NOT memgov.retention_held(v_item) THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.log_deletion(v_item, 'rejected', NULL);
        RETURN memgov.record_feedback(v_item, 'reject', v_after, 'deleted');
    END IF;
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'reject', v_after, 'lowered');
END
$function$;

CREATE OR REPLACE FUNCTION memgov.edit(memory_id uuid, new_text text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(edit.memory_id);
    v_after    numeric(4,3) := least(1, greatest(0,
                   memgov.feedback_setting(v_item.org_id, 'edit_confidence')));
    v_new      memgov.long_term_memory_items;
    v_outcome  memgov.write_outcome;
BEGIN
    IF new_text IS NULL THEN
        RAISE EXCEPTION 'memgov: new_text must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM memgov.check_not_pending(v_item, 'edited');
    PERFORM memgov.check_fact_size(new_text);
    v_new := v_item;
    v_new.fact_text := new_text;
    v_new.confidence := v_after;
    v_new.updated_at := now();
    v_outcome := memgov.govern_feedback_write('update', v_new);
    IF v_outcome.action = 'allow' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET fact_text = new_text, confidence = v_after,
               policy_version = v_outcome.policy_version, decision_id = v_outcome.decision_id
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    RETURN v_outcome.decision || memgov.record_feedback(v_item, 'edit',
        CASE WHEN v_outcome.action = 'allow' THEN v_after ELSE v_item.confidence END,
        v_outcome.action);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.forget(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(forget.memory_id);
    v_outcome  memgov.write_outcome;
BEGIN
    PERFORM memgov.check_not_pending(v_item, 'forgotten');
    v_outcome := memgov.govern_feedback_write('forget', v_item);
    IF v_outcome.action = 'allow' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.log_read(p_operation text, p_item memgov.long_term_memory_items, p_actor text, p_decision memgov.decision, p_shadow memgov.shadow_verdict, p_fingerprint text, p_returned integer, p_withheld integer)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids, policy_version, mode,
            enforced, actor, login, risk_score, risk_level, query_fingerprint, returned, withheld)
    VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action, p_decision.reason_codes,
            p_decision.matched_rule_ids, p_decision.policy_version, p_decision.mode, p_decision.enforced,
            p_actor, session_user, pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
            p_fingerprint, p_returned, p_withheld)
    RETURNING decision_id INTO v_id;
    PERFORM memgov.record_shadow(p_shadow, p_operation, p_item, p_decision, v_id);
    RETURN v_id;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.refuse_read(p_operation text, p_org_id text, p_memory_id uuid, p_asked jsonb, p_actor text, p_decision memgov.decision, p_decision_id bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_request_id     uuid;
    v_quarantine_id  uuid;
    v_detail         jsonb;
BEGIN
    IF p_decision.action = 'require_approval' THEN
        INSERT INTO memgov.approval_requests
               (memory_id, org_id, operation, payload, requested_by, requested_login, decision_id, policy_version)
        VALUES (p_memory_id, p_org_id, p_operation, p_asked, p_actor, session_user, p_decision_id,
                p_decision.policy_version)
        RETURNING request_id INTO v_request_id;
        PERFORM pg_notify(memgov.approval_channel(p_org_id), v_request_id::text);
    ELSIF p_decision.action = 'quarantine' THEN
        INSERT INTO memgov.quarantine
               (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
        VALUES (p_org_id, p_operation, p_memory_id, p_asked, memgov.decision_json(p_decision), p_decision_id,
                p_actor, session_user)
        RETURNING quarantine_id INTO v_quarantine_id;
    END IF;
    v_detail := memgov.decision_json(p_decision)
        || jsonb_build_object('decision_id', p_decision_id, 'memory_id', p_memory_id,
                              'request_id', v_request_id, 'quarantine_id', v_quarantine_id);
    CASE p_decision.action
    WHEN 'deny' THEN
        RAISE EXCEPTION 'memgov: % denied by rule % [%]', p_operation,
                        coalesce(nullif(array_to_string(p_decision.matched_rule_ids, ', '), ''), '(no rule: on_policy_miss)'),
                        array_to_string(p_decision.reason_codes, ', ')
            USING ERRCODE = 'MG403', DETAIL = v_detail::text,
                  HINT = 'the active policy refuses this read; `memgov evaluate --operation ' || p_operation
                         || ' --explain` shows why';
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %): nothing returned', p_operation, v_request_id
            USING ERRCODE = 'MG203', DETAIL = v_detail::text;
    ELSE
        RAISE NOTICE 'memgov: % quarantined (quarantine %): nothing returned', p_operation, v_quarantine_id
            USING ERRCODE = 'MG204', DETAIL = v_detail::text;
    END CASE;
    RETURN v_detail;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.search(query jsonb DEFAULT '{}'::jsonb)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_org_id       text := memgov.recall_tenant();
    v_query        jsonb := memgov.recall_query(query);
    v_actor        text := memgov.invoker_role();
    v_governed     boolean := memgov.reads_governed(v_org_id);
    v_limit        integer := (v_query ->> 'limit')::integer;
    v_categories   text[] := ARRAY(SELECT jsonb_array_elements_text(v_query -> 'categories'));
    v_min          numeric := (v_query ->> 'min_confidence')::numeric;
    v_project_id   text := v_query ->> 'project_id';
    v_agent_id     text := v_query ->> 'agent_id';
    v_subject_id   text := v_query ->> 'subject_id';
    v_session_id   text := v_query ->> 'session_id';
    v_asked        memgov.long_term_memory_items := memgov.search_item(v_org_id, v_query);
    v_shadow       memgov.shadow_verdict;
    v_text         tsquery;
    v_decision     memgov.decision;
    v_get          memgov.decision;
    v_cursor       refcursor;
    v_candidate    record;
    v_offset       integer := 0;
    v_batch        integer;
    v_examined     integer;
    v_returned     integer := 0;
    v_withheld     integer := 0;
    v_id           bigint;
    v_outcome      jsonb;
BEGIN
    v_decision := memgov.read_decision(v_asked, 'search', v_actor);
    v_shadow := memgov.judge_shadow('search', v_asked, NULL, v_actor);
    IF v_decision.enforced AND v_decision.action <> 'allow' THEN
        v_id := memgov.log_read('search', v_asked, v_actor, v_decision, v_shadow, memgov.query_fingerprint(v_query),
                                0, 0);
        v_outcome := memgov.refuse_read('search', v_org_id, NULL, jsonb_build_object('query', v_query),
                                        v_actor, v_decision, v_id);
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    IF v_query ? 'text' THEN
        v_text := websearch_to_tsquery(memgov.search_config(v_org_id), v_query ->> 'text');
    END IF;

    -- candidates are read in batches, best first, until `limit` are allowed or the matches
    -- run out: never fewer because of how many rows were withheld (a cap on the candidates
    -- examined would make what a search returns tell of the rows it may not return)
    v_batch := v_limit;
    -- a text without a word to match matches nothing
    WHILE v_text IS NULL OR numnode(v_text) > 0 LOOP
        -- two static queries, so that each keeps its plan: with a text the index finds the matches
        IF v_text IS NULL THEN
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(1, m.confidence, m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        ELSE
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(ts_rank_cd(m.search_vector, v_text, 32), m.confidence,
                                           m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.search_vector @@ v_text
                   AND m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        END IF;
        v_examined := 0;
        LOOP
            FETCH v_cursor INTO v_candidate;
            EXIT WHEN NOT FOUND;
            v_examined := v_examined + 1;
            IF v_governed THEN
                v_get := memgov.decide(v_candidate.item, 'get', v_actor);
                IF v_get.action <> 'allow' THEN
                    v_withheld := v_withheld + 1;
                    -- monitor mode returns it and counts what would have been withheld
                    CONTINUE WHEN v_get.enforced;
                END IF;
            END IF;
            v_returned := v_returned + 1;
            RETURN NEXT memgov.recalled_of(v_candidate.item, v_candidate.score);
            EXIT WHEN v_returned = v_limit;
        END LOOP;
        CLOSE v_cursor;
        v_offset := v_offset + v_examined;
        EXIT WHEN v_returned = v_limit OR v_examined < v_batch;
        v_batch := v_batch * 2;  -- the rows past a withheld stretch, in ever larger batches
    END LOOP;

    v_id := memgov.log_read('search', v_asked, v_actor, v_decision, v_shadow, memgov.query_fingerprint(v_query),
                            v_returned, v_withheld);
    -- how many candidates were withheld tells of rows the caller may not read (a search for
    -- a word, or a min_confidence, per probe): only a role that reads the log is told
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'returned', v_returned,
                              'withheld', CASE WHEN pg_catalog.has_table_privilege(v_actor, 'memgov.decision_log', 'SELECT')
                                               THEN v_withheld END));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.get(memory_id uuid)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_org_id    text := memgov.recall_tenant();
    v_actor     text := memgov.invoker_role();
    v_item      memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_allowed   boolean;
    v_id        bigint;
    v_outcome   jsonb;
BEGIN
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = get.memory_id AND m.org_id = v_org_id AND m.status = 'active'
       AND (m.expires_at IS NULL OR m.expires_at > now());
    IF NOT FOUND THEN
        PERFORM memgov.note_recall(jsonb_build_object('decision_id', NULL, 'returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    v_decision := memgov.read_decision(v_item, 'get', v_actor);
    v_shadow := memgov.judge_shadow('get', v_item, NULL, v_actor);
    v_allowed := NOT v_decision.enforced OR v_decision.action = 'allow';
    v_id := memgov.log_read('get', v_item, v_actor, v_decision, v_shadow, NULL,
                            CASE WHEN v_allowed THEN 1 ELSE 0 END,
                            CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END);
    IF NOT v_allowed THEN
        v_outcome := memgov.refuse_read('get', v_org_id, v_item.memory_id,
                                        jsonb_build_object('memory_id', v_item.memory_id), v_actor, v_decision, v_id);
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 1));
        RETURN;
    END IF;
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'memory_id', v_item.memory_id, 'returned', 1,
                              'withheld', CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END));
    RETURN NEXT memgov.recalled_of(v_item, NULL);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.row_token(p_item memgov.long_term_memory_items)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT pg_catalog.md5(s.secret || ':' || pg_catalog.pg_current_xact_id_if_assigned()::text || ':'
                          || p_item.org_id || ':' || p_item.memory_id::text || ':' || extract(epoch FROM p_item.updated_at)::text
                          || ':' || pg_catalog.md5(p_item.fact_text))
      FROM memgov.channel_secret s
$function$;

CREATE OR REPLACE FUNCTION memgov.mark_written(p_item memgov.long_term_memory_items, p_operation text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_operation = 'INSERT' AND EXISTS (
        SELECT FROM memgov.long_term_memory_items m WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('memgov.written', memgov.row_token(p_item), true);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.written_here(p_item memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_mark  text := current_setting('memgov.written', true);
BEGIN
    RETURN coalesce(v_mark <> '' AND v_mark = memgov.row_token(p_item), false);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.ttl_due(p_item memgov.long_term_memory_items)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT p_item.expires_at <= pg_catalog.now() AND p_item.retention_policy <> 'permanent_until_revoked'
$function$;

REVOKE EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) FROM memgov_admin;

CREATE OR REPLACE FUNCTION memgov.sweep_batch(p_run_id bigint, p_kind text, p_batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_batch    tid[];     -- the locked rows, and what the log says of each
    v_ids      uuid[];
    v_orgs     text[];
    v_rules    text[];
    v_taken    integer := 0;
    v_deleted  integer := 0;
    v_cursor   bigint;
    v_blocks   bigint;
    v_step     bigint;
    v_path     text[];
    v_cutoff   timestamptz;
    v_bound    numeric;
BEGIN
    PERFORM memgov.check_lease();
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE memgov.ttl_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.expires_at
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'confidence' THEN
        -- the loosest grace of any active policy (or the default, for tenants that have
        -- none) bounds the index scan; each row is then held to its own tenant's grace and floor
        SELECT now() - least((memgov.setting_defaults() #>> '{retention,confidence_grace}')::interval,
                             min(memgov.retention_interval(v.org_id, 'confidence_grace')))
          INTO v_cutoff
          FROM memgov.policy_versions v
         WHERE v.active;
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE d.low_confidence_since <= v_cutoff
                   AND memgov.confidence_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.low_confidence_since
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'auto_delete' THEN
        -- no active policy has an auto_delete rule: nothing to walk
        IF NOT EXISTS (SELECT FROM memgov.memory_policy_rules r
                         JOIN memgov.policy_versions v
                           ON v.org_id = r.org_id AND v.version = r.policy_version
                        WHERE v.active AND r.action = 'auto_delete') THEN
            RETURN 0;
        END IF;
        -- auto_delete rules are arbitrary predicates: walk the table once per run in
        -- physical order (a TID range scan), up to the size the table had when the walk
        -- began. A batch reads at most four times p_batch_size rows' worth of blocks (reading
        -- is cheap, a batch's commit and bookkeeping are not) and takes at most p_batch_size
        -- of them; a full batch ends the step at the block of its last row
        SELECT (r.summary ->> 'cursor')::bigint, (r.summary ->> 'blocks')::bigint
          INTO v_cursor, v_blocks
          FROM memgov.maintenance_runs r WHERE r.org_id = '*' AND r.run_id = p_run_id;
        IF v_cursor IS NULL THEN
            v_cursor := 0;
            v_blocks := pg_relation_size('memgov.long_term_memory_items')
                        / current_setting('block_size')::bigint;
        END IF;
        v_bound := memgov.auto_delete_confidence_bound();
        SELECT greatest(1, ceil(4.0 * p_batch_size / CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                                    THEN c.reltuples / c.relpages ELSE 50 END))::bigint
          INTO v_step
          FROM pg_class c WHERE c.oid = 'memgov.long_term_memory_items'::regclass;
        -- (the rule is named from the locked version of the row)
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id)
          INTO v_batch, v_ids, v_orgs, v_rules
          FROM (SELECT d.ctid, d.memory_id, d.org_id, memgov.retention_rule(d) AS rule_id
                  FROM memgov.long_term_memory_items d
                 WHERE d.ctid >= ('(' || v_cursor || ',0)')::tid
                   AND d.ctid < ('(' || (v_cursor + v_step) || ',0)')::tid
                   AND (v_bound IS NULL OR d.confidence <= v_bound)
                   AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
        -- a TID range scan returns rows in ctid order: a full batch resumes at its last row's
        -- block (its rows are deleted below; the block's others are read again, so each full
        -- batch moves on by p_batch_size deletions), any other ends the step
        v_cursor := CASE WHEN cardinality(v_batch) >= p_batch_size
                         THEN (v_batch[cardinality(v_batch)]::text::point)[0]::bigint
                         ELSE v_cursor + v_step END;
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('cursor', v_cursor, 'blocks', v_blocks)
         WHERE org_id = '*' AND run_id = p_run_id;
    ELSIF p_kind = 'approvals' THEN
        WITH stale AS (
            SELECT r.request_id, r.org_id FROM memgov.approval_requests r
             WHERE memgov.approval_expired(r)
             LIMIT p_batch_size
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            UPDATE memgov.approval_requests r
               SET status = 'expired', decided_at = now(), decided_by = 'memgov', note = 'approval_ttl passed'
              FROM stale
             WHERE r.request_id = stale.request_id AND r.org_id = stale.org_id
            RETURNING r.memory_id, r.org_id, r.operation
        ), dropped AS (
            -- a held INSERT that nobody approved goes with its request
            DELETE FROM memgov.long_term_memory_items m USING expired e
             WHERE e.operation = 'remember' AND m.memory_id = e.memory_id AND m.org_id = e.org_id
               AND m.status = 'pending_approval'
            RETURNING 1
        )
        SELECT count(*) INTO v_deleted FROM expired;
        v_taken := v_deleted;
    ELSE
        RAISE EXCEPTION 'unknown sweep kind %', p_kind USING ERRCODE = '22023';
    END IF;

    IF p_kind <> 'approvals' THEN
        -- the batch through a subquery, whose size the planner cannot see: it looks the tids up
        -- (a TID scan); shown an array of thousands of tids, it would scan the whole table
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> coalesce(cardinality(v_batch), 0) THEN
            RAISE EXCEPTION 'memgov: the sweep deleted % of the % rows it had locked', v_deleted, cardinality(v_batch)
                USING ERRCODE = 'XX000';
        END IF;
        -- the ids in order: the GIN index sorts a row's ids before it stores them, and a sorted
        -- array costs that sort a single pass
        INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
        SELECT b.org_id, p_kind, b.rule_id, memgov.policy_settings(b.org_id) ->> 'version', p_run_id,
               count(*), array_agg(b.memory_id ORDER BY b.memory_id)
          FROM unnest(v_ids, v_orgs, v_rules) AS b (memory_id, org_id, rule_id)
         GROUP BY b.org_id, b.rule_id;
        -- auto_delete: a full batch while blocks remain; the last one ends the walk
        v_taken := CASE WHEN p_kind <> 'auto_delete' THEN v_deleted
                        WHEN v_cursor < v_blocks THEN p_batch_size ELSE 0 END;
    END IF;

    v_path := CASE p_kind WHEN 'approvals' THEN ARRAY['expired', 'approvals'] ELSE ARRAY['deleted', p_kind] END;
    UPDATE memgov.maintenance_runs
       SET summary = jsonb_set(summary, v_path, to_jsonb(coalesce((summary #>> v_path)::bigint, 0) + v_deleted))
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_taken;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.retention_preview()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT jsonb_build_object(
        'deleted', jsonb_build_object(
            'ttl',         count(*) FILTER (WHERE d.reason = 'ttl'),
            'confidence',  count(*) FILTER (WHERE d.reason = 'confidence'),
            'auto_delete', count(*) FILTER (WHERE d.reason = 'auto_delete')),
        'expired', jsonb_build_object(
            'approvals', (SELECT count(*) FROM memgov.approval_requests r WHERE memgov.approval_expired(r))))
      FROM (SELECT memgov.due_reason(m) AS reason
              FROM memgov.long_term_memory_items m
             WHERE m.retention_policy <> 'permanent_until_revoked') AS d
$function$;

CREATE OR REPLACE FUNCTION memgov.finish_maintenance(p_run_id bigint, p_preview jsonb DEFAULT NULL::jsonb, p_cron_pruned bigint DEFAULT 0)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_summary  jsonb;
    v_now      timestamptz := clock_timestamp();  -- a dry run's preview ran in this transaction
BEGIN
    PERFORM memgov.check_lease();
    UPDATE memgov.maintenance_runs
       SET status = 'finished', finished_at = v_now,
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
    RETURNING summary INTO v_summary;
    RETURN v_summary;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.apply_retention(memory_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    END IF;
    RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', v_reason IS NOT NULL,
                              'reason', v_reason,
                              'rule_id', CASE WHEN v_reason = 'auto_delete' THEN memgov.retention_rule(v_item) END);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.refuse_log_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    IF v_allowed THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memgov: %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = '42501',
              HINT = 'logged decisions are never changed; sealed rows leave only through '
                     'memgov.archive_decision_log(before), which records what it removes';
END
$function$;

CREATE OR REPLACE FUNCTION memgov.seal_decision_log(p_batch_rows integer DEFAULT 10000, p_run_id bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
DECLARE
    v_seal_id   bigint;
    v_after_x   bigint;
    v_after_d   bigint;
    v_hash      bytea;
    v_horizon   bigint;
    v_next_xid  bigint;
    v_count     integer;
    v_ids       bigint[];
    v_digests   bytea;
    v_last_x    bigint;
    v_decided   timestamptz;
    v_new_hash  bytea;
    v_rows      bigint := 0;
    v_seals     integer := 0;
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
    LOOP
        SELECT count(*)::integer,
               array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
               string_agg(memgov.decision_digest(b.d), ''::bytea ORDER BY b.xact_id, b.decision_id),
               max(b.xact_id),
               max(b.decided_at)
          INTO v_count, v_ids, v_digests, v_last_x, v_decided
          -- the digests are taken of the batch only, after the LIMIT (in the subquery's
          -- target list they would be computed for every remaining row, once per batch)
          FROM (SELECT d.xact_id, d.decision_id, d.decided_at, d
                  FROM memgov.decision_log d
                 WHERE d.xact_id >= v_after_x AND d.xact_id < v_horizon
                   AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
                 ORDER BY d.xact_id, d.decision_id
                 LIMIT p_batch_rows) AS b;
        EXIT WHEN v_count = 0;
        v_seal_id := v_seal_id + 1;
        v_new_hash := memgov.seal_hash(v_hash, v_seal_id, v_after_x, v_after_d, v_last_x, v_ids[v_count],
                                       v_ids, v_digests);
        INSERT INTO memgov.decision_log_seals
               (seal_id, sealed_by, horizon_xact_id, after_xact_id, after_decision_id, last_xact_id,
                last_decision_id, row_count, decision_ids, row_digests, last_decided_at, prev_hash, seal_hash)
        VALUES (v_seal_id, memgov.invoker_role(), v_horizon, v_after_x, v_after_d, v_last_x,
                v_ids[v_count], v_count, v_ids, v_digests, v_decided, v_hash, v_new_hash);
        v_hash := v_new_hash;
        v_after_x := v_last_x;
        v_after_d := v_ids[v_count];
        v_rows := v_rows + v_count;
        v_seals := v_seals + 1;
        EXIT WHEN v_count < p_batch_rows;
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
$function$;

CREATE OR REPLACE FUNCTION memgov.verify_decision_log(p_anchor_seal_id bigint DEFAULT NULL::bigint, p_anchor_hash text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
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
               OR memgov.seal_hash(v_seal.prev_hash, v_seal.seal_id, v_seal.after_xact_id,
                                   v_seal.after_decision_id, v_seal.last_xact_id, v_seal.last_decision_id,
                                   v_seal.decision_ids, v_seal.row_digests) <> v_seal.seal_hash THEN
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
        'ok', v_break IS NULL,
        'seals', v_seals,
        'rows', v_rows,
        'first_break', v_break,
        'last_seal_id', v_last_id,
        'last_hash', encode(v_last_hash, 'hex'),
        'unsealed_rows', v_unsealed,
        'archived', jsonb_build_object('archives', v_archives, 'seals', v_arch_seals, 'rows', v_arch_rows),
        'anchor', v_anchor);
END
$function$;

CREATE OR REPLACE FUNCTION memgov.archive_decision_log(p_before timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
DECLARE
    v_report    jsonb;
    v_first     bigint;
    v_last      memgov.decision_log_seals;
    v_rows      bigint;
    v_archive   bigint;
    v_deleted   bigint;
BEGIN
    IF p_before IS NULL THEN
        RAISE EXCEPTION 'memgov: archive_decision_log needs a time: rows decided before it are archived'
            USING ERRCODE = '22023';
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
            last_decision_id, row_count, last_hash)
    VALUES (v_archive, memgov.invoker_role(), p_before, v_first, v_last.seal_id, v_last.last_xact_id,
            v_last.last_decision_id, v_rows, v_last.seal_hash);
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
$function$;

DROP FUNCTION memgov.seal_hash(bytea,bigint,bigint,bigint,bigint,bigint,bigint,bytea,bigint[],bytea);

DROP FUNCTION memgov.guard_settings();

DROP FUNCTION memgov.record_setting_change();

DROP FUNCTION memgov.settings_change_hash(bytea,bigint,timestamp with time zone,text,text,text,bigint,bigint);

DROP FUNCTION memgov.sweep_expired(integer);

DROP FUNCTION memgov.refresh_ttl(uuid[]);

DROP FUNCTION memgov.item_expiry(memgov.long_term_memory_items,timestamp with time zone);

DROP FUNCTION memgov.auto_delete_batch(bigint,integer);

DROP FUNCTION memgov.auto_delete_anchors();

RESET ROLE;
DROP FUNCTION memgov.cron_settings();
SET ROLE memgov_owner;

DROP FUNCTION memgov.store_vector_search(text,double precision[],text,jsonb,integer,integer);

DROP FUNCTION memgov.store_vectors(uuid,text,text[],real[]);

DROP FUNCTION memgov.drop_vectors();

DROP FUNCTION memgov.standby_logger_status();

DROP FUNCTION memgov.remove_standby_logger();

DROP FUNCTION memgov.setup_standby_logger(text,integer,text,text,text);

DROP FUNCTION memgov.log_standby_read(jsonb);

DROP FUNCTION memgov.log_read_on_primary(text,memgov.long_term_memory_items,text,memgov.decision,jsonb,boolean,text,integer,integer);

DROP FUNCTION memgov.standby_logger_ready();

DROP FUNCTION memgov.dblink_schema();

DROP FUNCTION memgov.standby_read_seal(jsonb);

DROP FUNCTION memgov.read_allowed(text,text,bigint,memgov.long_term_memory_items,text,bigint[],bigint[]);

DROP FUNCTION memgov.row_token(memgov.long_term_memory_items,bigint);

DROP FUNCTION memgov.refuse_read_only(text);

DROP FUNCTION memgov.forget_where(jsonb,boolean);

DROP FUNCTION memgov.forget_matches(memgov.long_term_memory_items,jsonb);

DROP FUNCTION memgov.forget_filter(jsonb);

DROP FUNCTION memgov.refuse_delete();

DROP FUNCTION memgov.list_shared(memgov.shared_decision[]);

DROP FUNCTION memgov.flush_batch();

DROP FUNCTION memgov.share_decision(text,text,bigint);

DROP FUNCTION memgov.first_shared(text,text,text,text,text,memgov.decision);

DROP FUNCTION memgov.seal_batch(text);

DROP FUNCTION memgov.govern(text,memgov.long_term_memory_items,text,memgov.decision,memgov.shadow_verdict,jsonb,boolean,boolean,text,integer,integer,boolean,text);

DROP FUNCTION memgov.log_decision(text,uuid,text,text,memgov.decision,text,integer,integer,text);

DROP FUNCTION memgov.drop_samples(text,uuid[]);

DROP FUNCTION memgov.policy_drift();

DROP FUNCTION memgov.definition_drift(regprocedure,text,text);

DROP FUNCTION memgov.install_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb,text);

DROP FUNCTION memgov.stage_policy(text,text,text,text,text,text,text,text,text,jsonb,jsonb,text);

DROP FUNCTION memgov.activate_policy(text,text,boolean);

DROP FUNCTION memgov.read_classes(boolean);

DROP FUNCTION memgov.read_epoch(text);

DROP FUNCTION memgov.read_class(memgov.long_term_memory_items);

DROP FUNCTION memgov.recompute_read_classes();

DROP FUNCTION memgov.dispatch_read_classes();

DROP FUNCTION memgov.dispatch_read_epoch();

DROP FUNCTION memgov.dispatch_read_class();

DROP FUNCTION memgov.read_class_source(text);

DROP FUNCTION memgov.drop_unsampled_replays();

DROP FUNCTION memgov.dispatch_sample_rate();

DROP FUNCTION memgov.reindex_search_config();

DROP FUNCTION memgov.dispatch_search_config();

DROP FUNCTION memgov.dispatch_reads_governed();

DROP FUNCTION memgov.dispatch_retention_held();

DROP FUNCTION memgov.dispatch_policy_settings();

DROP FUNCTION memgov.dispatch_retention_rule();

DROP FUNCTION memgov.dispatch_explain_decision();

DROP FUNCTION memgov.dispatch_decide();

DROP FUNCTION memgov.decide_definition();

DROP FUNCTION memgov.recorded_function(text,text);

DROP FUNCTION memgov.engine_writes_done();

DROP FUNCTION memgov.engine_writes();

DROP FUNCTION memgov.is_engine_write(text);

DROP FUNCTION memgov.engine_token();

DROP FUNCTION memgov.session_key();

RESET ROLE;
-- generated routines: end

SET ROLE memgov_owner;
DROP TYPE memgov.shared_decision;
DROP SEQUENCE memgov.batch_seal;
DROP SEQUENCE memgov.session_key;
DROP INDEX memgov.decision_log_memory_ids_idx;
DROP INDEX memgov.decision_log_xact_id_decided_at_idx;
CREATE INDEX decision_log_decided_at_idx ON memgov.decision_log USING brin (decided_at);
CREATE INDEX decision_log_xact_id_idx ON memgov.decision_log USING brin (xact_id);
ALTER TABLE memgov.decision_log
    DROP COLUMN memory_ids,
    DROP COLUMN memory_count,
    ALTER COLUMN decided_at SET DEFAULT now();
DROP POLICY tenant_isolation ON memgov.long_term_memory_items;
DROP POLICY admin_all ON memgov.long_term_memory_items;
-- (memgov.readable's SQL body ties it to the table's row type, which stops a column's type
-- from changing: for the change, a body that reads nothing stands in, and its own comes back)
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean LANGUAGE plpgsql STABLE AS $stub$ BEGIN RETURN false; END $stub$;
ALTER TABLE memgov.long_term_memory_items
    ALTER COLUMN org_id TYPE text,
    ALTER COLUMN category TYPE text,
    ALTER COLUMN source TYPE text,
    ALTER COLUMN confidence TYPE numeric(4,3),
    ALTER COLUMN retention_policy TYPE text,
    ALTER COLUMN metadata TYPE jsonb,
    ALTER COLUMN status TYPE text,
    ADD CONSTRAINT long_term_memory_items_org_id_check CHECK (org_id <> ''),
    ADD CONSTRAINT long_term_memory_items_category_check CHECK (category <> ''),
    ADD CONSTRAINT long_term_memory_items_source_check
        CHECK (source IN ('user_confirmed', 'agent_extracted', 'system_rule')),
    ADD CONSTRAINT long_term_memory_items_confidence_check CHECK (confidence BETWEEN 0 AND 1),
    ADD CONSTRAINT long_term_memory_items_retention_policy_check
        CHECK (retention_policy IN ('permanent_until_revoked', 'ttl_7d', 'ttl_30d', 'confidence_based')),
    ADD CONSTRAINT long_term_memory_items_metadata_check CHECK (jsonb_typeof(metadata) = 'object'),
    ADD CONSTRAINT long_term_memory_items_status_check CHECK (status IN ('active', 'pending_approval'));
DROP DOMAIN memgov.tenant, memgov.category, memgov.fact_source, memgov.confidence, memgov.retention_kind,
            memgov.metadata_object, memgov.memory_status;
CREATE OR REPLACE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN p_status = 'pending_approval'
            THEN pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') OR memgov.written_here(p_item)
            WHEN memgov.reads_governed(p_org_id)
            THEN memgov.get_allowed(p_item) OR memgov.written_here(p_item)
            ELSE true
       END;
CREATE POLICY tenant_isolation ON memgov.long_term_memory_items
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()))
    WITH CHECK (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_all ON memgov.long_term_memory_items TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items))
    WITH CHECK (true);
CREATE TRIGGER enforce_write
    BEFORE INSERT OR UPDATE OR DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user <> 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.enforce_write();
CREATE TRIGGER engine_columns
    BEFORE INSERT OR UPDATE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user = 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.engine_columns();
CREATE TRIGGER forget_samples
    AFTER DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (memgov.sample_rate(OLD.org_id) > 0)
    EXECUTE FUNCTION memgov.forget_samples();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER engine_columns;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER forget_samples;
RESET ROLE;
-- memgov_settings_reader is kept: roles are cluster-wide and may serve other databases

-- forget_where (issue 26): 0001_initial's deletion log has no reason for a forgotten
-- memory; those rows go (the decision log keeps each forget's decision)
DELETE FROM memgov.deletion_log WHERE reason = 'forgotten';
ALTER TABLE memgov.deletion_log DROP CONSTRAINT deletion_log_reason_check,
    ADD CONSTRAINT deletion_log_reason_check CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected'));
COMMENT ON TABLE memgov.deletion_log IS
    'Memories deleted by retention or rejection, a row per batch and tenant: ids, reason, rule; never the content';

COMMENT ON TABLE memgov.policy_activations IS
    'Every change of the active policy version of an org_id (''*'' = global), in activation_id order';

-- compiler 1's sources: check again, which tests reads too (the inverse of the upgrade's)
SET ROLE memgov_owner;
DO $sources$
DECLARE
    v_old      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source (writes only: a read claims none)\n'
                                 || '    IF p_operation IN (''remember'', ''update'', ''forget'') AND p_item.source IN (';
    v_new      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source\n'
                                 || '    IF p_item.source IN (';
    v_version  record;
    v_body     text;
    v_changed  boolean := false;
BEGIN
    FOR v_version IN SELECT org_id, version, function_name FROM memgov.policy_versions ORDER BY org_id, version LOOP
        SELECT p.prosrc INTO v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = pg_catalog.to_regprocedure(
                   pg_catalog.format('memgov.%I(memgov.long_term_memory_items, text, text)', v_version.function_name));
        IF v_body IS NULL OR pg_catalog.strpos(v_body, v_old) = 0 THEN
            CONTINUE;
        END IF;
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION memgov.%I(p_item memgov.long_term_memory_items, '
                                  'p_operation text, p_actor text) RETURNS memgov.decision '
                                  'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                                  v_version.function_name, pg_catalog.replace(v_body, v_old, v_new));
        UPDATE memgov.policy_versions SET compiled_sql = pg_catalog.replace(compiled_sql, v_old, v_new)
         WHERE org_id = v_version.org_id AND version = v_version.version;
        v_changed := true;
    END LOOP;
    IF v_changed THEN
        PERFORM memgov.rebuild_dispatch();
    END IF;
END
$sources$;
RESET ROLE;

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents';
