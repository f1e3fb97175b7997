-- memgov: policy versions and the decision entry points: the decision type and its helpers.
--
-- `memgov deploy` compiles a policy file into the bodies of three functions
-- named after the version's hash (memgov.policy_<hash>, _explain, _retention);
-- memgov.install_policy (sql/033_deploy.sql) creates them with fixed signatures and
-- hands them to memgov_policy, a role with no table privileges, as whom they run (SECURITY
-- DEFINER): whatever a body says, it reads and writes no table, so installing
-- a policy never gives its author memgov_owner's rights. Callers never use
-- those names: the dispatchers memgov.decide / memgov.explain_decision /
-- memgov.retention_rule are regenerated on every activation (sql/031_dispatch.sql) and
-- route each row to the active version of its tenant (org_id), or to the global one ('*').
-- None of these is executable by a client role: clients reach decisions
-- through the write trigger, memgov.evaluate and memgov.explain (sql/034_evaluate.sql),
-- which check the tenant first.

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

-- A decision as JSON with the ids of what was logged and filed for it: the outcome that
-- errors, notices and the engine's functions report (memgov.govern). decision_json's keys
-- and these four, built in one call: a held write that appended the ids to decision_json's
-- object (jsonb ||) cost 27k instructions more. tests/db/test_decisions_json.py holds the
-- two to the same keys.
CREATE FUNCTION memgov.outcome_json(p_decision memgov.decision, p_decision_id bigint, p_memory_id uuid,
                                    p_request_id uuid, p_quarantine_id uuid)
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
        'risk_level', p_decision.risk_level,
        'decision_id', p_decision_id,
        'memory_id', p_memory_id,
        'request_id', p_request_id,
        'quarantine_id', p_quarantine_id)
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

RESET ROLE;
