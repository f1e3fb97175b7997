-- Foundation: roles, the memgov schema, its tables, privileges and row level security.
-- Frozen copy of sql/000_roles.sql, 010_schema.sql, 015_tenants.sql and 060_security.sql as of this revision.

-- migrate:upgrade
-- memgov: roles and schema.
--
-- Roles are cluster-wide, so they are created only when missing: several
-- governed databases in one cluster share them. All five are NOLOGIN;
-- deployments grant the last three to their own login roles, never the first two.
--
--   memgov_owner     owns every memgov object; SECURITY DEFINER functions run as it
--   memgov_policy    owns the compiled policy functions, which run as it: no table privileges
--   memgov_writer    agents: read/write items, remember, forget
--   memgov_reviewer  the user-facing application and human reviewers
--   memgov_admin     deploy, rollback, schedule, bind tenants; reads across tenants

DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['memgov_owner', 'memgov_policy', 'memgov_writer', 'memgov_reviewer', 'memgov_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;

-- memgov_owner creates the compiled policy functions and hands them to memgov_policy
GRANT memgov_policy TO memgov_owner;

CREATE SCHEMA memgov AUTHORIZATION memgov_owner;
COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents';

-- memgov: tables.
--
-- Every table keeps org_id in its primary and unique keys so that it can be
-- distributed by tenant later. Objects are created as memgov_owner: no
-- application role owns a table.

SET ROLE memgov_owner;

-- No function memgov_owner creates is executable by PUBLIC unless granted: every
-- engine-internal function stays out of clients' reach by default. (The global form:
-- per-schema default privileges can only add to the global ones.)
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
-- memgov_policy owns the compiled policy functions here; it holds CREATE (which ALTER ...
-- OWNER needs) only inside memgov.hand_to_policy_role().
GRANT USAGE ON SCHEMA memgov TO memgov_policy;

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
-- Only memgov.record_write() and approve_request() insert here, from a typed
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
    actor             text         NOT NULL DEFAULT current_user,  -- the effective role
    login             text         NOT NULL DEFAULT session_user,  -- the login behind it
    risk_score        numeric(4,3),
    risk_level        text,                   -- low, medium, high, critical
    -- the transaction that wrote the row, as a bigint (BRIN indexes bigint, not xid8):
    -- the log's seals cover rows in (xact_id, decision_id) order (sql/080_audit.sql)
    xact_id           bigint       NOT NULL DEFAULT (pg_catalog.pg_current_xact_id())::text::bigint,
    PRIMARY KEY (org_id, decision_id)
);
COMMENT ON TABLE memgov.decision_log IS 'Append-only log of policy decisions';
-- Time-ordered appends: a BRIN index answers "the last 24 hours" for almost nothing.
CREATE INDEX decision_log_decided_at_idx ON memgov.decision_log USING brin (decided_at);
-- the sealer finds a seal's rows by transaction, in append order
CREATE INDEX decision_log_xact_id_idx ON memgov.decision_log USING brin (xact_id);

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
    quarantined_login text      NOT NULL DEFAULT session_user,
    resolved_at     timestamptz,
    resolved_by     text,
    resolved_login  text,
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
    login              text         NOT NULL DEFAULT session_user,
    at                 timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, event_id)
);
COMMENT ON TABLE memgov.feedback_events IS 'Confirm, reject, edit and forget feedback with confidence before and after';
CREATE INDEX feedback_events_memory_idx ON memgov.feedback_events (memory_id);

-- Tenant binding: a login that is (a member of) a role listed here may act only in
-- the tenants listed for it; logins that appear nowhere act in the tenant their
-- session names (memgov.org_id). Changed through memgov.grant_tenant / revoke_tenant.
CREATE TABLE memgov.tenant_grants (
    role_name   text        NOT NULL,
    org_id      text        NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    granted_by  text        NOT NULL DEFAULT session_user,
    PRIMARY KEY (role_name, org_id)
);
COMMENT ON TABLE memgov.tenant_grants IS 'Which tenants a bound login may act in (memgov tenant grant ROLE ORG)';

-- The engine's own settings, changed by memgov_admin with UPDATE.
CREATE TABLE memgov.settings (
    name   text    PRIMARY KEY CHECK (name IN ('max_fact_text_bytes', 'max_other_bytes')),
    value  bigint  NOT NULL CHECK (value BETWEEN 1024 AND 1073741823)
);
COMMENT ON TABLE memgov.settings IS
    'Engine settings: max_fact_text_bytes (default 65536) caps fact_text, max_other_bytes (16384) '
    'the other columns together, before any decision';
INSERT INTO memgov.settings (name, value) VALUES ('max_fact_text_bytes', 65536), ('max_other_bytes', 16384);

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

RESET ROLE;

-- memgov: who acts, and in which tenant.
--
-- Who: `session_user` is the login; memgov.invoker_role() is the role it acts
-- as (its SET ROLE, else the login). memgov's SECURITY DEFINER functions run as
-- memgov_owner but decide, log and check on behalf of that role and login,
-- never of current_user.
--
-- Which tenant: memgov.session_tenant() is the session's memgov.org_id
-- (SET [LOCAL] memgov.org_id = '...') when it is a valid tenant id and, for a
-- login bound to tenants (memgov.tenant_grants), one of its tenants; otherwise
-- NULL. Row level security (sql/060_security.sql) and every memgov function
-- hold writers and reviewers to it.

SET ROLE memgov_owner;

-- Whether a text is a tenant id: a letter or digit, then up to 62 of letters,
-- digits and . _ : - (never quotes, backslashes, whitespace or comment markers).
-- (No SET clause, so that it is inlined; the operator is schema-qualified instead.)
CREATE FUNCTION memgov.is_tenant_id(p_org_id text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_org_id OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$', false)
$$;

-- The role on whose behalf memgov's SECURITY DEFINER functions act (their current_user is memgov_owner).
-- (No SET clause: it is inlined into its callers, whose search_path is pinned.)
CREATE FUNCTION memgov.invoker_role()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(nullif(pg_catalog.current_setting('role'), 'none'), session_user::text)
$$;

-- Whether the invoking role works across tenants (memgov_admin, superusers).
CREATE FUNCTION memgov.is_admin()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(memgov.invoker_role(), 'memgov_admin', 'MEMBER')
$$;

-- Whether the login is held to tenant grants. Binding is on as soon as any grant exists:
-- then a writer or reviewer login acts only in tenants granted to it (or to a role it is
-- a member of), and one without a grant in none, so a dropped or renamed role fails
-- closed. Superusers are never bound; admins work across tenants (memgov.check_tenant).
-- (PL/pgSQL: its plans are kept for the session; a SQL function that cannot be inlined is
-- planned again on every call, and row security calls memgov.session_tenant() per statement.)
CREATE FUNCTION memgov.login_is_bound()
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM memgov.tenant_grants)
           AND NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user);
END
$$;

-- The tenant this session acts in (NULL: none; a writer or reviewer then sees nothing).
CREATE FUNCTION memgov.session_tenant()
RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id  text := current_setting('memgov.org_id', true);
BEGIN
    IF NOT memgov.is_tenant_id(v_org_id) THEN
        RETURN NULL;
    END IF;
    IF memgov.login_is_bound()
       AND NOT EXISTS (SELECT FROM memgov.tenant_grants g
                        WHERE g.org_id = v_org_id
                          AND coalesce(pg_has_role(session_user, to_regrole(quote_ident(g.role_name)), 'MEMBER'),
                                       false)) THEN
        RETURN NULL;
    END IF;
    RETURN v_org_id;
END
$$;

-- Raises 42501 unless the invoker may act in p_org_id: admins in any valid tenant,
-- everybody else in the session's tenant only (for a bound login: one of its tenants).
CREATE FUNCTION memgov.check_tenant(p_org_id text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_session  text := current_setting('memgov.org_id', true);
BEGIN
    IF NOT memgov.is_tenant_id(p_org_id) THEN
        RAISE EXCEPTION 'memgov: % is not a tenant id', coalesce(quote_literal(p_org_id), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'a tenant id is a letter or digit followed by up to 62 letters, digits, ".", "_", ":" or "-"';
    END IF;
    IF memgov.is_admin() THEN
        RETURN p_org_id;
    END IF;
    IF p_org_id IS DISTINCT FROM v_session THEN
        RAISE EXCEPTION 'memgov: tenant % is not this session''s tenant (%)', p_org_id,
                        coalesce(v_session, 'memgov.org_id unset')
            USING ERRCODE = '42501',
                  HINT = 'SET memgov.org_id to the tenant you act in; writes never reach another tenant';
    END IF;
    IF memgov.session_tenant() IS NULL THEN
        RAISE EXCEPTION 'memgov: login % is not bound to tenant %', session_user, p_org_id
            USING ERRCODE = '42501',
                  HINT = 'an administrator binds logins to tenants: memgov tenant grant ROLE ORG';
    END IF;
    RETURN p_org_id;
END
$$;

-- Binds a role (and the logins that are its members) to a tenant.
CREATE FUNCTION memgov.grant_tenant(p_role text, p_org_id text)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regrole(quote_ident(p_role)) IS NULL THEN
        RAISE EXCEPTION 'memgov: role % does not exist', coalesce(quote_ident(p_role), 'NULL')
            USING ERRCODE = '42704', HINT = 'grant a tenant to an existing login or group role';
    END IF;
    IF NOT memgov.is_tenant_id(p_org_id) THEN
        RAISE EXCEPTION 'memgov: % is not a tenant id', coalesce(quote_literal(p_org_id), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'a tenant id is a letter or digit followed by up to 62 letters, digits, ".", "_", ":" or "-"';
    END IF;
    INSERT INTO memgov.tenant_grants (role_name, org_id, granted_by)
    VALUES (p_role, p_org_id, session_user)
        ON CONFLICT (role_name, org_id) DO NOTHING;
    RETURN jsonb_build_object('role', p_role, 'org_id', p_org_id, 'granted', FOUND);
END
$$;

-- Removes a role's grant of a tenant (while other grants exist, a login left with none acts in no tenant).
CREATE FUNCTION memgov.revoke_tenant(p_role text, p_org_id text)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM memgov.tenant_grants WHERE role_name = p_role AND org_id = p_org_id;
    RETURN jsonb_build_object('role', p_role, 'org_id', p_org_id, 'revoked', FOUND,
                              'still_bound', EXISTS (SELECT FROM memgov.tenant_grants WHERE role_name = p_role));
END
$$;

-- Tenant ids in the tables that name tenants by hand ('*': the global policy)
ALTER TABLE memgov.policy_versions
    ADD CONSTRAINT policy_versions_tenant_id CHECK (org_id = '*' OR memgov.is_tenant_id(org_id));
ALTER TABLE memgov.tenant_grants
    ADD CONSTRAINT tenant_grants_tenant_id CHECK (memgov.is_tenant_id(org_id));

RESET ROLE;

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

-- migrate:downgrade
-- Roles are cluster-wide and may serve other databases: they are kept.
DROP SCHEMA memgov CASCADE;
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
