-- memgov: the dispatchers, regenerated from the active policy versions.
--
-- memgov.rebuild_dispatch (sql/032_read_dispatch.sql) runs at every deploy, activation,
-- rollback and undeploy (sql/033_deploy.sql): one small generator per dispatcher
-- (memgov.dispatch_decide, dispatch_explain_decision, ...) writes that dispatcher's
-- CREATE OR REPLACE from the active versions, then its named steps keep the rows in step with what changed (the
-- memories' text search configuration, the replay samples, the read classes).
-- memgov.rebuild_shadow_dispatch does the same for the running shadows' dispatchers.
-- None of these is executable by a client role: the per-row path calls only the
-- dispatchers, which are static SQL between two deploys.

SET ROLE memgov_owner;

-- Regenerates the shadow dispatchers from the running shadows (memgov.policy_shadows):
-- shadow_of, the running shadow that sees a tenant's decisions (NULL: none; the write
-- path's test, the constant NULL while no shadow runs), and shadow_decide, the decision of
-- that shadow's candidate. A tenant's own shadow sees its tenant's decisions; the global
-- shadow those of every other tenant that follows the global policy: the decisions each
-- candidate would take once promoted. Runs whenever a shadow starts or ends, and from
-- rebuild_dispatch (a tenant's own policy takes it out of the global shadow's sight).
CREATE FUNCTION memgov.rebuild_shadow_dispatch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $rebuild$
DECLARE
    v_of           text := '';
    v_decide       text := '';
    v_global_id    bigint;
    v_global_call  text := 'NULL';
    v_own          text[] := '{}';  -- tenants that follow a policy of their own (and no shadow of theirs)
    v_call         text;
    v_shadow       record;
BEGIN
    FOR v_shadow IN
        SELECT s.shadow_id, s.org_id, v.version, v.mode, v.function_name,
               coalesce((v.settings ->> 'reads')::boolean, false) AS reads
          FROM memgov.policy_shadows s
          JOIN memgov.policy_versions v ON v.org_id = s.org_id AND v.version = s.version
         WHERE s.ended_at IS NULL
         ORDER BY s.org_id COLLATE "C"
    LOOP
        -- a candidate without read rules answers reads as the engine does for such a policy
        v_call := format('memgov.%I(p_item, p_operation, p_actor)', v_shadow.function_name);
        IF NOT v_shadow.reads THEN
            v_call := format($c$CASE WHEN p_operation IN ('search', 'get') THEN memgov.ungoverned_read(%L, %L) ELSE %s END$c$,
                             v_shadow.version, v_shadow.mode, v_call);
        END IF;
        IF v_shadow.org_id = '*' THEN
            v_global_id := v_shadow.shadow_id;
            v_global_call := v_call;
            CONTINUE;
        END IF;
        v_of := v_of || format(E'        WHEN p_org_id = %L THEN %s\n', v_shadow.org_id, v_shadow.shadow_id);
        v_decide := v_decide || format(E'    IF p_item.org_id = %L THEN\n        RETURN %s;\n    END IF;\n',
                                       v_shadow.org_id, v_call);
    END LOOP;
    IF v_global_id IS NOT NULL THEN
        SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_own
          FROM memgov.policy_versions v
         WHERE v.active AND v.org_id <> '*'
           AND NOT EXISTS (SELECT FROM memgov.policy_shadows s WHERE s.org_id = v.org_id AND s.ended_at IS NULL);
        IF cardinality(v_own) > 0 THEN
            v_of := v_of || format(E'        WHEN p_org_id = ANY (%L::text[]) THEN NULL\n', v_own);
            v_decide := v_decide || format(E'    IF p_item.org_id = ANY (%L::text[]) THEN\n        RETURN NULL;\n    END IF;\n',
                                           v_own);
        END IF;
    END IF;

    -- a SQL-standard body that the planner inlines into the write trigger's test
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.shadow_of(p_org_id text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        CASE WHEN v_of = '' THEN coalesce(v_global_id::text, 'NULL') || '::bigint'
             ELSE format(E'CASE\n%s        ELSE %s::bigint\n    END', v_of, coalesce(v_global_id::text, 'NULL')) END);
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.shadow_decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$, v_decide, v_global_call);
END
$rebuild$;

-- One compiled function as memgov.stage_policy recorded it in a version's compiled_sql:
-- its definition (pg_get_functiondef's text, "CREATE OR REPLACE FUNCTION memgov.<name>("
-- to the line after the body's closing quote) and its body; NULLs when the record holds
-- none. The record is pg_get_functiondef's output, one statement after another; each
-- body is quoted with "$function", as many x as keep that prefix out of the body, and "$",
-- so the quote's next occurrence ends the body (plain string search: no pattern that a
-- body could steer).
CREATE FUNCTION memgov.recorded_function(p_compiled_sql text, p_function text,
                                         OUT definition text, OUT body text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- The statement that creates memgov.decide from the active versions: the body of the
-- global policy's decide function as its deploy recorded it (policy_versions.compiled_sql,
-- never the live function: what runs as the dispatcher is what was deployed), with the
-- tenant overrides' routing after its marker line, in the layout pg_get_functiondef prints.
-- Without a global policy, the routing and memgov.no_policy_decision(). A tenant's decide body
-- holds the line `-- memgov:tenant-routing` once (TENANT_ROUTING_MARKER in memgov_pg/compiler.py).
CREATE FUNCTION memgov.decide_definition()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- The generators below write one dispatcher each from the active policy versions (a
-- tenant's own version routes its rows; every other tenant follows the global one, '*').
-- Each runs only from memgov.rebuild_dispatch, at deploy and rollback: the per-row path is
-- static SQL. A tenant's routing comes in org_id order (COLLATE "C"), so that the same
-- versions always generate the same text (memgov.policy_drift compares it).

-- memgov.decide carries the global policy's own body as recorded at its deploy (one
-- PL/pgSQL call per row, not two), preceded by the tenant overrides' routing; it runs as
-- memgov_policy, like the compiled functions.
CREATE FUNCTION memgov.dispatch_decide()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE memgov.decide_definition();
    PERFORM memgov.hand_to_policy_role('memgov.decide(memgov.long_term_memory_items, text, text)');
END
$$;

-- explain_decision: the explanation of the tenant's active version ('[]' without a policy).
CREATE FUNCTION memgov.dispatch_explain_decision()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- retention_rule is SQL, which the planner inlines into the sweep's walk: one call per
-- row (the compiled function), not two.
CREATE FUNCTION memgov.dispatch_retention_rule()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- policy_settings: the settings of a tenant's active version, as constants (a tenant's own
-- policy decides all its settings; one it leaves out takes the default, memgov.policy_setting).
CREATE FUNCTION memgov.dispatch_policy_settings()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- retention_held: SQL that the planner inlines into the sweep's queries, so that a tenant
-- whose active policy cannot deny a forget by a rule costs no decision per row (tenants
-- without a policy of their own follow the global one; with none at all, nothing holds;
-- memgov.policy_may_hold).
CREATE FUNCTION memgov.dispatch_retention_held()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- reads_governed: whether a tenant's active policy decides reads (its settings' "reads").
-- Like search_config and sample_rate, a SQL-standard body (bound at creation, whatever the
-- caller's search_path) that the planner inlines into row level security and the write
-- trigger, a constant where no tenant's policy sets them apart.
CREATE FUNCTION memgov.dispatch_reads_governed()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- search_config: a tenant's text search configuration (settings' search.text_config, else
-- the default). Returns whether its definition changed: then memgov.reindex_search_config.
CREATE FUNCTION memgov.dispatch_search_config()
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- Step: the memories whose tenant's text search configuration changed are indexed anew
-- (search_vector follows search_config), in the deploy's transaction.
CREATE FUNCTION memgov.reindex_search_config()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.engine_writes();
    UPDATE memgov.long_term_memory_items m
       SET search_config = memgov.search_config(m.org_id)
     WHERE m.search_config <> memgov.search_config(m.org_id);
    PERFORM memgov.engine_writes_done();
END
$$;

-- sample_rate: the share of a tenant's stored or held writes kept for replay (its policy's
-- replay.sample_rate; none by default), a constant in the write trigger's test.
CREATE FUNCTION memgov.dispatch_sample_rate()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $gen$
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
$gen$;

-- Step: a tenant whose policy stops sampling has its samples deleted: samples exist only
-- where the memories' deletion deletes them (the trigger forget_samples).
CREATE FUNCTION memgov.drop_unsampled_replays()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM memgov.replay_samples s WHERE memgov.sample_rate(s.org_id) = 0;
END
$$;

RESET ROLE;
