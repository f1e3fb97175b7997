-- memgov: memgov.remember, the governed insert that returns the decision instead of
-- raising, and the approval channels that a held write notifies (LISTEN names a secret of
-- the database, so that no session can guess another tenant's channel). The grants of
-- the write path's client functions are at the end.

SET ROLE memgov_owner;

-- The LISTEN channel of a tenant's approval requests: named by a secret of the database,
-- so that a session cannot guess (and listen to) another tenant's channel.
CREATE TABLE memgov.channel_secret (
    secret  text NOT NULL DEFAULT gen_random_uuid()::text
);
INSERT INTO memgov.channel_secret DEFAULT VALUES;

-- (PL/pgSQL, no SET clause: a held write calls it under the trigger's pinned search_path,
-- and PL/pgSQL keeps its plan for the session where a SQL function would be planned anew.)
CREATE FUNCTION memgov.approval_channel(p_org_id text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (SELECT 'memgov_approvals_' || left(md5(s.secret || ':' || p_org_id), 20) FROM memgov.channel_secret s);
END
$$;

-- The approval channel of the session's tenant, for LISTEN (reviewers and admins).
CREATE FUNCTION memgov.approval_channel()
RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.approval_channel(memgov.check_tenant(current_setting('memgov.org_id', true)))
$$;

-- Governed insert that returns the decision (with memory_id / request_id / quarantine_id)
-- and records a denial in the decision log instead of raising. Runs with the caller's
-- rights: its INSERT is the caller's, under the caller's privileges and row security.
CREATE FUNCTION memgov.remember(item jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- Privileges: writers reach the write path through the table, remember() and forget()
-- (sql/050_feedback.sql); reviewers listen for requests. Nothing else here is a client's.
REVOKE EXECUTE ON FUNCTION memgov.remember(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.remember(jsonb) TO memgov_writer, memgov_admin;
-- the end of a statement that shared decisions hands their memories on as its own role
GRANT EXECUTE ON FUNCTION memgov.list_shared(memgov.shared_decision[]) TO memgov_writer, memgov_admin;
-- remember() runs with its caller's rights and builds its row with item_from_json()
GRANT EXECUTE ON FUNCTION memgov.item_from_json(jsonb) TO memgov_writer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.approval_channel() TO memgov_reviewer, memgov_admin;

RESET ROLE;
