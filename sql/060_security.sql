-- memgov: privileges and tenant isolation.
--
-- memgov_writer and memgov_reviewer see and write only the tenant named by
-- SET [LOCAL] memgov.org_id = '...'; with it unset they see nothing.
-- memgov_admin works across tenants. memgov_owner owns the tables and so is
-- not subject to row level security: the SECURITY DEFINER functions that run
-- as it are the only way around the policies.

SET ROLE memgov_owner;

REVOKE ALL ON SCHEMA memgov FROM PUBLIC;
GRANT USAGE ON SCHEMA memgov TO memgov_writer, memgov_reviewer, memgov_admin;

-- The governed table: agents write, reviewers read, admins do everything.
-- Writers may set the columns an agent owns; the engine's columns (status,
-- policy_version, decision_id, created_at, updated_at, last_confirmed_at,
-- expires_at, low_confidence_since) are out of their reach.
GRANT SELECT, DELETE ON memgov.long_term_memory_items TO memgov_writer;
GRANT INSERT (memory_id, org_id, project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata),
      UPDATE (project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata)
    ON memgov.long_term_memory_items TO memgov_writer;
GRANT SELECT ON memgov.long_term_memory_items TO memgov_reviewer;

-- Logs and queues are read by reviewers; they change only through memgov functions.
GRANT SELECT ON memgov.decision_log, memgov.approval_requests, memgov.quarantine,
                memgov.feedback_events
    TO memgov_reviewer;
GRANT SELECT ON memgov.policy_versions, memgov.memory_policy_rules
    TO memgov_writer, memgov_reviewer;

GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA memgov TO memgov_admin;

-- Row level security: one tenant per session for writers and reviewers.
ALTER TABLE memgov.long_term_memory_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.decision_log           ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.approval_requests      ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.quarantine             ENABLE ROW LEVEL SECURITY;
ALTER TABLE memgov.feedback_events        ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON memgov.long_term_memory_items
    TO memgov_writer, memgov_reviewer
    USING (org_id = current_setting('memgov.org_id', true))
    WITH CHECK (org_id = current_setting('memgov.org_id', true));
CREATE POLICY tenant_isolation ON memgov.decision_log
    TO memgov_writer, memgov_reviewer
    USING (org_id = current_setting('memgov.org_id', true));
CREATE POLICY tenant_isolation ON memgov.approval_requests
    TO memgov_writer, memgov_reviewer
    USING (org_id = current_setting('memgov.org_id', true));
CREATE POLICY tenant_isolation ON memgov.quarantine
    TO memgov_writer, memgov_reviewer
    USING (org_id = current_setting('memgov.org_id', true));
CREATE POLICY tenant_isolation ON memgov.feedback_events
    TO memgov_writer, memgov_reviewer
    USING (org_id = current_setting('memgov.org_id', true));

CREATE POLICY admin_all ON memgov.long_term_memory_items TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_all ON memgov.decision_log           TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_all ON memgov.approval_requests      TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_all ON memgov.quarantine             TO memgov_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_all ON memgov.feedback_events        TO memgov_admin USING (true) WITH CHECK (true);

RESET ROLE;
