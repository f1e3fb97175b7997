-- memgov.is_tenant_id, which row security asks of every statement a client runs, counts a
-- tenant id's length apart from its pattern ('*' and a length, not '{0,62}': 20k -> 3k
-- instructions a match), and memgov.flush_batch evaluates one expression where it
-- evaluated two: a stored single-row write 679k -> 667k instructions. Routines only,
-- written by scripts/revision-sql.

-- migrate:upgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.is_tenant_id(p_org_id text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(p_org_id OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
                    AND pg_catalog.length(p_org_id) OPERATOR(pg_catalog.<=) 63, false)
$function$;

CREATE OR REPLACE FUNCTION memgov.flush_batch()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- (every name, type and operator qualified, and no SET clause, which would cost each
    -- statement 12k instructions: this runs as the statement's role, with its rights and
    -- search_path, where a type of the client's pg_temp would come first; one expression,
    -- no variable: PL/pgSQL prepares each anew in every transaction, and a single-row
    -- write's statement finds nothing to list. strpos of NULL is NULL, and NULL is not > 0)
    IF pg_catalog.strpos(pg_catalog.current_setting('memgov.batch', true), E'\x1e') OPERATOR(pg_catalog.>) 0 THEN
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

RESET ROLE;
-- generated routines: end

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0004_tenant_check)';

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

CREATE OR REPLACE FUNCTION memgov.is_tenant_id(p_org_id text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(p_org_id OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$', false)
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

RESET ROLE;
-- generated routines: end

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0003_outcome_json)';
