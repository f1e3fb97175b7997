-- memgov: privileges and tenant isolation.
--
-- memgov_writer and memgov_reviewer see and write only the tenant
-- memgov.session_tenant() returns (sql/015_tenants.sql); with none they see
-- nothing. memgov_admin reads across tenants. memgov_owner owns the tables and so is not subject to row level security:
-- the SECURITY DEFINER functions that run as it are the only way around the
-- policies.

SET ROLE memgov_owner;

REVOKE ALL ON SCHEMA memgov FROM PUBLIC;
GRANT USAGE ON SCHEMA memgov TO memgov_writer, memgov_reviewer, memgov_admin;

-- The governed table: agents write, reviewers read, admins write like agents in any tenant.
-- Writers may set the columns an agent owns; the engine's columns (status,
-- policy_version, decision_id, created_at, updated_at, last_confirmed_at,
-- expires_at, low_confidence_since) are out of their reach. No client role has
-- a table-level INSERT, UPDATE, DELETE or TRUNCATE: any of them would let it
-- LOCK the table against every tenant. Writers forget through memgov.forget().
GRANT SELECT ON memgov.long_term_memory_items TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT INSERT (memory_id, org_id, project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata),
      UPDATE (project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata)
    ON memgov.long_term_memory_items TO memgov_writer, memgov_admin;

-- Logs and queues are read by reviewers (their tenant) and admins (all); they change
-- only through memgov functions.
GRANT SELECT ON memgov.decision_log, memgov.approval_requests, memgov.quarantine,
                memgov.feedback_events, memgov.policy_versions, memgov.memory_policy_rules
    TO memgov_reviewer, memgov_admin;
GRANT SELECT ON memgov.policy_versions, memgov.memory_policy_rules TO memgov_writer;
GRANT SELECT ON memgov.tenant_grants, memgov.settings, memgov.engine_locks TO memgov_admin;
GRANT UPDATE (value) ON memgov.settings TO memgov_admin;

-- Row level security: one tenant per session for writers and reviewers. The tenant is
-- computed once per statement (an InitPlan), not once per row.
ALTER TABLE memgov.long_term_memory_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.decision_log           ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.approval_requests      ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.quarantine             ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.feedback_events        ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.policy_versions        ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.memory_policy_rules    ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON memgov.long_term_memory_items
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()))
    WITH CHECK (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY tenant_isolation ON memgov.decision_log
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY tenant_isolation ON memgov.approval_requests
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY tenant_isolation ON memgov.quarantine
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY tenant_isolation ON memgov.feedback_events
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
-- a tenant sees its own policies and the global one
CREATE POLICY tenant_isolation ON memgov.policy_versions
    TO memgov_writer, memgov_reviewer
    USING (org_id = '*' OR org_id = (SELECT memgov.session_tenant()));
CREATE POLICY tenant_isolation ON memgov.memory_policy_rules
    TO memgov_writer, memgov_reviewer
    USING (org_id = '*' OR org_id = (SELECT memgov.session_tenant()));

-- admins write the memory table like agents (every write decided by the trigger), read everything
CREATE POLICY admin_all ON memgov.long_term_memory_items TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_read ON memgov.decision_log           TO memgov_admin USING (true);
CREATE POLICY admin_read ON memgov.approval_requests      TO memgov_admin USING (true);
CREATE POLICY admin_read ON memgov.quarantine             TO memgov_admin USING (true);
CREATE POLICY admin_read ON memgov.feedback_events        TO memgov_admin USING (true);
CREATE POLICY admin_read ON memgov.policy_versions        TO memgov_admin USING (true);
CREATE POLICY admin_read ON memgov.memory_policy_rules    TO memgov_admin USING (true);

-- What clients may call here: their tenant; binding is memgov_admin's.
GRANT EXECUTE ON FUNCTION memgov.session_tenant(), memgov.is_tenant_id(text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.grant_tenant(text, text), memgov.revoke_tenant(text, text)
    TO memgov_admin;

RESET ROLE;
