-- memgov: a tenant's policy settings and deployment (docs/policy.md).
--
-- The settings helpers (memgov.policy_setting and its typed callers) read the
-- policy_settings dispatcher of sql/031_dispatch.sql. memgov.stage_policy records a
-- compiled version, memgov.install_policy creates its functions, memgov.activate_policy,
-- rollback_policy and undeploy_policy change the active version and regenerate the
-- dispatchers; memgov.policy_drift compares the live functions with what was deployed.
-- Deploys are serialised by memgov.lock_deploys.

SET ROLE memgov_owner;

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

RESET ROLE;
