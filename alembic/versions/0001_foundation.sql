-- Foundation: roles, the memgov schema, its tables, privileges and row level security.
-- Frozen copy of sql/000_roles.sql, 010_schema.sql and 060_security.sql as of this revision.

-- migrate:upgrade
-- memgov: roles and schema.
--
-- Roles are cluster-wide, so they are created only when missing: several
-- governed databases in one cluster share them. All four are NOLOGIN;
-- deployments grant them to their own login roles.
--
--   memgov_owner     owns every memgov object; SECURITY DEFINER functions run as it
--   memgov_writer    agents: read/write items, remember, forget
--   memgov_reviewer  the user-facing application and human reviewers
--   memgov_admin     deploy, rollback, schedule; works across tenants

DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['memgov_owner', 'memgov_writer', 'memgov_reviewer', 'memgov_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;

CREATE SCHEMA memgov AUTHORIZATION memgov_owner;
COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents';

-- memgov: tables.
--
-- Every table keeps org_id in its primary and unique keys so that it can be
-- distributed by tenant later. Objects are created as memgov_owner: no
-- application role owns a table.

SET ROLE memgov_owner;

-- The governed table: what agents INSERT, UPDATE and DELETE.
CREATE TABLE memgov.long_term_memory_items (
    memory_id            uuid         NOT NULL DEFAULT gen_random_uuid(),
    org_id               text         NOT NULL CHECK (org_id <> ''),
    project_id           text,
    agent_id             text,
    subject_id           text,
    session_id           text,
    category             text         NOT NULL CHECK (category <> ''),
    fact_text            text         NOT NULL,
    source               text         NOT NULL
        CHECK (source IN ('user_confirmed', 'agent_extracted', 'system_rule')),
    confidence           numeric(4,3) NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    is_sensitive         boolean      NOT NULL DEFAULT false,
    retention_policy     text         NOT NULL DEFAULT 'permanent_until_revoked'
        CHECK (retention_policy IN ('permanent_until_revoked', 'ttl_7d', 'ttl_30d', 'confidence_based')),
    context_source       text,
    metadata             jsonb        NOT NULL DEFAULT '{}'::jsonb
        CHECK (jsonb_typeof(metadata) = 'object'),
    status               text         NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'pending_approval')),
    created_at           timestamptz  NOT NULL DEFAULT now(),
    updated_at           timestamptz  NOT NULL DEFAULT now(),
    last_confirmed_at    timestamptz,
    expires_at           timestamptz,
    low_confidence_since timestamptz,
    policy_version       text,
    decision_id          bigint,
    -- memory_id leads so that feedback functions find a row by id alone
    PRIMARY KEY (memory_id, org_id)
);
COMMENT ON TABLE memgov.long_term_memory_items IS
    'Long-term memories of AI agents; every write is decided by the active policy';

-- Retention sweeps read only the rows that can expire.
CREATE INDEX long_term_memory_items_expires_at_idx
    ON memgov.long_term_memory_items (expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX long_term_memory_items_low_confidence_since_idx
    ON memgov.long_term_memory_items (low_confidence_since)
    WHERE low_confidence_since IS NOT NULL;

-- The deployed policy versions, global (org_id '*') or per tenant.
CREATE TABLE memgov.policy_versions (
    org_id         text        NOT NULL DEFAULT '*' CHECK (org_id <> ''),
    version        text        NOT NULL,
    sha256         text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    mode           text        NOT NULL CHECK (mode IN ('monitor', 'enforce', 'strict')),
    source_yaml    text        NOT NULL,
    compiled_sql   text        NOT NULL,
    function_name  text        NOT NULL CHECK (function_name ~ '^policy_[0-9a-f]{16}$'),
    settings       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    deployed_at    timestamptz NOT NULL DEFAULT now(),
    deployed_by    text        NOT NULL DEFAULT current_user,
    active         boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (org_id, version)
);
COMMENT ON TABLE memgov.policy_versions IS
    'Every deployed policy version; at most one active per org_id (''*'' = global)';
COMMENT ON COLUMN memgov.policy_versions.function_name IS
    'the compiled decision function memgov.<function_name>; internal, callers use memgov.decide';
COMMENT ON COLUMN memgov.policy_versions.settings IS
    'mode, on_policy_miss, risk_thresholds, feedback, sources and retention of the version';
CREATE UNIQUE INDEX policy_versions_one_active_idx
    ON memgov.policy_versions (org_id) WHERE active;

-- The rules of each deployed version, one row per rule.
CREATE TABLE memgov.memory_policy_rules (
    org_id          text    NOT NULL DEFAULT '*',
    policy_version  text    NOT NULL,
    rule_id         text    NOT NULL,
    rule_key        text    NOT NULL,
    position        integer NOT NULL,
    category        text[],
    condition       jsonb   NOT NULL,
    action          text    NOT NULL
        CHECK (action IN ('allow', 'deny', 'require_approval', 'quarantine', 'auto_delete')),
    priority        integer NOT NULL,
    reason_codes    text[]  NOT NULL DEFAULT '{}',
    description     text,
    PRIMARY KEY (org_id, policy_version, rule_id),
    FOREIGN KEY (org_id, policy_version)
        REFERENCES memgov.policy_versions (org_id, version) ON DELETE CASCADE
);
COMMENT ON TABLE memgov.memory_policy_rules IS 'The rules of every deployed policy version, one row per rule';
COMMENT ON COLUMN memgov.memory_policy_rules.rule_key IS
    'sha256 of the rule''s canonical definition: the same rule across versions has the same key';
COMMENT ON COLUMN memgov.memory_policy_rules.category IS 'category scope; NULL = every category';

-- Every decision, written in the same transaction as the write it decided.
-- Only memgov.govern_write() and approve() insert here, from a typed
-- memgov.decision; the table carries no CHECK constraints because a row
-- trigger's single-row INSERT would prepare every CHECK expression again on
-- each write (measured: +15 µs per governed row).
CREATE TABLE memgov.decision_log (
    decision_id       bigint       GENERATED ALWAYS AS IDENTITY,
    decided_at        timestamptz  NOT NULL DEFAULT now(),
    operation         text         NOT NULL,  -- remember, update, forget, search, get
    memory_id         uuid,
    org_id            text         NOT NULL,
    action            text         NOT NULL,  -- allow, deny, require_approval, quarantine
    reason_codes      text[]       NOT NULL DEFAULT '{}',
    matched_rule_ids  text[]       NOT NULL DEFAULT '{}',
    policy_version    text,
    mode              text,                   -- monitor, enforce, strict
    enforced          boolean      NOT NULL,
    actor             text         NOT NULL DEFAULT current_user,
    risk_score        numeric(4,3),
    risk_level        text,                   -- low, medium, high, critical
    PRIMARY KEY (org_id, decision_id)
);
COMMENT ON TABLE memgov.decision_log IS 'Append-only log of policy decisions';
-- Time-ordered appends: a BRIN index answers "the last 24 hours" for almost nothing.
CREATE INDEX decision_log_decided_at_idx ON memgov.decision_log USING brin (decided_at);

-- Writes held for a human decision.
CREATE TABLE memgov.approval_requests (
    request_id      uuid        NOT NULL DEFAULT gen_random_uuid(),
    memory_id       uuid,
    org_id          text        NOT NULL,
    operation       text        NOT NULL CHECK (operation IN ('remember', 'update', 'forget')),
    payload         jsonb       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    requested_at    timestamptz NOT NULL DEFAULT now(),
    requested_by    text        NOT NULL DEFAULT current_user,
    decided_at      timestamptz,
    decided_by      text,
    note            text,
    decision_id     bigint,
    policy_version  text,
    PRIMARY KEY (request_id, org_id),
    CHECK ((status = 'pending') = (decided_at IS NULL))
);
COMMENT ON TABLE memgov.approval_requests IS 'Writes held until a human approves or denies them';
-- Reviewers list a tenant's open requests; the sweep expires the oldest.
CREATE INDEX approval_requests_pending_idx
    ON memgov.approval_requests (org_id, requested_at) WHERE status = 'pending';
CREATE INDEX approval_requests_pending_age_idx
    ON memgov.approval_requests (requested_at) WHERE status = 'pending';
CREATE INDEX approval_requests_memory_idx
    ON memgov.approval_requests (memory_id) WHERE status = 'pending';

-- Writes diverted by a quarantine decision: full payload, never stored as memory.
CREATE TABLE memgov.quarantine (
    quarantine_id   uuid        NOT NULL DEFAULT gen_random_uuid(),
    org_id          text        NOT NULL,
    operation       text        NOT NULL CHECK (operation IN ('remember', 'update', 'forget')),
    memory_id       uuid,
    payload         jsonb       NOT NULL,
    decision        jsonb       NOT NULL,
    status          text        NOT NULL DEFAULT 'held'
        CHECK (status IN ('held', 'released', 'purged')),
    quarantined_at  timestamptz NOT NULL DEFAULT now(),
    quarantined_by  text        NOT NULL DEFAULT current_user,
    resolved_at     timestamptz,
    resolved_by     text,
    PRIMARY KEY (quarantine_id, org_id)
);
COMMENT ON TABLE memgov.quarantine IS 'Writes diverted by a quarantine decision, with their full payload';
CREATE INDEX quarantine_held_idx
    ON memgov.quarantine (org_id, quarantined_at) WHERE status = 'held';

-- Confirm / reject / edit / forget feedback, with confidence before and after.
CREATE TABLE memgov.feedback_events (
    event_id           bigint       GENERATED ALWAYS AS IDENTITY,
    memory_id          uuid         NOT NULL,
    org_id             text         NOT NULL,
    kind               text         NOT NULL CHECK (kind IN ('confirm', 'reject', 'edit', 'forget')),
    confidence_before  numeric(4,3),
    confidence_after   numeric(4,3),
    actor              text         NOT NULL DEFAULT current_user,
    at                 timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, event_id)
);
COMMENT ON TABLE memgov.feedback_events IS 'Confirm, reject, edit and forget feedback with confidence before and after';
CREATE INDEX feedback_events_memory_idx ON memgov.feedback_events (memory_id);

RESET ROLE;

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

-- migrate:downgrade
-- Roles are cluster-wide and may serve other databases: they are kept.
DROP SCHEMA memgov CASCADE;
