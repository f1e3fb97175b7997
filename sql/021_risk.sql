-- memgov: the risk score (docs/detectors.md): memgov.risk_level maps a score to a level,
-- memgov.risk_assessment scores a text with the detectors of sql/020_detectors.sql.
--
-- Like the detectors, everything here is IMMUTABLE and PARALLEL SAFE. The grant at the end
-- makes the detectors of both files executable by every role (the compiled policies, which
-- run as memgov_policy, call them).

SET ROLE memgov_owner;

-- Maps a risk score to low/medium/high/critical using p_thresholds low_max/medium_max/high_max. A
-- key it lacks takes the default of memgov.setting_defaults() -> 'risk_thresholds', restated here:
-- this function is PUBLIC and setting_defaults() is not (tests/db/test_setting_defaults.py holds
-- the two together). Compiled policies always pass all three.
CREATE OR REPLACE FUNCTION memgov.risk_level(p_score numeric, p_thresholds jsonb DEFAULT NULL)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_score IS NULL THEN NULL
    WHEN p_score <= coalesce((p_thresholds ->> 'low_max')::numeric, 0.30) THEN 'low'
    WHEN p_score <= coalesce((p_thresholds ->> 'medium_max')::numeric, 0.60) THEN 'medium'
    WHEN p_score <= coalesce((p_thresholds ->> 'high_max')::numeric, 0.80) THEN 'high'
    ELSE 'critical'
END;


-- The risk score from detector flags already computed by the caller: score, level and the factors that made it.
CREATE OR REPLACE FUNCTION memgov.risk_assessment(
    p_operation       text,
    p_contains_pii    boolean,
    p_contains_secret boolean,
    p_context_source  text,
    p_org_id          text,
    p_project_id      text,
    p_thresholds      jsonb,
    OUT score   numeric,
    OUT level   text,
    OUT factors jsonb)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
-- score = max(mean(factors), 0.8 * max(factor)), exact numeric, rounded to 3
-- decimals; `factors` names every factor that took part, e.g.
-- {"operation": 0.30, "contains_pii": 0.60, "untrusted_source": 0.40}.
DECLARE
    v_trusted   jsonb := coalesce(p_thresholds -> 'trusted_sources',
                                  '["langgraph", "openai_sessions", "mcp"]');
    v_operation numeric;
    v_sum       numeric;
    v_max       numeric;
    v_count     integer;
BEGIN
    v_operation := CASE p_operation
        WHEN 'get'      THEN 0.05
        WHEN 'search'   THEN 0.05
        WHEN 'remember' THEN 0.30
        WHEN 'update'   THEN 0.40
        WHEN 'forget'   THEN 0.50
    END;
    IF v_operation IS NULL THEN
        RAISE EXCEPTION 'memgov.risk_assessment: unknown operation %',
                        coalesce(quote_literal(p_operation), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',          -- 22023
                  HINT = 'operation must be one of get, search, remember, update, forget';
    END IF;
    IF jsonb_typeof(v_trusted) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'memgov.risk_assessment: trusted_sources must be a JSON array, got %', v_trusted
            USING ERRCODE = 'invalid_parameter_value';          -- 22023
    END IF;

    factors := jsonb_build_object('operation', v_operation)
        || CASE WHEN p_contains_pii THEN '{"contains_pii": 0.60}' ELSE '{}' END::jsonb
        || CASE WHEN p_contains_secret THEN '{"contains_secret": 0.70}' ELSE '{}' END::jsonb
        -- NULL is never a trusted source: a write that names no channel is untrusted.
        || CASE WHEN v_trusted ? p_context_source THEN '{"trusted_source": 0.05}'
                ELSE '{"untrusted_source": 0.40}' END::jsonb
        || CASE WHEN nullif(btrim(p_org_id), '') IS NULL OR nullif(btrim(p_project_id), '') IS NULL
                THEN '{"missing_scope": 0.70}' ELSE '{}' END::jsonb;

    SELECT sum(f.value::numeric), max(f.value::numeric), count(*)
      INTO v_sum, v_max, v_count
      FROM jsonb_each_text(factors) AS f;

    score := round(greatest(v_sum / v_count, 0.8 * v_max), 3);
    level := memgov.risk_level(score, p_thresholds);
END
$fn$;


-- The risk score for an operation on p_text: runs contains_pii/contains_secret, then the flag form above.
CREATE OR REPLACE FUNCTION memgov.risk_assessment(
    p_operation      text,
    p_text           text,
    p_context_source text,
    p_org_id         text,
    p_project_id     text,
    p_thresholds     jsonb DEFAULT NULL,
    OUT score   numeric,
    OUT level   text,
    OUT factors jsonb)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT r.score, r.level, r.factors
      FROM memgov.risk_assessment(p_operation,
                                  coalesce(memgov.contains_pii(p_text), false),
                                  coalesce(memgov.contains_secret(p_text), false),
                                  p_context_source, p_org_id, p_project_id, p_thresholds) AS r;
END;

-- The detectors are pure functions of their arguments: every role may call them
-- (the compiled policies, which run as memgov_policy, do).
DO $grant$
DECLARE
    v_function regprocedure;
BEGIN
    FOR v_function IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           AND p.proname = ANY (ARRAY[
               'pii_candidate_pattern', 'pii_pattern', 'card_pattern', 'secret_token_candidate_pattern',
               'secret_token_pattern', 'secret_assignment_candidate_pattern', 'secret_assignment_pattern',
               'luhn_valid', 'contains_card', 'contains_pii', 'contains_secret', 'detect_content',
               'ip_address_pattern', 'contains_ip_address', 'iban_pattern', 'iban_valid', 'contains_iban',
               'risk_level', 'risk_assessment'])
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', v_function);
    END LOOP;
END
$grant$;

RESET ROLE;
