-- memgov: tables, each with who may read it and its row level security.
--
-- Every table keeps org_id in its primary and unique keys so that it can be
-- distributed by tenant later. Objects are created as memgov_owner: no
-- application role owns a table.
--
-- Tenant isolation: memgov_writer and memgov_reviewer see and write only the tenant
-- memgov.session_tenant() returns (sql/005_tenants.sql); with none they see nothing.
-- memgov_admin reads across tenants. memgov_owner owns the tables and so is not subject
-- to row level security: the SECURITY DEFINER functions that run as it are the only way
-- around the policies. Each policy computes the tenant once per statement (an InitPlan),
-- not once per row. No client role has a table-level INSERT, UPDATE, DELETE or TRUNCATE
-- anywhere: the logs and queues change only through memgov functions.

SET ROLE memgov_owner;

-- The value rules of the governed table's columns are domains, not CHECK constraints:
-- PostgreSQL reads a table's CHECK constraints from the catalog and prepares them again
-- for every statement, a domain's stay parsed for the session (measured: 210k of the
-- 830k instructions of a single-row INSERT transaction went to the table's seven CHECKs).
CREATE DOMAIN memgov.tenant AS text CHECK (VALUE <> '');
CREATE DOMAIN memgov.category AS text CHECK (VALUE <> '');
CREATE DOMAIN memgov.fact_source AS text
    CHECK (VALUE IN ('user_confirmed', 'agent_extracted', 'system_rule'));
CREATE DOMAIN memgov.confidence AS numeric(4,3) CHECK (VALUE BETWEEN 0 AND 1);
CREATE DOMAIN memgov.retention_kind AS text
    CHECK (VALUE IN ('permanent_until_revoked', 'ttl_7d', 'ttl_30d', 'confidence_based'));
CREATE DOMAIN memgov.metadata_object AS jsonb CHECK (jsonb_typeof(VALUE) = 'object');
CREATE DOMAIN memgov.memory_status AS text CHECK (VALUE IN ('active', 'pending_approval'));
CREATE DOMAIN memgov.ttl_minutes AS integer CHECK (VALUE > 0);

-- The governed table: what agents INSERT, UPDATE and DELETE.
CREATE TABLE memgov.long_term_memory_items (
    memory_id            uuid         NOT NULL DEFAULT gen_random_uuid(),
    org_id               memgov.tenant NOT NULL,
    project_id           text,
    agent_id             text,
    subject_id           text,
    session_id           text,
    category             memgov.category NOT NULL,
    fact_text            text         NOT NULL,
    source               memgov.fact_source NOT NULL,
    confidence           memgov.confidence NOT NULL,
    is_sensitive         boolean      NOT NULL DEFAULT false,
    retention_policy     memgov.retention_kind NOT NULL DEFAULT 'permanent_until_revoked',
    context_source       text,
    metadata             memgov.metadata_object NOT NULL DEFAULT '{}'::jsonb,
    status               memgov.memory_status NOT NULL DEFAULT 'active',
    created_at           timestamptz  NOT NULL DEFAULT now(),
    updated_at           timestamptz  NOT NULL DEFAULT now(),
    last_confirmed_at    timestamptz,
    expires_at           timestamptz,
    low_confidence_since timestamptz,
    policy_version       text,
    decision_id          bigint,
    -- full-text search (docs/recall.md): the tenant's text search configuration when the
    -- memory was written, and the document memgov.search matches and ranks
    search_config        regconfig    NOT NULL DEFAULT 'pg_catalog.simple',
    search_vector        tsvector     GENERATED ALWAYS AS (to_tsvector(search_config, fact_text)) STORED,
    -- where a LangGraph store keeps the memory (memgov_pg.langgraph, docs/langgraph.md): its
    -- namespace's labels joined with '.', and its key; NULL for every other memory
    namespace            text,
    item_key             text,
    -- a time to live its writer gave it, in whole minutes (a LangGraph store's ttl): the
    -- engine sets expires_at from it at each write and refresh (memgov.item_expiry), never
    -- past the retention policy's expiry; NULL: none
    ttl_minutes          memgov.ttl_minutes,
    -- the row's read class (sql/060_recall.sql): which readers its tenant's policy lets read
    -- it, decided by the write trigger from the row alone, with the version it was decided by
    read_class           bigint,
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
-- auto_delete rules bound by confidence or by age find their candidates in these (key, then
-- memory_id: the sweep resumes a range at its last row), over the rows an automatic process
-- may delete; confidence up to 0.5 only, the low end that such rules delete
-- (sql/072_retention_candidates.sql)
CREATE INDEX long_term_memory_items_low_confidence_idx
    ON memgov.long_term_memory_items (confidence, memory_id)
    WHERE retention_policy <> 'permanent_until_revoked' AND confidence <= 0.5;
CREATE INDEX long_term_memory_items_created_at_idx
    ON memgov.long_term_memory_items (created_at, memory_id)
    WHERE retention_policy <> 'permanent_until_revoked';
-- memgov.search finds its tenant's matches of a text here, then ranks them: the tenant
-- leads (btree_gin, sql/000_roles.sql), so a search reads the matches of its own tenant
-- alone, not the whole table's; a search without a text finds the tenant's rows here too
CREATE INDEX long_term_memory_items_tenant_search_idx
    ON memgov.long_term_memory_items USING gin (org_id, search_vector);
-- a LangGraph store's item: one memory per (tenant, namespace, key); also what its reads
-- look up and list (a namespace prefix is a range of this index)
CREATE UNIQUE INDEX long_term_memory_items_store_key_idx
    ON memgov.long_term_memory_items (org_id, namespace, item_key)
    WHERE namespace IS NOT NULL;

-- Agents write, reviewers read, admins write like agents in any tenant. Writers may set
-- the columns an agent owns; the engine's columns (status, policy_version, decision_id,
-- created_at, updated_at, last_confirmed_at, expires_at, low_confidence_since, read_class)
-- are out of their reach, and so are search_config and the generated search_vector. A table-level
-- INSERT, UPDATE, DELETE or TRUNCATE would let a client LOCK the table against every
-- tenant: writers forget through memgov.forget(). What a writer or reviewer may read of
-- its tenant's rows is the policy's `get` decision (sql/060_recall.sql).
GRANT SELECT ON memgov.long_term_memory_items TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT INSERT (memory_id, org_id, project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata,
              namespace, item_key, ttl_minutes),
      UPDATE (project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata, ttl_minutes)
    ON memgov.long_term_memory_items TO memgov_writer, memgov_admin;
ALTER TABLE memgov.long_term_memory_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.long_term_memory_items
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()))
    WITH CHECK (org_id = (SELECT memgov.session_tenant()));
-- admins write the memory table like agents (every write decided by the trigger)
CREATE POLICY admin_all ON memgov.long_term_memory_items TO memgov_admin USING (true) WITH CHECK (true);

-- The deployed policy versions, global (org_id '*') or per tenant.
CREATE TABLE memgov.policy_versions (
    org_id         text        NOT NULL DEFAULT '*' CHECK (org_id <> '')
        CONSTRAINT policy_versions_tenant_id CHECK (org_id = '*' OR memgov.is_tenant_id(org_id)),
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
    -- names the version in a memory's read_class (sql/060_recall.sql): from its own sequence,
    -- so never reused
    read_epoch     integer     GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (org_id, version)
);
COMMENT ON TABLE memgov.policy_versions IS
    'Every deployed policy version; at most one active per org_id (''*'' = global)';
COMMENT ON COLUMN memgov.policy_versions.function_name IS
    'the compiled decision function memgov.<function_name>; internal, callers use memgov.decide';
COMMENT ON COLUMN memgov.policy_versions.settings IS
    'mode, on_policy_miss, risk_thresholds, feedback, sources and retention of the version '
    '(a feedback or retention setting it leaves out: memgov.setting_defaults())';
CREATE UNIQUE INDEX policy_versions_one_active_idx
    ON memgov.policy_versions (org_id) WHERE active;
-- a tenant sees its own policies and the global one
GRANT SELECT ON memgov.policy_versions TO memgov_reviewer, memgov_admin, memgov_writer;
ALTER TABLE memgov.policy_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.policy_versions
    TO memgov_writer, memgov_reviewer
    USING (org_id = '*' OR org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.policy_versions TO memgov_admin USING (true);

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
GRANT SELECT ON memgov.memory_policy_rules TO memgov_reviewer, memgov_admin, memgov_writer;
ALTER TABLE memgov.memory_policy_rules ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.memory_policy_rules
    TO memgov_writer, memgov_reviewer
    USING (org_id = '*' OR org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.memory_policy_rules TO memgov_admin USING (true);

-- Every change of a scope's active version, in order: memgov.activate_policy writes a row
-- when the active version changes and for every deploy of a policy revision (even of the
-- version active already), memgov.undeploy_policy one when it undoes an activation.
-- Undeploy reads it to find the version that was active right before a deploy (two deploys
-- in one transaction share now(): the order is activation_id, never a timestamp). Only those
-- two functions (as memgov_owner) write here; admins read it.
CREATE TABLE memgov.policy_activations (
    activation_id     bigint       GENERATED ALWAYS AS IDENTITY,
    org_id            text         NOT NULL,
    version           text,
    previous_version  text,
    undoes            bigint,
    activated_at      timestamptz  NOT NULL DEFAULT now(),
    activated_by      text         NOT NULL DEFAULT session_user,
    PRIMARY KEY (org_id, activation_id),
    UNIQUE (org_id, undoes),
    FOREIGN KEY (org_id, version)
        REFERENCES memgov.policy_versions (org_id, version) ON DELETE CASCADE,
    FOREIGN KEY (org_id, undoes)
        REFERENCES memgov.policy_activations (org_id, activation_id) ON DELETE CASCADE
);
COMMENT ON TABLE memgov.policy_activations IS
    'Every change of the active policy version of an org_id (''*'' = global), and every deploy '
    'of a policy revision, in activation_id order';
COMMENT ON COLUMN memgov.policy_activations.version IS 'the version active from then on; NULL = none';
COMMENT ON COLUMN memgov.policy_activations.previous_version IS 'the version active right before; NULL = none';
COMMENT ON COLUMN memgov.policy_activations.undoes IS
    'set by memgov.undeploy_policy: the activation this row undid (each is undone at most once)';
CREATE INDEX policy_activations_version_idx ON memgov.policy_activations (org_id, version, activation_id);
GRANT SELECT ON memgov.policy_activations TO memgov_admin;
ALTER TABLE memgov.policy_activations ENABLE ROW LEVEL SECURITY;
CREATE POLICY admin_read ON memgov.policy_activations TO memgov_admin USING (true);

-- Shadow deployments (docs/changing-policies.md): a deployed version that decides every
-- write and read of its scope (org_id; '*' = global) beside the active policy, unenforced.
-- At most one runs per scope. An ended one is kept, with its decisions, until the next
-- shadow of its scope starts. Only memgov's functions (as memgov_owner) write here.
CREATE TABLE memgov.policy_shadows (
    shadow_id   bigint       GENERATED ALWAYS AS IDENTITY,
    org_id      text         NOT NULL,
    version     text         NOT NULL,
    started_at  timestamptz  NOT NULL DEFAULT now(),
    started_by  text         NOT NULL DEFAULT session_user,
    ended_at    timestamptz,
    ended_by    text,
    outcome     text         CHECK (outcome IN ('promoted', 'stopped', 'replaced')),
    PRIMARY KEY (org_id, shadow_id),
    CHECK ((ended_at IS NULL) = (outcome IS NULL)),
    FOREIGN KEY (org_id, version)
        REFERENCES memgov.policy_versions (org_id, version) ON DELETE CASCADE
);
COMMENT ON TABLE memgov.policy_shadows IS
    'Candidate policy versions deciding beside the active one, unenforced (at most one running per org_id)';
CREATE UNIQUE INDEX policy_shadows_running_idx ON memgov.policy_shadows (org_id) WHERE ended_at IS NULL;
GRANT SELECT ON memgov.policy_shadows TO memgov_admin;

-- What a shadow's candidate decided, one row per decision of the active policy it saw
-- (decision_id: memgov.decision_log), written in the transaction of that decision. The
-- actions are the ones applied (an unenforced decision, monitor mode: allow). No foreign
-- key: a key check per governed write would lock the shadow's row from every writer.
CREATE TABLE memgov.shadow_decisions (
    shadow_id               bigint       NOT NULL,
    decision_id             bigint       NOT NULL,
    org_id                  text         NOT NULL,
    operation               text         NOT NULL,
    memory_id               uuid,
    active_action           text         NOT NULL,
    active_rule_ids         text[]       NOT NULL,
    candidate_action        text         NOT NULL,
    candidate_rule_ids      text[]       NOT NULL,
    candidate_reason_codes  text[]       NOT NULL,
    source                  text,        -- a replay's: where the payload came from (NULL: a live decision)
    decided_at              timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (shadow_id, org_id, decision_id)
);
COMMENT ON TABLE memgov.shadow_decisions IS
    'Every decision a shadow saw: the active policy''s action and rules beside the candidate''s';
GRANT SELECT ON memgov.shadow_decisions TO memgov_admin;

-- Every decision, written in the same transaction as the write it decided.
-- Only memgov.log_decision() inserts here, from a typed memgov.decision, and the
-- same INSERT written out where a write pays for each call (memgov.govern and the
-- write trigger's stored row, sql/041_write_trigger.sql); the table carries no CHECK constraints because a row
-- trigger's single-row INSERT would prepare every CHECK expression again on
-- each write (measured: +15 µs per governed row).
CREATE TABLE memgov.decision_log (
    decision_id       bigint       GENERATED ALWAYS AS IDENTITY,
    -- when the statement that took it began (a bulk statement's rows share its log row)
    decided_at        timestamptz  NOT NULL DEFAULT statement_timestamp(),
    operation         text         NOT NULL,  -- remember, update, forget, search, get
    memory_id         uuid,
    org_id            text         NOT NULL,
    action            text         NOT NULL,  -- allow, deny, require_approval, quarantine
    reason_codes      text[]       NOT NULL DEFAULT '{}',
    matched_rule_ids  text[]       NOT NULL DEFAULT '{}',
    policy_version    text,
    mode              text,                   -- monitor, enforce, strict
    enforced          boolean      NOT NULL,
    actor             text         NOT NULL DEFAULT current_user,  -- the effective role
    login             text         NOT NULL DEFAULT session_user,  -- the login behind it
    risk_score        numeric(4,3),
    risk_level        text,                   -- low, medium, high, critical
    -- a read (search, get): a salted sha256 of the query, never its text, and what it returned
    query_fingerprint text,
    returned          integer,
    withheld          integer,
    -- the transaction that wrote the row, as a bigint (BRIN indexes bigint, not xid8):
    -- the log's seals cover rows in (xact_id, decision_id) order (sql/080_audit.sql)
    xact_id           bigint       NOT NULL DEFAULT (pg_catalog.pg_current_xact_id())::text::bigint,
    -- a decision that one statement took about several memories alike: them all (memory_id
    -- is then NULL); NULL on a row about one memory (memory_id) or none (a search)
    memory_ids        uuid[],
    memory_count      integer,
    PRIMARY KEY (org_id, decision_id)
);
COMMENT ON TABLE memgov.decision_log IS 'Append-only log of policy decisions';
COMMENT ON COLUMN memgov.decision_log.memory_ids IS
    'the memories of a decision one statement took about several alike (memory_id is then NULL): '
    'WHERE memory_id = $1 OR memory_ids @> ARRAY[$1] finds a memory''s decisions';
-- Time-ordered appends: one BRIN index answers "the last 24 hours" and lets the sealer find
-- a seal's rows by transaction, in append order, for almost nothing (one index, not two: a
-- single-row write pays each index's insert, 10k instructions for the second BRIN)
CREATE INDEX decision_log_xact_id_decided_at_idx ON memgov.decision_log USING brin (xact_id, decided_at);
-- a memory's decisions among the rows that decided many (fastupdate: a statement's ids go to
-- the pending list, which autovacuum merges; see memgov.deletion_log)
CREATE INDEX decision_log_memory_ids_idx ON memgov.decision_log USING gin (memory_ids)
    WITH (fastupdate = on, gin_pending_list_limit = 16384)
    WHERE memory_ids IS NOT NULL;
-- logs and queues are read by reviewers (their tenant) and admins (all)
GRANT SELECT ON memgov.decision_log TO memgov_reviewer, memgov_admin;
ALTER TABLE memgov.decision_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.decision_log
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.decision_log TO memgov_admin USING (true);

-- The value lists of the review queues are domains, not CHECK constraints: PostgreSQL
-- keeps a domain's check prepared for the session, where it prepares a table's CHECK
-- constraints again for every statement, and the write trigger files each request and
-- each quarantine entry in a single-row INSERT of its own (measured: 63k instructions a
-- held write for the two lists of approval_requests).
CREATE DOMAIN memgov.operation_type AS text
    CHECK (VALUE IN ('remember', 'update', 'forget', 'search', 'get'));
CREATE DOMAIN memgov.request_status AS text
    CHECK (VALUE IN ('pending', 'approved', 'denied', 'expired'));
CREATE DOMAIN memgov.quarantine_status AS text
    CHECK (VALUE IN ('held', 'released', 'purged'));

-- Writes held for a human decision (and reads held, as a record of what was asked).
CREATE TABLE memgov.approval_requests (
    request_id      uuid        NOT NULL DEFAULT gen_random_uuid(),
    memory_id       uuid,
    org_id          text        NOT NULL,
    operation       memgov.operation_type NOT NULL,
    payload         jsonb       NOT NULL,
    status          memgov.request_status NOT NULL DEFAULT 'pending',
    requested_at    timestamptz NOT NULL DEFAULT now(),
    requested_by    text        NOT NULL DEFAULT current_user,
    requested_login text        NOT NULL DEFAULT session_user,
    decided_at      timestamptz,
    decided_by      text,
    decided_login   text,
    note            text,
    decision_id     bigint,
    policy_version  text,
    PRIMARY KEY (request_id, org_id),
    CHECK ((status = 'pending') = (decided_at IS NULL))
);
COMMENT ON TABLE memgov.approval_requests IS
    'Writes held until a human approves or denies them, and reads the policy held (a record: never replayed)';
-- Reviewers list a tenant's open requests; the sweep expires the oldest.
CREATE INDEX approval_requests_pending_idx
    ON memgov.approval_requests (org_id, requested_at) WHERE status = 'pending';
CREATE INDEX approval_requests_pending_age_idx
    ON memgov.approval_requests (requested_at) WHERE status = 'pending';
CREATE INDEX approval_requests_memory_idx
    ON memgov.approval_requests (memory_id) WHERE status = 'pending';
GRANT SELECT ON memgov.approval_requests TO memgov_reviewer, memgov_admin;
ALTER TABLE memgov.approval_requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.approval_requests
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.approval_requests TO memgov_admin USING (true);

-- Writes diverted by a quarantine decision: full payload, never stored as memory
-- (and reads the policy quarantined, as a record of what was asked).
CREATE TABLE memgov.quarantine (
    quarantine_id   uuid        NOT NULL DEFAULT gen_random_uuid(),
    org_id          text        NOT NULL,
    operation       memgov.operation_type NOT NULL,
    memory_id       uuid,
    payload         jsonb       NOT NULL,
    decision        jsonb       NOT NULL,
    decision_id     bigint,     -- memgov.decision_log
    status          memgov.quarantine_status NOT NULL DEFAULT 'held',
    quarantined_at  timestamptz NOT NULL DEFAULT now(),
    quarantined_by  text        NOT NULL DEFAULT current_user,
    quarantined_login text      NOT NULL DEFAULT session_user,
    resolved_at     timestamptz,
    resolved_by     text,
    resolved_login  text,
    PRIMARY KEY (quarantine_id, org_id)
);
COMMENT ON TABLE memgov.quarantine IS
    'Writes diverted by a quarantine decision, with their full payload, and reads it refused (a record)';
CREATE INDEX quarantine_held_idx
    ON memgov.quarantine (org_id, quarantined_at) WHERE status = 'held';
GRANT SELECT ON memgov.quarantine TO memgov_reviewer, memgov_admin;
ALTER TABLE memgov.quarantine ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.quarantine
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.quarantine TO memgov_admin USING (true);

-- A sample of the writes the policy stored or held, kept for `memgov replay` where the
-- tenant's policy sets replay.sample_rate (docs/changing-policies.md): the item as it was
-- decided, for replay.keep (the sweep prunes older ones). A sample goes with its memory:
-- deleting the memory deletes it (the trigger forget_samples, sql/040_enforce.sql), and a
-- policy that stops sampling deletes its tenant's. Only the write trigger writes here.
CREATE TABLE memgov.replay_samples (
    org_id       text         NOT NULL,
    decision_id  bigint       NOT NULL,
    memory_id    uuid         NOT NULL,
    operation    text         NOT NULL,
    actor        text         NOT NULL,
    payload      jsonb        NOT NULL,
    sampled_at   timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, decision_id)
);
COMMENT ON TABLE memgov.replay_samples IS
    'A sample of decided writes (replay.sample_rate), kept for memgov replay for replay.keep';
CREATE INDEX replay_samples_memory_idx ON memgov.replay_samples (memory_id, org_id);
CREATE INDEX replay_samples_sampled_at_idx ON memgov.replay_samples USING brin (sampled_at);
GRANT SELECT ON memgov.replay_samples TO memgov_admin;

-- Confirm / reject / edit / forget feedback, with confidence before and after.
CREATE TABLE memgov.feedback_events (
    event_id           bigint       GENERATED ALWAYS AS IDENTITY,
    memory_id          uuid         NOT NULL,
    org_id             text         NOT NULL,
    kind               text         NOT NULL CHECK (kind IN ('confirm', 'reject', 'edit', 'forget')),
    confidence_before  numeric(4,3),
    confidence_after   numeric(4,3),
    actor              text         NOT NULL DEFAULT current_user,
    login              text         NOT NULL DEFAULT session_user,
    at                 timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, event_id)
);
COMMENT ON TABLE memgov.feedback_events IS 'Confirm, reject, edit and forget feedback with confidence before and after';
CREATE INDEX feedback_events_memory_idx ON memgov.feedback_events (memory_id);
GRANT SELECT ON memgov.feedback_events TO memgov_reviewer, memgov_admin;
ALTER TABLE memgov.feedback_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.feedback_events
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.feedback_events TO memgov_admin USING (true);

-- The engine's defaults, stated once: the limits memgov.settings starts with, and the
-- feedback and retention settings of a policy that leaves them out (the compiled
-- settings carry only what the policy file says; memgov.policy_setting() falls back here),
-- the text search configuration of a tenant whose policy names none (rebuild_dispatch
-- reads it), and the risk thresholds a policy starts from (the compiler's RiskThresholds,
-- and memgov.risk_level's fallback: tests/db/test_setting_defaults.py holds both to these).
CREATE FUNCTION memgov.setting_defaults()
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{
    "limits": {
        "max_fact_text_bytes": 65536,
        "max_other_bytes":     16384,
        "archive_min_age":     31536000
    },
    "feedback": {
        "confirm_delta":        0.1,
        "reject_delta":        -0.3,
        "reject_delete_below":  0.0,
        "edit_confidence":      0.8
    },
    "replay": {
        "sample_rate": 0,
        "keep":        "7 days"
    },
    "retention": {
        "schedule":         "*/10 * * * *",
        "batch_size":       5000,
        "confidence_floor": 0.3,
        "confidence_grace": "30 days",
        "approval_ttl":     "7 days"
    },
    "search": {
        "text_config": "pg_catalog.simple"
    },
    "risk_thresholds": {
        "low_max":    0.30,
        "medium_max": 0.60,
        "high_max":   0.80
    }
}'::jsonb;

-- The engine's own settings, changed by memgov_admin with UPDATE. archive_min_age (seconds)
-- is the youngest cut memgov.archive_decision_log takes; only a superuser lowers it
-- (memgov.guard_settings, sql/080_audit.sql).
CREATE TABLE memgov.settings (
    name   text    PRIMARY KEY CHECK (name IN ('max_fact_text_bytes', 'max_other_bytes', 'archive_min_age')),
    value  bigint  NOT NULL CONSTRAINT settings_value_check CHECK (CASE WHEN name = 'archive_min_age' THEN value BETWEEN 0 AND 3153600000
                                                                 ELSE value BETWEEN 1024 AND 1073741823 END)
);
COMMENT ON TABLE memgov.settings IS
    'Engine settings: max_fact_text_bytes caps fact_text, max_other_bytes the other columns together, '
    'before any decision; archive_min_age (seconds) is the youngest cut of the decision log''s archival '
    '(defaults: memgov.setting_defaults() -> ''limits'')';
INSERT INTO memgov.settings (name, value)
SELECT d.key, d.value::bigint FROM jsonb_each_text(memgov.setting_defaults() -> 'limits') AS d;
GRANT SELECT ON memgov.settings TO memgov_admin;
GRANT UPDATE (value) ON memgov.settings TO memgov_admin;

-- Locks of the engine's own: rows that only memgov's functions can lock (clients
-- have no UPDATE here), unlike advisory-lock keys, which any session can take.
--   deploy       row-locked by every deploy, activation and rollback
--   maintenance  the running sweep's lease: its backend and a random advisory-lock key
--                that only it knows in advance
CREATE TABLE memgov.engine_locks (
    name         text    PRIMARY KEY CHECK (name IN ('deploy', 'maintenance')),
    holder_pid   integer,
    lock_key     integer[],
    acquired_at  timestamptz
);
COMMENT ON TABLE memgov.engine_locks IS 'Locks only memgov can take: deploys, and the running sweep''s lease';
INSERT INTO memgov.engine_locks (name) VALUES ('deploy'), ('maintenance');
GRANT SELECT ON memgov.engine_locks TO memgov_admin;

RESET ROLE;
