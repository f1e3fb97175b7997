-- memgov: memgov.evaluate and memgov.explain, the clients' dry run of a decision
-- (`memgov evaluate`): the active policy's decision, or its explanation, for an item that
-- is not written, after the tenant check. The grants of the decision helpers that the
-- client roles call are here too.

SET ROLE memgov_owner;

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
