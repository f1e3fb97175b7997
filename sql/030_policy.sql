-- memgov: policy versions, the decision entry points and deployment.
--
-- `memgov deploy` compiles a policy file into the bodies of three functions
-- named after the version's hash (memgov.policy_<hash>, _explain, _retention);
-- memgov.install_policy creates them with fixed signatures and hands them to
-- memgov_policy, a role with no table privileges, as whom they run (SECURITY
-- DEFINER): whatever a body says, it reads and writes no table, so installing
-- a policy never gives its author memgov_owner's rights. Callers never use
-- those names: the dispatchers memgov.decide / memgov.explain_decision /
-- memgov.retention_rule are regenerated on every activation and route each
-- row to the active version of its tenant (org_id), or to the global one ('*').
-- None of these is executable by a client role: clients reach decisions
-- through the write trigger, memgov.evaluate and memgov.explain, which check
-- the tenant first.

SET ROLE memgov_owner;

-- A decision (docs/policy.md). Returned by the compiled functions, logged by the triggers.
CREATE TYPE memgov.decision AS (
    action            text,
    reason_codes      text[],
    matched_rule_ids  text[],
    policy_version    text,
    mode              text,
    enforced          boolean,
    risk_score        numeric,
    risk_level        text
);

-- Turns a decision into its JSON shape (action, reason_codes, matched_rule_ids, ...).
-- STABLE, as to_jsonb is: a SQL function is inlined only if its body is as strict as its label.
CREATE FUNCTION memgov.decision_json(p_decision memgov.decision)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'action', p_decision.action,
        'reason_codes', to_jsonb(p_decision.reason_codes),
        'matched_rule_ids', to_jsonb(p_decision.matched_rule_ids),
        'policy_version', p_decision.policy_version,
        'mode', p_decision.mode,
        'enforced', p_decision.enforced,
        'risk_score', p_decision.risk_score,
        'risk_level', p_decision.risk_level)
$$;

-- Builds a row of the governed table from a JSON item, with the table's defaults.
CREATE FUNCTION memgov.item_from_json(p_item jsonb)
RETURNS memgov.long_term_memory_items
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_item IS NULL OR jsonb_typeof(p_item) <> 'object' THEN
        RAISE EXCEPTION 'an item must be a JSON object'
            USING ERRCODE = '22023',
                  HINT = 'pass the columns of memgov.long_term_memory_items as keys, e.g. {"org_id": "acme", ...}';
    END IF;
    RETURN jsonb_populate_record(
        NULL::memgov.long_term_memory_items,
        jsonb_build_object(
            'is_sensitive', false,
            'retention_policy', 'permanent_until_revoked',
            'metadata', '{}'::jsonb,
            'status', 'active',
            'created_at', now(),
            'updated_at', now()) || p_item);
END
$$;

-- Checks an operation name; raises 22023 for anything but remember, update, forget, search, get.
CREATE FUNCTION memgov.check_operation(p_operation text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_operation IS NULL OR p_operation NOT IN ('remember', 'update', 'forget', 'search', 'get') THEN
        RAISE EXCEPTION 'unknown operation %', coalesce(quote_literal(p_operation), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'operation is one of remember, update, forget, search, get';
    END IF;
    RETURN p_operation;
END
$$;

-- The decision when no policy is active for a tenant: fail closed.
CREATE FUNCTION memgov.no_policy_decision()
RETURNS memgov.decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW('deny', ARRAY['NO_ACTIVE_POLICY'], ARRAY[]::text[], NULL, 'enforce', true,
               NULL, NULL)::memgov.decision
$$;

-- The action a decision applies: its own when enforced, allow when not (monitor mode).
CREATE FUNCTION memgov.applied_action(p_decision memgov.decision)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;

-- Whether a decision denies by a rule (not by on_policy_miss or the mode): what holds a
-- memory when the decision is a forget.
CREATE FUNCTION memgov.denied_by_rule(p_decision memgov.decision)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_decision.enforced AND p_decision.action = 'deny' AND cardinality(p_decision.matched_rule_ids) > 0;

-- The decision on a read under a policy that does not govern reads (no search or get rule).
CREATE FUNCTION memgov.ungoverned_read(p_version text, p_mode text)
RETURNS memgov.decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW('allow', ARRAY['READS_NOT_GOVERNED'], ARRAY[]::text[], p_version, p_mode, true,
           NULL, NULL)::memgov.decision;

-- Hands a function to memgov_policy, as whom it then runs. ALTER ... OWNER needs the new
-- owner to hold CREATE on the schema: it holds it only for that statement.
CREATE FUNCTION memgov.hand_to_policy_role(p_function regprocedure)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    GRANT CREATE ON SCHEMA memgov TO memgov_policy;
    EXECUTE format('ALTER FUNCTION %s OWNER TO memgov_policy', p_function);
    REVOKE CREATE ON SCHEMA memgov FROM memgov_policy;
END
$$;

-- Whether a rule's condition document ({match, conditions}: memgov.memory_policy_rules)
-- keeps the rule from ever deciding a `forget`: an operation_type test that a forget fails,
-- in a rule that must pass all its tests (match all, or a single test).
CREATE FUNCTION memgov.rule_excludes_forget(p_condition jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (p_condition ->> 'match' = 'all' OR jsonb_array_length(p_condition -> 'conditions') = 1)
           AND EXISTS (
               SELECT FROM jsonb_array_elements(p_condition -> 'conditions') AS c
                WHERE c ->> 'field' = 'operation_type'
                  AND CASE c ->> 'operator'
                          WHEN 'eq'  THEN jsonb_typeof(c -> 'value') = 'string' AND c ->> 'value' <> 'forget'
                          WHEN 'neq' THEN c -> 'value' = '"forget"'::jsonb
                          WHEN 'in'  THEN jsonb_typeof(c -> 'value') = 'array' AND NOT (c -> 'value') ? 'forget'
                          WHEN 'nin' THEN jsonb_typeof(c -> 'value') = 'array' AND (c -> 'value') ? 'forget'
                          ELSE false
                      END)
$$;

-- Whether a deployed policy version may deny a `forget` by a rule, and so hold memories
-- against automatic deletion (memgov.retention_held): it enforces (monitor mode never
-- holds), and one of its deny rules is not kept from forgets by an operation_type test.
-- Sound, not exact: a deny rule whose other tests no forget passes still counts. A deny
-- without a rule (on_policy_miss, strict mode, a source the actor may not claim) never holds.
CREATE FUNCTION memgov.policy_may_hold(p_org_id text, p_version text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT v.mode <> 'monitor'
           AND EXISTS (SELECT FROM memgov.memory_policy_rules r
                        WHERE r.org_id = v.org_id AND r.policy_version = v.version
                          AND r.action = 'deny' AND NOT memgov.rule_excludes_forget(r.condition))
      FROM memgov.policy_versions v
     WHERE v.org_id = p_org_id AND v.version = p_version
$$;

-- Whether the active policy, deciding `forget` for a memory on memgov's behalf, denies it
-- by a rule: a legal hold. (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.forget_denied_by_rule(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN memgov.denied_by_rule(memgov.decide(p_item, 'forget', 'memgov_owner'));
END
$$;

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

-- Regenerates the dispatchers from the active policy versions: decide,
-- explain_decision, retention_rule, policy_settings (the feedback and
-- retention settings of a tenant's active version, as constants),
-- retention_held (which asks for a forget decision only where the active
-- policy may hold, memgov.policy_may_hold), reads_governed (whether a
-- tenant's active policy decides reads: its settings' "reads") and search_config (the
-- tenant's text search configuration: settings' search.text_config; when it
-- changes, the memories it changes for are indexed anew), sample_rate (the share of a
-- tenant's writes kept for replay: settings' replay.sample_rate), then the shadow dispatchers.
-- Runs at deploy and rollback only; the per-row path is static SQL.
CREATE FUNCTION memgov.rebuild_dispatch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $rebuild$
DECLARE
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
    v_version    record;
    v_read       text;           -- the version's read class, as SQL of p_item (NULL::bigint: none)
    v_reader     text;           -- its reader's class, as PL/pgSQL statements
    v_reads      text := '';
    v_readers    text := '';
    v_epochs     text := '';
    v_global_read    text := 'NULL::bigint';
    v_global_reader  text := E'        RETURN NULL;\n';
    v_global_epoch   text := 'NULL::bigint';
    v_any_read   boolean := false;
BEGIN
    FOR v_version IN
        SELECT org_id, function_name, settings, memgov.policy_may_hold(org_id, version) AS holds
          FROM memgov.policy_versions
         WHERE active
         ORDER BY org_id COLLATE "C"
    LOOP
        -- the read class (sql/060_recall.sql): where the version governs reads and its
        -- compiler wrote a read class function, its epoch and that function; else none
        v_read := 'NULL::bigint';
        v_reader := E'        RETURN NULL;\n';
        IF coalesce((v_version.settings ->> 'reads')::boolean, false)
           AND to_regprocedure(format('memgov.%I(memgov.long_term_memory_items, text)',
                                      v_version.function_name || '_read')) IS NOT NULL THEN
            v_any_read := true;
            SELECT format('(%s::bigint << 32 | memgov.%I(p_item, NULL))', v.read_epoch, v_version.function_name || '_read'),
                   format(E'        v_epoch := %s;\n        v_class := memgov.%I(NULL, memgov.invoker_role());\n',
                          v.read_epoch, v_version.function_name || '_read'),
                   v.read_epoch::text
              INTO v_read, v_reader, v_body
              FROM memgov.policy_versions v
             WHERE v.org_id = v_version.org_id AND v.active;
        ELSE
            v_body := 'NULL::bigint';
        END IF;
        IF v_version.org_id = '*' THEN
            v_global_read := v_read;
            v_global_reader := v_reader;
            v_global_epoch := v_body;
            v_global := v_version.function_name;
            v_global_settings := v_version.settings;
            v_global_holds := v_version.holds;
            v_global_reads := coalesce((v_version.settings ->> 'reads')::boolean, false);
            CONTINUE;
        END IF;
        -- a tenant's own policy decides all its settings (one it leaves out: the default)
        v_configs := v_configs || format(E'        WHEN p_org_id = %L THEN %L::regconfig\n', v_version.org_id,
                                         coalesce(v_version.settings -> 'search' ->> 'text_config',
                                                  memgov.setting_defaults() #>> '{search,text_config}'));
        v_settings := v_settings || format(
            E'    IF p_org_id = %L THEN\n        RETURN %L::jsonb;\n    END IF;\n',
            v_version.org_id, v_version.settings);
        v_explain := v_explain || format(
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
            v_version.org_id, v_version.function_name || '_explain');
        v_retention := v_retention || format(
            E'        WHEN p_item.org_id = %L THEN memgov.%I(p_item)\n',
            v_version.org_id, v_version.function_name || '_retention');
        v_reads := v_reads || format(E'        WHEN p_item.org_id = %L THEN %s\n', v_version.org_id, v_read);
        v_readers := v_readers || format(E'    WHEN v_org_id = %L THEN\n%s', v_version.org_id, v_reader);
        v_epochs := v_epochs || format(E'        WHEN p_org_id = %L THEN %s\n', v_version.org_id, v_body);
    END LOOP;

    -- memgov.decide carries the global policy's own body as recorded at its deploy (one
    -- PL/pgSQL call per row, not two), preceded by the tenant overrides' routing
    EXECUTE memgov.decide_definition();
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
               v_configs, coalesce(v_global_settings -> 'search' ->> 'text_config',
                                  memgov.setting_defaults() #>> '{search,text_config}')));
    -- a tenant whose text search configuration changed has its memories indexed anew
    -- (search_vector follows search_config), in the deploy's transaction
    IF v_old_configs IS DISTINCT FROM pg_get_functiondef('memgov.search_config(text)'::regprocedure) THEN
        PERFORM memgov.engine_writes();
        UPDATE memgov.long_term_memory_items m
           SET search_config = memgov.search_config(m.org_id)
         WHERE m.search_config <> memgov.search_config(m.org_id);
        PERFORM memgov.engine_writes_done();
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

    -- read classes (sql/060_recall.sql). read_class: a row's, as the write trigger stores it
    -- (SQL, inlined into the trigger: a constant NULL where no policy has read classes);
    -- read_epoch: the epoch a tenant's current rows carry; read_classes: the classes the
    -- session's role may read (p_allowed) or may not, in its tenant, for row level security
    -- (once per statement; NULL where its policy has none: every row is decided as before)
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.read_class(p_item memgov.long_term_memory_items)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT %s
$body$$f$,
        format(CASE WHEN v_reads = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_reads, v_global_read));
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.read_epoch(p_org_id text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_epochs = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_epochs, v_global_epoch));
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
        CASE WHEN v_readers = '' THEN regexp_replace(v_global_reader, '^    ', '', 'gn')
             ELSE format(E'    CASE\n%s    ELSE\n%s    END CASE;\n', v_readers, v_global_reader) END);
    -- rows whose read class another version decided are recomputed (until then they are
    -- decided row by row: row level security trusts a class of the tenant's current epoch only)
    IF v_any_read THEN
        PERFORM memgov.engine_writes();
        UPDATE memgov.long_term_memory_items m
           SET read_class = memgov.read_class(m)
         WHERE memgov.read_epoch(m.org_id) IS NOT NULL
           AND (m.read_class >> 32) IS DISTINCT FROM memgov.read_epoch(m.org_id);
        PERFORM memgov.engine_writes_done();
    END IF;
    PERFORM memgov.rebuild_shadow_dispatch();
END
$rebuild$;

-- Until the first deploy every tenant is routed to memgov.no_policy_decision().
SELECT memgov.rebuild_dispatch();

-- One setting of a tenant's active policy (p_section feedback or retention), or the
-- engine's default when the policy leaves it out (memgov.setting_defaults()): the one place
-- that falls back on a default. The typed helpers below are what callers use. Like them it
-- has no SET clause, so that it is inlined into the per-row queries that call it.
CREATE FUNCTION memgov.policy_setting(p_org_id text, p_section text, p_key text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(memgov.policy_settings(p_org_id) -> p_section ->> p_key,
                    memgov.setting_defaults() -> p_section ->> p_key)
$$;

-- A feedback setting of a tenant (confirm_delta, reject_delta, reject_delete_below, edit_confidence).
CREATE FUNCTION memgov.feedback_setting(p_org_id text, p_key text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'feedback', p_key)::numeric
$$;

-- A retention setting of a tenant that is a duration (confidence_grace, approval_ttl).
CREATE FUNCTION memgov.retention_interval(p_org_id text, p_key text)
RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'retention', p_key)::interval
$$;

-- The confidence below which a tenant's confidence_based memories start their grace.
CREATE FUNCTION memgov.confidence_floor(p_org_id text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'retention', 'confidence_floor')::numeric
$$;

-- the sweep (run_maintenance runs as its caller) reads the retention settings, and
-- `memgov retention schedule` the default schedule
GRANT EXECUTE ON FUNCTION memgov.policy_settings(text), memgov.policy_setting(text, text, text),
                          memgov.setting_defaults()
    TO memgov_admin;
-- which deployed versions make the sweep decide forget per due memory (docs/retention.md)
GRANT EXECUTE ON FUNCTION memgov.policy_may_hold(text, text), memgov.rule_excludes_forget(jsonb) TO memgov_admin;

-- Serialises deploys, activations and rollbacks: a row lock no client can take or hold.
CREATE FUNCTION memgov.lock_deploys()
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT FROM memgov.engine_locks WHERE name = 'deploy' FOR UPDATE
$$;

-- Makes one deployed version the active one of its tenant and reroutes the dispatchers.
-- The activation is recorded (memgov.policy_activations) when the active version changes,
-- and for a policy revision's deploy (p_revision) always, even of the version active
-- already: memgov.undeploy_policy, the revision's downgrade, then undoes that very deploy.
CREATE FUNCTION memgov.activate_policy(p_org_id text, p_version text, p_revision boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- Installs a compiled policy version without activating it (what a shadow deployment and
-- a replay decide with). The bodies become memgov.<p_function_name>, _explain, _retention
-- and, when the policy has one, _read (its read class, sql/060_recall.sql), with the
-- signatures written here; PostgreSQL, not our compiler, has the
-- last word on each body. A version deployed before with the same content is left as it is;
-- a name taken already (a function of that name, or another version's) is refused (MG409).
-- compiled_sql records the three definitions as PostgreSQL prints them: what
-- memgov.decide_definition and memgov.policy_drift read.
CREATE FUNCTION memgov.stage_policy(
    p_org_id          text,
    p_version         text,
    p_sha256          text,
    p_mode            text,
    p_function_name   text,
    p_source_yaml     text,
    p_decide_body     text,
    p_explain_body    text,
    p_retention_body  text,
    p_settings        jsonb,
    p_rules           jsonb,
    p_read_body       text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- Installs a compiled policy (what `memgov compile` prints) and activates it, atomically.
CREATE FUNCTION memgov.install_policy(
    p_org_id          text,
    p_version         text,
    p_sha256          text,
    p_mode            text,
    p_function_name   text,
    p_source_yaml     text,
    p_decide_body     text,
    p_explain_body    text,
    p_retention_body  text,
    p_settings        jsonb,
    p_rules           jsonb,
    p_read_body       text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN memgov.activate_policy(p_org_id,
        memgov.stage_policy(p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml,
                            p_decide_body, p_explain_body, p_retention_body, p_settings, p_rules,
                            p_read_body));
END
$$;

-- Re-activates an earlier version (default: the latest one deployed before the active one
-- that was ever active).
CREATE FUNCTION memgov.rollback_policy(p_org_id text DEFAULT '*', p_to_version text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_target  text := p_to_version;
BEGIN
    IF v_target IS NULL THEN
        SELECT prev.version INTO v_target
          FROM memgov.policy_versions cur
          JOIN memgov.policy_versions prev
            ON prev.org_id = cur.org_id AND prev.deployed_at < cur.deployed_at
         WHERE cur.org_id = p_org_id AND cur.active
           -- a version only ever shadowed (or replayed) was never the policy: not a target
           AND EXISTS (SELECT FROM memgov.policy_activations a
                        WHERE a.org_id = prev.org_id AND a.version = prev.version)
         ORDER BY prev.deployed_at DESC
         LIMIT 1;
        IF v_target IS NULL THEN
            RAISE EXCEPTION 'no earlier policy version to roll back to for %',
                            CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
                USING ERRCODE = 'MG404',
                      HINT = 'name a version with --to';
        END IF;
    END IF;
    RETURN memgov.activate_policy(p_org_id, v_target);
END
$$;

-- Undoes the latest activation of a version (what a policy revision's downgrade runs):
-- re-activates the version that was active right before it, or leaves the scope with no
-- active policy (every write is then denied: memgov.no_policy_decision). A revision's deploy
-- of the version that was active already is an activation of its own (memgov.activate_policy
-- p_revision): undoing it leaves that version active. When p_version is not the active
-- version of the scope, nothing changes (a NOTICE says so). Returns the version active
-- afterwards (NULL: none). The undone version stays deployed.
CREATE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- How a live function of schema memgov differs from a definition (a "CREATE OR REPLACE
-- FUNCTION memgov.<p_function>(" statement as pg_get_functiondef prints it): NULL when it
-- does not. PostgreSQL decides what a definition is (alembic_utils' way): when the printed
-- texts differ, the definition is created under a scratch name in a subtransaction that is
-- undone, and the two are compared as PostgreSQL prints them, name aside. A read-only
-- transaction cannot create it: there the printed texts must be equal.
CREATE FUNCTION memgov.definition_drift(p_live regprocedure, p_function text, p_definition text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- The deployed policy functions whose live definition is not the one recorded at their
-- deploy: each version's memgov.policy_<hash>, _explain and _retention against its
-- compiled_sql, and memgov.decide against what the active versions' records make of it
-- (memgov.decide_definition). One row per function that differs (org_id '*' and the active
-- global version for decide); none when the code is what was deployed. What `memgov
-- doctor` (check policy-drift) and `memgov verify-log` report.
CREATE FUNCTION memgov.policy_drift()
RETURNS TABLE (org_id text, version text, function_name text, problem text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- The item of a dry run, from JSON, in a tenant the caller may act in (42501 otherwise).
CREATE FUNCTION memgov.dry_run_item(p_item jsonb)
RETURNS memgov.long_term_memory_items
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items := memgov.item_from_json(p_item);
BEGIN
    IF v_item.org_id IS NOT NULL THEN  -- without one, the global policy decides: every tenant sees it
        PERFORM memgov.check_tenant(v_item.org_id);
    END IF;
    RETURN v_item;
END
$$;

-- Dry run: the decision the active policy takes on an item of the caller's tenant,
-- for the caller's role, writing nothing.
CREATE FUNCTION memgov.evaluate(item jsonb, operation text DEFAULT 'remember')
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items := memgov.dry_run_item(item);
BEGIN
    RETURN memgov.decision_json(memgov.decide(v_item, memgov.check_operation(operation), memgov.invoker_role()));
END
$$;

-- Dry run with reasons: the decision plus, for every write rule, whether it matched
-- and the first condition that failed.
CREATE FUNCTION memgov.explain(item jsonb, operation text DEFAULT 'remember')
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item       memgov.long_term_memory_items := memgov.dry_run_item(item);
    v_operation  text := memgov.check_operation(operation);
BEGIN
    RETURN memgov.decision_json(memgov.decide(v_item, v_operation, memgov.invoker_role()))
           || jsonb_build_object('rules', memgov.explain_decision(v_item, v_operation, memgov.invoker_role()));
END
$$;

-- Privileges: deploying is memgov_admin's; the dry runs are every memgov role's, for its
-- own tenant (admins: any). Everything else here is the engine's.
GRANT EXECUTE ON FUNCTION
    memgov.activate_policy(text, text, boolean),
    memgov.install_policy(text, text, text, text, text, text, text, text, text, jsonb, jsonb, text),
    memgov.stage_policy(text, text, text, text, text, text, text, text, text, jsonb, jsonb, text),
    memgov.rollback_policy(text, text),
    memgov.undeploy_policy(text, text),
    memgov.policy_drift()
    TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.evaluate(jsonb, text), memgov.explain(jsonb, text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
-- the compiled policies run as memgov_policy and call what it may execute
GRANT EXECUTE ON FUNCTION memgov.no_policy_decision(), memgov.decision_json(memgov.decision)
    TO memgov_policy;

RESET ROLE;
