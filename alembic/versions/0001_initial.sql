-- The initial revision: the schema as first released. It never changes; every
-- later change is a revision of its own (docs/development.md).

-- migrate:upgrade
-- memgov: roles, the schema and who may use it.
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

SET ROLE memgov_owner;

-- No function memgov_owner creates is executable by PUBLIC unless granted: every
-- engine-internal function stays out of clients' reach by default. (The global form:
-- per-schema default privileges can only add to the global ones.)
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Who may use the schema: the client roles, and memgov_policy, which owns the compiled
-- policy functions here; it holds CREATE (which ALTER ... OWNER needs) only inside
-- memgov.hand_to_policy_role(). What each role may do with each object is granted next
-- to the object.
REVOKE ALL ON SCHEMA memgov FROM PUBLIC;
GRANT USAGE ON SCHEMA memgov TO memgov_policy;
GRANT USAGE ON SCHEMA memgov TO memgov_writer, memgov_reviewer, memgov_admin;

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
-- NULL. Row level security (each table's tenant_isolation policy, sql/010_schema.sql)
-- and every memgov function hold writers and reviewers to it.
--
-- This file comes before the tables: their row level security and CHECKs call it.

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
-- (No SET clause, so that it is inlined: only memgov's functions call it, which pin search_path.)
CREATE FUNCTION memgov.is_admin()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_has_role(memgov.invoker_role(), 'memgov_admin', 'MEMBER')
$$;

-- Tenant binding: a login that is (a member of) a role listed here may act only in
-- the tenants listed for it; logins that appear nowhere act in the tenant their
-- session names (memgov.org_id). Changed through memgov.grant_tenant / revoke_tenant.
CREATE TABLE memgov.tenant_grants (
    role_name   text        NOT NULL,
    org_id      text        NOT NULL CONSTRAINT tenant_grants_tenant_id CHECK (memgov.is_tenant_id(org_id)),
    granted_at  timestamptz NOT NULL DEFAULT now(),
    granted_by  text        NOT NULL DEFAULT session_user,
    PRIMARY KEY (role_name, org_id)
);
COMMENT ON TABLE memgov.tenant_grants IS 'Which tenants a bound login may act in (memgov tenant grant ROLE ORG)';
-- no row level security: only memgov_admin reads it, and clients may not
GRANT SELECT ON memgov.tenant_grants TO memgov_admin;

-- Whether logins are held to tenant grants. Binding is on as soon as any grant exists:
-- then a writer or reviewer login acts only in tenants granted to it (or to a role it is
-- a member of), and one without a grant in none, so a dropped or renamed role fails
-- closed. Superusers are never bound; admins work across tenants (memgov.check_tenant).
-- Row security asks this once per statement, so it is a constant that the planner folds:
-- memgov.rebuild_binding() regenerates it whenever tenant_grants changes (redefining a
-- function invalidates every plan that inlined it).
CREATE FUNCTION memgov.binding_on()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN false;

-- Whether this session's login may act in tenant p_org_id while binding is on.
CREATE FUNCTION memgov.login_bound_to(p_org_id text)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user)
        OR EXISTS (SELECT FROM memgov.tenant_grants g
                    WHERE g.org_id = p_org_id
                      AND coalesce(pg_has_role(session_user, to_regrole(quote_ident(g.role_name)), 'MEMBER'),
                                   false));
END
$$;

-- The tenant this session acts in (NULL: none; a writer or reviewer then sees nothing).
-- Row security calls it per statement: a SQL-standard body (its names bound when it was
-- created, whatever the caller's search_path), which the planner inlines; while binding is
-- off it reads no table.
CREATE FUNCTION memgov.session_tenant()
RETURNS text
LANGUAGE sql STABLE
RETURN CASE WHEN memgov.is_tenant_id(pg_catalog.current_setting('memgov.org_id', true))
                 AND (NOT memgov.binding_on()
                      OR memgov.login_bound_to(pg_catalog.current_setting('memgov.org_id', true)))
            THEN pg_catalog.current_setting('memgov.org_id', true) END;

-- Regenerates memgov.binding_on() after any change of tenant_grants (a statement trigger).
-- Changes are serialised by the table lock, and each reads the grants committed before it:
-- that takes READ COMMITTED (a snapshot older than a concurrent grant could turn binding off).
CREATE FUNCTION memgov.rebuild_binding()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'memgov: tenant grants change in READ COMMITTED transactions only'
            USING ERRCODE = '25001', HINT = 'run memgov tenant grant / revoke outside this transaction';
    END IF;
    LOCK TABLE memgov.tenant_grants IN SHARE ROW EXCLUSIVE MODE;
    EXECUTE format('CREATE OR REPLACE FUNCTION memgov.binding_on() RETURNS boolean'
                   ' LANGUAGE sql STABLE PARALLEL SAFE RETURN %s',
                   CASE WHEN EXISTS (SELECT FROM memgov.tenant_grants) THEN 'true' ELSE 'false' END);
    RETURN NULL;
END
$$;

CREATE TRIGGER rebuild_binding
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memgov.tenant_grants
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.rebuild_binding();
ALTER TABLE memgov.tenant_grants ENABLE ALWAYS TRIGGER rebuild_binding;

-- Raises 22023 unless p_org_id is a tenant id; returns it.
-- (No SET clause: it runs in the write path, under its callers' pinned search_path.)
CREATE FUNCTION memgov.check_tenant_id(p_org_id text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF NOT memgov.is_tenant_id(p_org_id) THEN
        RAISE EXCEPTION 'memgov: % is not a tenant id', coalesce(pg_catalog.quote_literal(p_org_id), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'a tenant id is a letter or digit followed by up to 62 letters, digits, ".", "_", ":" or "-"';
    END IF;
    RETURN p_org_id;
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
    PERFORM memgov.check_tenant_id(p_org_id);
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
    PERFORM memgov.check_tenant_id(p_org_id);
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

-- Whether the invoker may see objects of a tenant: admins every tenant, everybody else the session's.
CREATE FUNCTION memgov.sees_tenant(p_org_id text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.is_admin() OR p_org_id IS NOT DISTINCT FROM memgov.session_tenant()
$$;

-- Checks what a lookup by id in the caller's tenant found (memgov.sees_tenant; the row
-- locked FOR UPDATE): p_status is the row's status, NULL when there is none. Raises MG404
-- for none (another tenant's ids look the same as missing ones) and, when p_open names the
-- status the row must still have, MG409 for another. p_what names the row in the message.
CREATE FUNCTION memgov.check_found(p_what text, p_id uuid, p_status text, p_open text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_status IS NULL THEN
        RAISE EXCEPTION 'memgov: % % does not exist in tenant %', p_what, p_id,
                        coalesce(memgov.session_tenant(), '(memgov.org_id unset or not bound)')
            USING ERRCODE = 'MG404',
                  HINT = format('SET memgov.org_id to the tenant of the %s; no id reaches another tenant', p_what);
    END IF;
    IF p_status <> p_open THEN
        RAISE EXCEPTION 'memgov: % % is already %', p_what, p_id, p_status
            USING ERRCODE = 'MG409';
    END IF;
END
$$;

-- What clients may call here: their tenant; binding is memgov_admin's.
-- (session_tenant() is inlined into its callers' queries: what it calls runs as them)
GRANT EXECUTE ON FUNCTION memgov.session_tenant(), memgov.is_tenant_id(text), memgov.binding_on(),
                          memgov.login_bound_to(text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.grant_tenant(text, text), memgov.revoke_tenant(text, text)
    TO memgov_admin;

RESET ROLE;

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
    -- full-text search (docs/recall.md): the tenant's text search configuration when the
    -- memory was written, and the document memgov.search matches and ranks
    search_config        regconfig    NOT NULL DEFAULT 'pg_catalog.simple',
    search_vector        tsvector     GENERATED ALWAYS AS (to_tsvector(search_config, fact_text)) STORED,
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
-- memgov.search finds a text's matches here, then ranks them
CREATE INDEX long_term_memory_items_search_vector_idx
    ON memgov.long_term_memory_items USING gin (search_vector);

-- Agents write, reviewers read, admins write like agents in any tenant. Writers may set
-- the columns an agent owns; the engine's columns (status, policy_version, decision_id,
-- created_at, updated_at, last_confirmed_at, expires_at, low_confidence_since) are out of
-- their reach, and so are search_config and the generated search_vector. A table-level
-- INSERT, UPDATE, DELETE or TRUNCATE would let a client LOCK the table against every
-- tenant: writers forget through memgov.forget(). What a writer or reviewer may read of
-- its tenant's rows is the policy's `get` decision (sql/060_recall.sql).
GRANT SELECT ON memgov.long_term_memory_items TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT INSERT (memory_id, org_id, project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata),
      UPDATE (project_id, agent_id, subject_id, session_id, category, fact_text,
              source, confidence, is_sensitive, retention_policy, context_source, metadata)
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
-- when the active version changes, memgov.undeploy_policy one when it undoes an activation.
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
    'Every change of the active policy version of an org_id (''*'' = global), in activation_id order';
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
-- Only memgov.log_decision() inserts here (for record_write and approve_request), from a typed
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
    -- a read (search, get): a salted sha256 of the query, never its text, and what it returned
    query_fingerprint text,
    returned          integer,
    withheld          integer,
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
-- settings carry only what the policy file says; memgov.policy_setting() falls back here).
CREATE FUNCTION memgov.setting_defaults()
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{
    "limits": {
        "max_fact_text_bytes": 65536,
        "max_other_bytes":     16384
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
    }
}'::jsonb;

-- The engine's own settings, changed by memgov_admin with UPDATE.
CREATE TABLE memgov.settings (
    name   text    PRIMARY KEY CHECK (name IN ('max_fact_text_bytes', 'max_other_bytes')),
    value  bigint  NOT NULL CHECK (value BETWEEN 1024 AND 1073741823)
);
COMMENT ON TABLE memgov.settings IS
    'Engine settings: max_fact_text_bytes caps fact_text, max_other_bytes the other columns together, '
    'before any decision (defaults: memgov.setting_defaults() -> ''limits'')';
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

-- 020_detectors.sql — content detectors and the risk score (docs/detectors.md).
--
-- Everything here is IMMUTABLE and PARALLEL SAFE: the answer depends on the
-- arguments only. Two rules keep that promise honest:
--
--   * Every regular expression runs on `p_text COLLATE "C"` and uses explicit
--     ASCII classes, so neither the database locale nor the column collation
--     changes what matches (under a libc or ICU collation [[:alpha:]], \w,
--     \m and case folding would follow the locale).
--   * Patterns are returned by small IMMUTABLE functions (memgov.*_pattern());
--     the planner folds them to constants, so every caller uses the same
--     pattern text and PostgreSQL compiles each one once per backend.
--
-- Cost. The detectors run in the per-row write path, and PostgreSQL's
-- regex engine builds its DFA lazily on every call: the cost of a pattern on
-- a text grows with how many character classes and counted repetitions the
-- pattern has, not just with the text's length. So each family has
--
--   * a candidate pattern: a cheap necessary condition with few character
--     classes, which ordinary prose fails quickly, and
--   * a precise pattern, evaluated only on candidates, with its lookaround
--     checks placed after a rare anchor ('@', ':', '=', "sk-" ...) so that
--     they run once per candidate, never at every position.
--
-- contains_pii and contains_secret are single-expression SQL functions that
-- the planner inlines; the PL/pgSQL Luhn check only runs on texts that hold
-- a 13-19 digit candidate run. Seven patterns in all. PostgreSQL caches 32
-- compiled regexes per backend and compiles a pattern separately for `~`
-- and for regexp_matches(): the write path takes 8 cache slots,
-- detect_content() 2 more.
--
-- Kinds reported by memgov.detect_content():
--   pii:    email, phone, ssn, card
--   secret: assignment, bearer, private_key, sk_key, aws_key, jwt,
--           github_token, slack_token, url_credentials

SET ROLE memgov_owner;


-- Cheap necessary condition for PII: an '@', a '+' before a digit, or 9+ digits joined by phone separators.
CREATE OR REPLACE FUNCTION memgov.pii_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Every match of memgov.pii_pattern() and memgov.card_pattern() also
-- matches this (tests/db/test_detectors.py checks it on the corpus). Few
-- character classes keep its DFA small: ordinary prose and ISO dates fail
-- it in well under a microsecond. The run of digits must start a word, and
-- dots join its groups only in the 3-3-4 / 3-2-4 shapes, so the tail of a
-- UUID and an IPv4 address are not candidates.
RETURN $re$(?x)
  @ | \+[0-9]
| (?:^|[^0-9A-Za-z_.+-]) \(? [0-9] (?:[ ()/-]{0,2}[0-9]){8}
| [0-9]{3} [ ./-] [0-9]{2,3} [ .-] [0-9]{4}
$re$;


-- Regex for e-mail addresses, phone numbers and US SSNs; capture groups 1-4 name the kind (email, phone, phone, ssn).
CREATE OR REPLACE FUNCTION memgov.pii_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- The characters before a number are consumed instead of tested by a
-- lookbehind: PostgreSQL would test a leading lookbehind at every position
-- of the text. The national formats and the SSN share one boundary, so the
-- engine tracks one, not one per alternative: not a letter, digit or
-- number punctuation, and a space only when no digit precedes it (the last
-- groups of a longer number, an IBAN's 0532 0130 00, are not a phone). Validity checks sit
-- at the end of each alternative, where they run once per candidate.
RETURN $re$(?x)
  # 1 email: x@domain.tld -- not an SSH remote (git@github.com:...), the user
  #   info of a URL (https://user:token@host) nor a retina asset (logo@2x.png)
  ( [A-Za-z0-9._%+-] @ (?<!(?:^|[^A-Za-z0-9._%+-])git@) (?<!//[^ \t\n/@]*@) (?![0-9]+x\.)
    [A-Za-z0-9-]+ (?:\.[A-Za-z0-9-]+)* \.[A-Za-z]{2,} )
  # 2 phone, international (E.164): "+", country code, 8-15 digits in all,
  #   separated by spaces, dots, dashes or parentheses: +1 (555) 123-4567,
  #   +44 20 7946 0958, +380 50 123 45 67, +380501234567
| (?:^|[^0-9A-Za-z_+]) ( \+[1-9] (?:[ ().-]{0,2}[0-9]){7,14} (?![0-9]|[ ().-]{1,2}[0-9]) )
| (?: ^ | [^0-9A-Za-z_./+ -] | (?:^|[^0-9])[ ] )
  (?:
    # 3 phone, national
    ( # North American (NANP): (555) 123-4567, 555-123-4567, 555.123.4567,
      # 415/666-7777, 1-800-555-0199
      (?:1[ .-]?)? (?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[ ./-])
      [0-9]{3} [ .-] [0-9]{4} (?![0-9A-Za-z_]|[.-][0-9])
      # trunk prefix 0 (or "(0)"), an area code that never starts with 0
      # (00 is the international prefix), 10-12 digits in all grouped by
      # spaces, dashes or parentheses (UK, Ukraine, Germany, Turkey, the
      # Philippines ...): 020 7946 0958, 07700 900123, (044) 123-45-67,
      # 0 (532) 123 45 67, 09171234567, (0)900-1 123 123; or a one-digit
      # area code set apart, 9 digits in all (Israel, Sweden): 09-7625400,
      # 08 123 45 67. Not followed by ":" and a digit (a date and its time:
      # 05-03-2024 10:00).
    | (?: (?:\(0\)|0) [ ()-]{0,2} [1-9] (?:[ ()-]{0,2}[0-9]){8,10}
        | 0[1-9][ -][0-9] (?:[ -]?[0-9]){6} )
      (?![0-9A-Za-z_]|[ .()/-]{1,2}[0-9]|:[0-9])
      # no trunk prefix: an area code in parentheses and the subscriber
      # number, (33) 3461 2234, (11) 98456-5666; or the 3-3-2-2 grouping of
      # Turkish, Ukrainian and Russian numbers, 532 123 45 67
    | (?: \([1-9][0-9]{1,3}\)[ ]?[0-9]{2,5}[ -]?[0-9]{4}
        | [1-9][0-9]{2}[ -][0-9]{3}[ -][0-9]{2}[ -][0-9]{2} )
      (?![0-9A-Za-z_]|[ .-][0-9])
      # a bare national significant number: 10 digits, the first 2-9 (NANP,
      # Turkey, India ...), or 11 digits starting 1 and 2-9 (NANP with its
      # country code, Chinese mobiles): 4156667777, 13812345678
    | 1?[2-9][0-9]{9} (?![0-9A-Za-z_]|[.,-][0-9]) )
    # 4 ssn: US social security number NNN-NN-NNNN, NNN NN NNNN, NNN.NN.NNNN
    #   or NNNNNNNNN; the never-issued areas 000, 666 and 9xx, group 00 and
    #   serial 0000 are not SSNs
  | ( (?: [0-9]{3}-[0-9]{2}-[0-9]{4} | [0-9]{3}[ ][0-9]{2}[ ][0-9]{4} | [0-9]{3}\.[0-9]{2}\.[0-9]{4} | [0-9]{9} )
      (?![0-9A-Za-z_]|[ .-][0-9])
      (?<! (?:000|666|9[0-9]{2})[ .-]?[0-9]{2}[ .-]?[0-9]{4} | [ .-]00[ .-][0-9]{4} | [0-9]{3}00[0-9]{4} | 0000 ) ) )
$re$;


-- Regex for a payment-card candidate: 13-19 digits, first digit 2-6, optional single space/dash separators.
CREATE OR REPLACE FUNCTION memgov.card_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- First digit 2-6: Mastercard 2-series, Amex/Diners/JCB, Visa, Mastercard,
-- Discover/UnionPay/Maestro. The run must stand alone (no digit, letter or
-- separator-plus-digit on either side), so a longer number is not searched
-- for a card inside it. The whole match is the candidate (no capture group:
-- locating a group costs PostgreSQL a second pass).
RETURN $re$(?x)
  (?<![0-9A-Za-z_.+-]) [2-6](?:[ -]?[0-9]){12,18} (?![0-9A-Za-z_]|[ .-][0-9])
$re$;


-- Cheap necessary condition for memgov.secret_token_pattern(): a fragment of one of its literal anchors.
CREATE OR REPLACE FUNCTION memgov.secret_token_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- PostgreSQL splits the characters a pattern names into "colours" and
-- builds a DFA state for each colour a text visits, on every call: every
-- lower-case letter named here costs a little on every row of prose. So the
-- fragments are chosen to name few of them: "_" stands for sk_live_, ghp_,
-- github_pat_, npm_ ...; "k-" for sk-, "t-" / "s-" for GitLab's glpat- ...
-- gloas-; "yJ" for eyJ; "xox" / "xap" for Slack, in one class-pair so that
-- "p" is no colour of its own; "-u" for curl's -u / --user (the anchor
-- itself, not "curl": u, r and l would be three more colours); "arer" for
-- Bearer (leaving out "e", the commonest letter of prose); two letters of
-- AKIA, ASIA, ABIA, ACCA, A3T and AIza.
RETURN $re$(?x)
  ----- | :// | _ | A[KS3BCI][KSICTz] | SG\. | SK | GR1 | ARER | arer
| [kst]- | yJ | x[oa][xp] | -u | ks\.
$re$;


-- Regex for fixed-format credentials (case-sensitive); capture groups 1-15 name the kind.
CREATE OR REPLACE FUNCTION memgov.secret_token_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Each alternative is a literal anchor from
-- memgov.secret_token_candidate_pattern(), then a lookbehind that the
-- anchor starts a word and a lookahead for the rest of the token, as each
-- vendor documents it. A match covers the anchor only, so a token inside
-- another ("Bearer eyJ...") is still found by regexp_matches(..., 'g').
-- Placeholders are not tokens: a valid prefix followed by a run of x, X,
-- '#' or '*' (ghp_xxxx..., AKIAXXXXXXXXXXXXXXXX, xoxb-xxxxxxxxx-...). Every
-- scan is bounded, so a long run of anchors costs linear time.
RETURN $re$(?x)
  # 1 private_key: PEM private key header (RSA, EC, OPENSSH, ENCRYPTED, PGP
  #   ...), not followed within 40 characters by its END line (an empty or
  #   toy body is an example)
  ( -----BEGIN[ ] (?= (?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?----- (?! .{0,40}-----END ) ) )
  # 2 sk_key: OpenAI / Anthropic secret keys (sk-, sk-proj-, sk-ant-api03-)
  #   and Stripe secret / restricted keys (sk_live_, rk_test_, sk_prod_ ...):
  #   20+ more characters, at least one of them a digit
| ( (?:sk-|[rs]k_(?:live|test|prod)_) (?<! [A-Za-z0-9_-](?:sk-|[rs]k_(?:live|test|prod)_) )
    (?= [A-Za-z0-9_-]{20} ) (?= [A-Za-z0-9_-]*[0-9] ) (?! [A-Za-z0-9_-]*(?:xxxxxx|XXXXXX) ) )
  # 3 aws_key: AWS access key ids: AKIA (long-term), ASIA (temporary), ABIA,
  #   ACCA, A3T. + 16 upper-case letters and digits
| ( (?:A[KS]IA|ABIA|ACCA|A3T[A-Z0-9]) (?<! [A-Za-z0-9](?:A[KS]IA|ABIA|ACCA|A3T[A-Z0-9]) )
    (?= [A-Z0-9]{16}(?![A-Za-z0-9]) ) (?! [A-Z0-9]*XXXXXX ) )
  # 4 jwt: base64url segments, the header starting eyJ ('{"'): header,
  #   payload and signature, or an unsigned header.payload whose payload is
  #   JSON too (eyJ...)
| ( eyJ (?<! [A-Za-z0-9_-]eyJ ) (?= [A-Za-z0-9_-]{10,} \. (?: [A-Za-z0-9_-]{10,} \. | eyJ[A-Za-z0-9_-]{10} ) ) )
  # 5 github_token: ghp_ gho_ ghu_ ghs_ ghr_ + 36, fine-grained github_pat_
| ( gh[pousr]_ (?<! [A-Za-z0-9_]gh[pousr]_ ) (?= [A-Za-z0-9]{36} ) (?! [A-Za-z0-9]*(?:xxxxxx|XXXXXX) )
  | github_pat_ (?<! [A-Za-z0-9_]github_pat_ ) (?= [A-Za-z0-9_]{22} ) (?! [A-Za-z0-9_]*(?:xxxxxx|XXXXXX) ) )
  # 6 slack_token: bot, user, app-level and refresh tokens as Slack issues
  #   them: xoxb-/xoxp-/xoxa-/xoxo-/xoxs-/xoxr-/xoxe- + numeric team and
  #   user ids + a random part; xoxe-1-..., xoxe.xoxp-1-... (60+); xapp-1-...
| ( (?:xox|xapp-) (?<! [A-Za-z0-9_-](?:xox|xapp-) )
    (?= (?<=xox) (?: [abposre]-(?:[0-9]-)?[0-9]{6,}-[A-Za-z0-9-]{10} | e(?:\.xox[bpe])?-1-[A-Za-z0-9-]{60} )
      | (?<=xapp-) 1-[A-Z0-9]{6,}-[0-9]{6,}-[A-Za-z0-9]{20} )
    (?! [A-Za-z0-9.-]*(?:xxxxxx|XXXXXX|\#\#\#\#|\*\*\*\*) ) )
  # 7 bearer: "Bearer <token>" (in an Authorization header or not)
| ( (?:[Bb]earer|BEARER) (?= [ \t]+ (?![Yy][Oo][Uu][Rr]) [A-Za-z0-9._~+/-]{16} ) )
  # 8 url_credentials: a password in a URL's user info
  #   (postgres://app:S3cret-Pa55@db:5432/app, redis://:p4ssw0rd@cache),
  #   not a placeholder (user:password@, :****@, :${DB_PASSWORD}@, :<pass>@)
| ( :// (?<= [A-Za-z0-9]:// )
    (?= [^][ \t\n/?#@:"'`<>]* :
        (?! (?:password|passwd|pass|secret|changeme|x+|\*+)@ | [$<{*] )
        [^][ \t\n/?#@"'`<>]{3,} @ ) )
  # 9 google_api_key: AIza + 35
| ( AIza (?<! [A-Za-z0-9_-]AIza ) (?= [0-9A-Za-z_-]{35} ) (?! [0-9A-Za-z_-]*(?:aaaaaa|xxxxxx|XXXXXX|abcdefgh) ) )
  # 10 npm_token: npm_ + 36
| ( npm_ (?<! [A-Za-z0-9_]npm_ ) (?= [A-Za-z0-9]{36} ) (?! [A-Za-z0-9]*(?:xxxxxx|XXXXXX) ) )
  # 11 sendgrid_key: SG. + 22 . + 43
| ( SG\. (?<! [A-Za-z0-9_]SG\. ) (?= [A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43} ) )
  # 12 twilio_key: API key SID, SK + 32 hex
| ( SK (?<! [A-Za-z0-9_]SK ) (?= [0-9a-f]{32}(?![A-Za-z0-9]) ) )
  # 13 gitlab_token: personal, project, group, deploy, runner, trigger,
  #   feed, OAuth and agent tokens (glpat-, glptt-, gldt-, glrt-, glsoat-,
  #   glft-, glcbt-, glimt-, glagent-, gloas-), runner registration GR1348941
| ( (?:gl(?:pat|ptt|dt|rt|soat|ft|cbt|imt|agent|oas|ffct)-|GR1348941)
    (?<! [A-Za-z0-9_](?:gl(?:pat|ptt|dt|rt|soat|ft|cbt|imt|agent|oas|ffct)-|GR1348941) )
    (?= [A-Za-z0-9_-]{20} ) (?! [A-Za-z0-9_-]*(?:xxxxxx|XXXXXX) ) )
  # 14 slack_webhook: https://hooks.slack.com/services|workflows|triggers/...
| ( hooks\.slack\.com/ (?= (?:services|workflows|triggers)/[A-Za-z0-9+/_-]{24} )
    (?! [A-Za-z0-9+/_-]*(?:xxxxxx|XXXXXX) ) )
  # 15 curl_user: curl's -u / --user user:password (either part may be
  #   empty), within the same command (continuation lines included)
| ( (?:-u|--user) (?<= curl (?:[^\n]|\\\n){0,250} [ \t](?:-u|--user) )
    (?= [ \t=]+ ["']? (?! [$<{\[] )
        (?: [^ \t\n"':]{0,64} ["']? : ["']?
            (?! [$<{\[] | (?:password|passwd|pass|secret|token|test|changeme|x+|y+|\*+)(?![^ \t\n"']) )
            [^ \t\n"']{3}
          | [^ \t\n"':]{8,64} : (?![^ \t\n"']) ) ) )
$re$;


-- Cheap necessary condition for memgov.secret_assignment_pattern(): a separator followed by a credential-like value.
CREATE OR REPLACE FUNCTION memgov.secret_assignment_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- "is" / "was" are common words in prose, and the value after them is often
-- another word followed by more: they get a lookahead of their own without
-- the HTTP auth scheme (which the precise pattern takes only after a
-- symbol separator), so prose is not a candidate for every " is tight and ...".
RETURN $re$(?x)
  (?: = | :(?![0-9]) | ["'][ \t]*, )
  (?= [=>]? [ \t]*
      (?: ["'`]?
          (?: (?=[A-Za-z0-9!#$%&*+./:=?@^_~-]*[0-9!#$%&*+/:=?@^_~])
              [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5}
            | [A-Za-z]{16}
            | [A-Za-z-]+ [ \t]+ (?: [A-Za-z0-9._~+/-]{16} | [A-Za-z0-9+/]{6,}= ) )
        | ["'`] [^ \t\r\n"'`$<{%][^ \t\r\n"'`]{5} ) )
| [ \t](?:[Ii][Ss]|[Ww][Aa][Ss])[ \t]
  (?= [ \t]*
      (?: ["'`]?
          (?: (?=[A-Za-z0-9!#$%&*+./:=?@^_~-]*[0-9!#$%&*+/:=?@^_~])
              [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5}
            | [A-Za-z]{16} )
        | ["'`] [^ \t\r\n"'`$<{%][^ \t\r\n"'`]{5} ) )
| > [ \t\r\n]* [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5}
| ["'`] [ \t]* [!=]=
$re$;


-- Regex for a credential given as a key/value pair (case-insensitive): password: ..., api_key=..., "client_secret": "...".
CREATE OR REPLACE FUNCTION memgov.secret_assignment_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Anchored on the separator, which is rare, rather than on the key names,
-- which are many: "=" or ":" (not ":" and a digit: a time; nor a qualified
-- name's "a.b:c") and, through the characters around them,
-- := ::= ?= .= += => == === !=; "is" / "was" in prose; the comma between
-- a quoted key and its value in a call (setProperty("API_TOKEN", "...")),
-- and the ">" of an XML element (<apiToken>...</apiToken>). At each
-- separator the lookbehind first checks the key, which most separators in
-- prose and code fail at once: a credential name (password, DB_PASS,
-- api_key, x-api-key, client_secret, access_token, credentials, creds,
-- user_auth, Authorization, пароль ...) that ends its identifier, optionally
-- followed by a number or a representation suffix (token1, secretString), a
-- type (var apiToken string =, char secret[25] =) or a qualifier ("password
-- for the guest wifi"); a key that names something public is not one
-- (publicToken, publishable_key, csrf-token). Only then the lookahead wants
-- a value that looks like a credential: 6+ characters with a digit or
-- symbol, or a 16+ letter passphrase, or an HTTP auth scheme and its token
-- ("Basic dXNl...", "Api-Token 0123..."). Placeholders are not values:
-- YOUR_API_KEY, <token>, ${DB_PASSWORD}, ********, and a value holding a run
-- of x / # / *, a redaction ("[Redacted]") or a truncation ("abc...").
RETURN $re$(?xi)
  (?:
    (?: = | :(?=[ \t"'`=])
      # "key:value" without a blank (password:hunter2), but not a qualified
      # name's (io.jsonwebtoken:jjwt-api, host:port, //user:...)
      | :(?=[A-Za-z_!#$%&*+.?@^~-]) (?<! [.:/@][A-Za-z0-9_-]+: )
      | [ \t](?:is|was)[ \t] )
    (?<= (?: pass(?:word|wd|phrase)? | pwd | secrete? | token | authorization | creds? | credentials?
           | (?:[^a-z]|^)auth
           | (?:api|access|secret|private|signing|encryption|master|client|account|consumer|session)[ _-]?key | apikey
           | [Пп]ароль | [Тт]окен )
         (?: [_-]?[0-9]{1,3} | [_-]?(?:string|str|value|val|b64|base64|hex|raw|enc|encoded|encrypted|plain|plaintext) )?
         (?: \[[0-9]*\] )?
         (?: [ \t]*:?[ \t]*(?:string|str|char|text|bytes|\[\]byte) )?
         (?: [ \t]+(?:for|of|to|від|до|для)[ \t][^:=\n]{1,30} )?
         ["'`]? [ \t]* [:?.!+]{0,3} (?:[:=]|[ \t](?:is|was)[ \t]) )
    (?<! (?:public|publishable|csrf|xsrf)[a-z0-9_.-]*(?:token|key)["'`]? [ \t]* [:?.!+]{0,3} [:=] )
    (?= [=>]{0,2} [ \t]*
        (?: (?! ["'`]? (?:your|xxx|example|placeholder|redacted|changeme) )
            (?! ["'`]? (?: [A-Za-z0-9!#$%&*+./?@^_~-]*
                (?: xxxxxx | \#\#\#\# | \*\*\*\* | \.\.(?![A-Za-z0-9]) | your[_-] | [_-]here(?![a-z]) ) | \[redacted ) )
            (?: ["'`]? (?=[A-Za-z0-9!#$%&*+./:=?@^_~-]*[0-9!#$%&*+/:=?@^_~])
                [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5}
              | ["'`]? [A-Za-z]{16}
                # a quoted literal may hold any symbol: "m{h}o)p$e]n"
              | ["'`] (?=[^ \t\r\n"'`]*[0-9!#$%&*+/:=?@^_~(){}<>;,|\\-])
                [^ \t\r\n"'`$<{%][^ \t\r\n"'`]{5,} ["'`] )
            # an HTTP auth scheme and its credentials: Basic dXNl..., Api-Token 0123...
            # (after a symbol separator, not after "is" / "was")
          | (?<! [ \t](?:is|was)[ \t]+ ) (?:basic|digest|token|api-?token|api-?key|negotiate|hmac) [ \t]+ (?!your)
            (?: [A-Za-z0-9._~+/-]{16} | [A-Za-z0-9+/]{6,}={1,2} ) ) )
  | # a comparison with the literal first: if ("value" == password)
    = (?= =?=? [ \t]* [a-z0-9_.]*(?:password|passwd|pwd|secret|token|api_?key|private_key)(?![a-z0-9_]) )
    (?<= ["'`] [^ \t\r\n"'`$<{%][^ \t\r\n"'`]{5,} ["'`] [ \t]* [!=]= )
  | # a call's arguments: ("API_TOKEN", "value")
    ["'] [ \t]* ,
    (?= [ \t]* ["'] (?=[A-Za-z0-9!#$%&*+./:=?@^_~-]*[0-9!#$%&*+/:=?@^_~])
        [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5}
        (?! [A-Za-z0-9!#$%&*+./?@^_~-]* (?: xxxxxx | \#\#\#\# | \*\*\*\* | your[_-] ) ) )
    (?<= ["'] [a-z0-9_.-]* (?:pass(?:word|wd)?|pwd|secret|token|creds?|credentials?|[_-]key|apikey) ["'] [ \t]* , )
  | # an XML element: <apiToken>value</apiToken>
    >
    (?= [ \t\r\n]* (?=[A-Za-z0-9!#$%&*+./:=?@^_~-]*[0-9!#$%&*+/:=?@^_~])
        [A-Za-z0-9_][A-Za-z0-9!#$%&*+./:=?@^_~-]{5,} [ \t\r\n]* </ )
    (?! [ \t\r\n]* [A-Za-z0-9!#$%&*+./:=?@^_~-]* (?: xxxxxx | \#\#\#\# | \*\*\*\* | your[_-] ) )
    (?<= < [a-z0-9_:.-]* (?:password|passwd|pwd|secret|token|creds?|credentials?|[_-]?key|apikey) > )
  )
$re$;


-- True when p_digits (digits only) passes the Luhn checksum and is not all zeros.
CREATE OR REPLACE FUNCTION memgov.luhn_valid(p_digits text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
-- One assignment per digit: every PL/pgSQL statement costs, and texts with a
-- long number that is no card (an order id) run this on every write. A digit
-- indexes its value, or its doubled digit sum at every second place from the
-- right; anything else indexes outside the arrays, the sum turns NULL, and
-- the answer is false.
DECLARE
    v_sum integer := 0;
    v_len integer := length(p_digits);
BEGIN
    FOR v_i IN 1..v_len LOOP
        v_sum := v_sum + CASE WHEN (v_len - v_i) % 2 = 1
                              THEN ('{0,2,4,6,8,1,3,5,7,9}'::integer[])[ascii(substr(p_digits, v_i, 1)) - 47]
                              ELSE ('{0,1,2,3,4,5,6,7,8,9}'::integer[])[ascii(substr(p_digits, v_i, 1)) - 47] END;
    END LOOP;
    RETURN coalesce(v_sum > 0 AND v_sum % 10 = 0, false);
END
$fn$;


-- True when p_text contains a payment-card number: a memgov.card_pattern() candidate that passes Luhn.
CREATE OR REPLACE FUNCTION memgov.contains_card(p_text text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
-- Callers on a hot path test `p_text ~ memgov.card_pattern()` first, as
-- memgov.contains_pii does: this loop costs a query per call.
DECLARE
    v_match text[];
BEGIN
    FOR v_match IN
        SELECT regexp_matches(p_text COLLATE "C", memgov.card_pattern(), 'g')
    LOOP
        IF memgov.luhn_valid(translate(v_match[1], ' -', '')) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$fn$;


-- True when p_text contains an e-mail address, phone number, US SSN or Luhn-valid card number (NULL for NULL).
CREATE OR REPLACE FUNCTION memgov.contains_pii(p_text text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Inlined by the planner. Most texts stop at the cheap candidate test; the
-- PL/pgSQL Luhn check only runs when a 13-19 digit run is present.
RETURN (p_text COLLATE "C") ~ memgov.pii_candidate_pattern()
   AND ((p_text COLLATE "C") ~ memgov.pii_pattern()
        OR ((p_text COLLATE "C") ~ memgov.card_pattern() AND memgov.contains_card(p_text)));


-- True when p_text contains a credential: key assignment, bearer token, sk- key, AWS key, PEM key, JWT, GitHub or Slack token (NULL for NULL).
CREATE OR REPLACE FUNCTION memgov.contains_secret(p_text text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Inlined by the planner: each precise pattern runs only when its cheap
-- candidate pattern matched.
RETURN ((p_text COLLATE "C") ~ memgov.secret_token_candidate_pattern()
        AND (p_text COLLATE "C") ~ memgov.secret_token_pattern())
    OR ((p_text COLLATE "C") ~ memgov.secret_assignment_candidate_pattern()
        AND (p_text COLLATE "C") ~ memgov.secret_assignment_pattern());


-- Regex for an IPv4 address (dotted quad, each octet 0-255) or an IPv6 address (RFC 3986 grammar, optional zone).
CREATE OR REPLACE FUNCTION memgov.ip_address_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Not part of contains_pii: an address is personal data only sometimes
-- (a home connection, not a server), and memory texts hold many of them.
-- The IPv6 alternatives are RFC 3986's IPv6address rule, so "14:30:00" and
-- MAC addresses are not addresses, and a bare "::" counts only as a prefix
-- ("::/0"), never in prose or code ("f :: Int", "std::map").
RETURN $re$(?x)
  (?:^|[^0-9A-Za-z_.:])
  (?: (?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3} (?![0-9A-Za-z_]|\.[0-9])
    | (?: (?:[0-9A-Fa-f]{1,4}:){6}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | ::(?:[0-9A-Fa-f]{1,4}:){5}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){4}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,1})?::(?:[0-9A-Fa-f]{1,4}:){3}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,2})?::(?:[0-9A-Fa-f]{1,4}:){2}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,3})?::[0-9A-Fa-f]{1,4}:(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,4})?::(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3})
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?::[0-9A-Fa-f]{1,4}
      | (?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?::(?=/[0-9]) )
      (?:%[0-9A-Za-z._~-]+)? (?![0-9A-Za-z_:]|\.[0-9]) )
$re$;


-- True when p_text contains an IPv4 or IPv6 address (NULL for NULL); the field content.contains_ip_address.
CREATE OR REPLACE FUNCTION memgov.contains_ip_address(p_text text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- A dot or a colon is a necessary condition, and most prose has neither
-- next to a digit: the strpos tests spare it the pattern.
RETURN (strpos(p_text, '.') > 0 OR strpos(p_text, ':') > 0)
   AND (p_text COLLATE "C") ~ memgov.ip_address_pattern();


-- Regex for an IBAN candidate: country code, 2 check digits, 11-30 letters and digits, optionally in groups of 4.
CREATE OR REPLACE FUNCTION memgov.iban_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- ISO 13616: 15-34 characters in all; printed in groups of four separated
-- by single spaces (DE89 3704 0044 0532 0130 00) or unbroken. The whole
-- match is the candidate; memgov.iban_valid() checks it.
RETURN $re$(?x)
  (?<![0-9A-Za-z]) [A-Z]{2}[0-9]{2} (?: (?:[ ]?[0-9A-Z]{4}){2,7} (?:[ ]?[0-9A-Z]{1,4})? ) (?![0-9A-Za-z])
$re$;


-- True when p_iban (spaces allowed) is an IBAN whose check digits pass ISO 7064 mod 97-10.
CREATE OR REPLACE FUNCTION memgov.iban_valid(p_iban text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
-- Move the country code and check digits to the end, read letters as
-- 10..35, and the remainder modulo 97 must be 1. The remainder is carried
-- digit by digit, so no number ever exceeds 4 digits.
DECLARE
    v_iban      text := upper(replace(p_iban, ' ', ''));
    v_rearranged text;
    v_code      integer;
    v_remainder integer := 0;
BEGIN
    IF length(v_iban) NOT BETWEEN 15 AND 34 OR v_iban !~ '^[A-Z]{2}[0-9]{2}[0-9A-Z]+$' THEN
        RETURN false;
    END IF;
    v_rearranged := substr(v_iban, 5) || substr(v_iban, 1, 4);
    FOR v_i IN 1..length(v_rearranged) LOOP
        v_code := ascii(substr(v_rearranged, v_i, 1));
        IF v_code BETWEEN 48 AND 57 THEN                          -- '0'..'9'
            v_remainder := (v_remainder * 10 + v_code - 48) % 97;
        ELSE                                                      -- 'A'..'Z' = 10..35
            v_remainder := (v_remainder * 100 + v_code - 55) % 97;
        END IF;
    END LOOP;
    RETURN v_remainder = 1;
END
$fn$;


-- True when p_text contains an IBAN that passes the mod-97 check (NULL for NULL); the field content.contains_iban.
CREATE OR REPLACE FUNCTION memgov.contains_iban(p_text text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (p_text COLLATE "C") ~ memgov.iban_pattern()
   AND (p_text IS NULL OR EXISTS (SELECT FROM regexp_matches(p_text COLLATE "C", memgov.iban_pattern(), 'g') AS m(groups)
                WHERE memgov.iban_valid(m.groups[1])));


-- Names the detectors that fire on p_text: {"pii": [kinds], "secret": [kinds]}, kinds sorted, [] when none; NULL for NULL.
CREATE OR REPLACE FUNCTION memgov.detect_content(p_text text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
-- For explanations, not for the write path: it walks every match of the
-- precise patterns. Token matches cover their anchor only, so nested kinds
-- are all reported ("Bearer eyJ..." is bearer and jwt; "api_key=sk-..." is
-- assignment and sk_key).
BEGIN ATOMIC
    SELECT jsonb_build_object(
        'pii', to_jsonb(ARRAY(
            SELECT g.kind
              FROM regexp_matches(p_text COLLATE "C", memgov.pii_pattern(), 'g') AS m(groups),
                   unnest(m.groups, ARRAY['email', 'phone', 'phone', 'ssn']) AS g(hit, kind)
             WHERE g.hit IS NOT NULL
            UNION
            SELECT 'card' WHERE memgov.contains_card(p_text)
             ORDER BY 1)),
        'secret', to_jsonb(ARRAY(
            SELECT g.kind
              FROM regexp_matches(p_text COLLATE "C", memgov.secret_token_pattern(), 'g') AS m(groups),
                   unnest(m.groups, ARRAY['private_key', 'sk_key', 'aws_key', 'jwt',
                                          'github_token', 'slack_token', 'bearer',
                                          'url_credentials', 'google_api_key', 'npm_token',
                                          'sendgrid_key', 'twilio_key', 'gitlab_token',
                                          'slack_webhook', 'curl_user']) AS g(hit, kind)
             WHERE g.hit IS NOT NULL
            UNION
            SELECT 'assignment'
             WHERE (p_text COLLATE "C") ~ memgov.secret_assignment_pattern()
             ORDER BY 1)));
END;


-- Maps a risk score to low/medium/high/critical using p_thresholds low_max/medium_max/high_max (defaults 0.30/0.60/0.80).
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

-- memgov: policy versions, the decision entry points and deployment.
--
-- `memgov deploy` compiles a policy file into the bodies of three functions
-- named after the version's hash (memgov.policy_<hash>, _explain, _retention);
-- memgov.install_policy creates them with fixed signatures and hands them to
-- memgov_policy, a role with no table privileges, as whom they run (SECURITY
-- DEFINER): whatever a body says, it reads and writes no table, so installing
-- a policy never gives its author memgov_owner's rights. Callers never use
-- those names: the dispatchers memgov.decide / memgov.explain_decision /
-- memgov.retention_rule are regenerated on every activation and route each
-- row to the active version of its tenant (org_id), or to the global one ('*').
-- None of these is executable by a client role: clients reach decisions
-- through the write trigger, memgov.evaluate and memgov.explain, which check
-- the tenant first.

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

-- Regenerates the shadow dispatchers from the running shadows (memgov.policy_shadows):
-- shadow_of, the running shadow that sees a tenant's decisions (NULL: none; the write
-- path's test, the constant NULL while no shadow runs), and shadow_decide, the decision of
-- that shadow's candidate. A tenant's own shadow sees its tenant's decisions; the global
-- shadow those of every other tenant that follows the global policy: the decisions each
-- candidate would take once promoted. Runs whenever a shadow starts or ends, and from
-- rebuild_dispatch (a tenant's own policy takes it out of the global shadow's sight).
CREATE FUNCTION memgov.rebuild_shadow_dispatch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $rebuild$
DECLARE
    v_of           text := '';
    v_decide       text := '';
    v_global_id    bigint;
    v_global_call  text := 'NULL';
    v_own          text[] := '{}';  -- tenants that follow a policy of their own (and no shadow of theirs)
    v_call         text;
    v_shadow       record;
BEGIN
    FOR v_shadow IN
        SELECT s.shadow_id, s.org_id, v.version, v.mode, v.function_name,
               coalesce((v.settings ->> 'reads')::boolean, false) AS reads
          FROM memgov.policy_shadows s
          JOIN memgov.policy_versions v ON v.org_id = s.org_id AND v.version = s.version
         WHERE s.ended_at IS NULL
         ORDER BY s.org_id COLLATE "C"
    LOOP
        -- a candidate without read rules answers reads as the engine does for such a policy
        v_call := format('memgov.%I(p_item, p_operation, p_actor)', v_shadow.function_name);
        IF NOT v_shadow.reads THEN
            v_call := format($c$CASE WHEN p_operation IN ('search', 'get') THEN memgov.ungoverned_read(%L, %L) ELSE %s END$c$,
                             v_shadow.version, v_shadow.mode, v_call);
        END IF;
        IF v_shadow.org_id = '*' THEN
            v_global_id := v_shadow.shadow_id;
            v_global_call := v_call;
            CONTINUE;
        END IF;
        v_of := v_of || format(E'        WHEN p_org_id = %L THEN %s\n', v_shadow.org_id, v_shadow.shadow_id);
        v_decide := v_decide || format(E'    IF p_item.org_id = %L THEN\n        RETURN %s;\n    END IF;\n',
                                       v_shadow.org_id, v_call);
    END LOOP;
    IF v_global_id IS NOT NULL THEN
        SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_own
          FROM memgov.policy_versions v
         WHERE v.active AND v.org_id <> '*'
           AND NOT EXISTS (SELECT FROM memgov.policy_shadows s WHERE s.org_id = v.org_id AND s.ended_at IS NULL);
        IF cardinality(v_own) > 0 THEN
            v_of := v_of || format(E'        WHEN p_org_id = ANY (%L::text[]) THEN NULL\n', v_own);
            v_decide := v_decide || format(E'    IF p_item.org_id = ANY (%L::text[]) THEN\n        RETURN NULL;\n    END IF;\n',
                                           v_own);
        END IF;
    END IF;

    -- a SQL-standard body that the planner inlines into the write trigger's test
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.shadow_of(p_org_id text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        CASE WHEN v_of = '' THEN coalesce(v_global_id::text, 'NULL') || '::bigint'
             ELSE format(E'CASE\n%s        ELSE %s::bigint\n    END', v_of, coalesce(v_global_id::text, 'NULL')) END);
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.shadow_decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$, v_decide, v_global_call);
END
$rebuild$;

-- Regenerates the dispatchers from the active policy versions: decide,
-- explain_decision, retention_rule, policy_settings (the feedback and
-- retention settings of a tenant's active version, as constants),
-- retention_held (which asks for a forget decision only where the active
-- policy may hold, memgov.policy_may_hold), reads_governed (whether a
-- tenant's active policy decides reads: its settings' "reads") and search_config (the
-- tenant's text search configuration: settings' search.text_config; when it
-- changes, the memories it changes for are indexed anew), sample_rate (the share of a
-- tenant's writes kept for replay: settings' replay.sample_rate), then the shadow dispatchers.
-- Runs at deploy and rollback only; the per-row path is static SQL.
CREATE FUNCTION memgov.rebuild_dispatch()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $rebuild$
DECLARE
    v_decide     text := '';
    v_explain    text := '';
    v_retention  text := '';
    v_settings   text := '';
    v_global     text;
    v_global_settings jsonb;
    v_global_holds boolean := false;
    v_held_apart   text[] := '{}';  -- tenants whose own policy holds where the global does not, or the reverse
    v_global_reads boolean := false;
    v_reads_apart  text[] := '{}';  -- tenants whose own policy governs reads where the global does not, or the reverse
    v_configs      text := '';
    v_old_configs  text;
    v_body       text;
    v_at         integer;
    v_version    record;
    -- the line the compiler writes right after BEGIN of every decide body (TENANT_ROUTING_MARKER
    -- in memgov_pg/compiler.py): where the tenants' routing goes when that body serves as decide
    v_marker     constant text := E'\n    -- memgov:tenant-routing\n';
BEGIN
    FOR v_version IN
        SELECT org_id, function_name, settings, memgov.policy_may_hold(org_id, version) AS holds
          FROM memgov.policy_versions
         WHERE active
         ORDER BY org_id COLLATE "C"
    LOOP
        IF v_version.org_id = '*' THEN
            v_global := v_version.function_name;
            v_global_settings := v_version.settings;
            v_global_holds := v_version.holds;
            v_global_reads := coalesce((v_version.settings ->> 'reads')::boolean, false);
            CONTINUE;
        END IF;
        -- a tenant's own policy decides all its settings (one it leaves out: the default)
        v_configs := v_configs || format(E'        WHEN p_org_id = %L THEN %L::regconfig\n', v_version.org_id,
                                         coalesce(v_version.settings -> 'search' ->> 'text_config', 'pg_catalog.simple'));
        v_settings := v_settings || format(
            E'    IF p_org_id = %L THEN\n        RETURN %L::jsonb;\n    END IF;\n',
            v_version.org_id, v_version.settings);
        v_decide := v_decide || format(
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
            v_version.org_id, v_version.function_name);
        v_explain := v_explain || format(
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item, p_operation, p_actor);\n    END IF;\n',
            v_version.org_id, v_version.function_name || '_explain');
        v_retention := v_retention || format(
            E'        WHEN p_item.org_id = %L THEN memgov.%I(p_item)\n',
            v_version.org_id, v_version.function_name || '_retention');
    END LOOP;

    -- memgov.decide carries the global policy's own body (one PL/pgSQL call per
    -- row, not two), preceded by the tenant overrides' routing
    IF v_global IS NULL THEN
        v_body := E'\nBEGIN\n' || v_decide || E'    RETURN memgov.no_policy_decision();\nEND\n';
    ELSE
        SELECT p.prosrc INTO STRICT v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = format('memgov.%I(memgov.long_term_memory_items, text, text)', v_global)::regprocedure;
        -- the routing goes right after the marker line, which a compiled body holds once (no
        -- policy value spans lines: the compiler writes line breaks in literals as escapes);
        -- plain string surgery: no pattern or replacement syntax that a tenant id could reach
        IF length(v_body) - length(replace(v_body, v_marker, '')) <> length(v_marker) THEN
            RAISE EXCEPTION 'the body of the active global policy (memgov.%) must hold the tenant routing marker line once',
                            v_global
                USING ERRCODE = 'MG500',
                      HINT = 'it was not compiled by this memgov: bump version: in the policy file and deploy it';
        END IF;
        v_at := strpos(v_body, v_marker) + length(v_marker);
        v_body := left(v_body, v_at - 1) || v_decide || substr(v_body, v_at);
    END IF;
    -- decide carries a compiled body: it runs as memgov_policy, like the compiled functions
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER
AS %L$f$, v_body);
    PERFORM memgov.hand_to_policy_role('memgov.decide(memgov.long_term_memory_items, text, text)');

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.explain_decision(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$,
        v_explain,
        CASE WHEN v_global IS NULL THEN '''[]''::jsonb'
             ELSE format('memgov.%I(p_item, p_operation, p_actor)', v_global || '_explain') END);

    -- retention_rule is SQL, which the planner inlines into the sweep's walk: one call per
    -- row (the compiled function), not two
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_rule(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT %s
$body$$f$,
        format(CASE WHEN v_retention = '' THEN '%2$s' ELSE E'CASE\n%1$s        ELSE %2$s\n    END' END,
               v_retention,
               CASE WHEN v_global IS NULL THEN 'NULL::text'
                    ELSE format('memgov.%I(p_item)', v_global || '_retention') END));

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.policy_settings(p_org_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %L::jsonb;
END
$body$$f$,
        v_settings, coalesce(v_global_settings, '{}'::jsonb));

    -- retention_held: SQL that the planner inlines into the sweep's queries, so that a tenant
    -- whose active policy cannot deny a forget by a rule costs no decision per row (tenants
    -- without a policy of their own follow the global one; with none at all, nothing holds)
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_held_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*' AND memgov.policy_may_hold(v.org_id, v.version) <> v_global_holds;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_held(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
AS $body$
    -- Whether a forget rule holds a memory against automatic deletion (generated by memgov.rebuild_dispatch)
    SELECT CASE WHEN p_item.org_id = ANY (%L::text[]) THEN %s ELSE %s END
$body$$f$,
        v_held_apart,
        CASE WHEN v_global_holds THEN 'false' ELSE 'memgov.forget_denied_by_rule(p_item)' END,
        CASE WHEN v_global_holds THEN 'memgov.forget_denied_by_rule(p_item)' ELSE 'false' END);

    -- reads_governed and search_config: SQL-standard bodies (bound at creation, whatever the
    -- caller's search_path) that the planner inlines into row level security and the write
    -- trigger, a constant where no tenant's policy sets them apart
    SELECT coalesce(array_agg(v.org_id ORDER BY v.org_id COLLATE "C"), '{}') INTO v_reads_apart
      FROM memgov.policy_versions v
     WHERE v.active AND v.org_id <> '*'
       AND coalesce((v.settings ->> 'reads')::boolean, false) <> v_global_reads;
    v_body := CASE WHEN cardinality(v_reads_apart) = 0 THEN v_global_reads::text
                   ELSE format('CASE WHEN %%s = ANY (%L::text[]) THEN %s ELSE %s END',
                               v_reads_apart, (NOT v_global_reads)::text, v_global_reads::text) END;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.reads_governed(p_org_id text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$, format(v_body, 'p_org_id'));
    v_old_configs := pg_get_functiondef(to_regprocedure('memgov.search_config(text)'));  -- NULL before the first
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.search_config(p_org_id text)
RETURNS regconfig
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_configs = '' THEN '%2$L::regconfig' ELSE E'CASE\n%1$s        ELSE %2$L::regconfig\n    END' END,
               v_configs, coalesce(v_global_settings -> 'search' ->> 'text_config', 'pg_catalog.simple')));
    -- a tenant whose text search configuration changed has its memories indexed anew
    -- (search_vector follows search_config), in the deploy's transaction
    IF v_old_configs IS DISTINCT FROM pg_get_functiondef('memgov.search_config(text)'::regprocedure) THEN
        UPDATE memgov.long_term_memory_items m
           SET search_config = memgov.search_config(m.org_id)
         WHERE m.search_config <> memgov.search_config(m.org_id);
    END IF;
    -- sample_rate: the share of a tenant's stored or held writes kept for replay (its policy's
    -- replay.sample_rate; none by default), a constant in the write trigger's test
    SELECT coalesce(string_agg(format(E'        WHEN p_org_id = %L THEN %s\n', v.org_id, r.rate), '' ORDER BY v.org_id COLLATE "C"), '')
      INTO v_body
      FROM memgov.policy_versions v,
           LATERAL (SELECT coalesce(v.settings -> 'replay' ->> 'sample_rate',
                                    memgov.setting_defaults() -> 'replay' ->> 'sample_rate')::numeric AS rate) AS r
     WHERE v.active AND v.org_id <> '*';
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.sample_rate(p_org_id text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
RETURN %s$f$,
        format(CASE WHEN v_body = '' THEN '%2$s::numeric' ELSE E'CASE\n%1$s        ELSE %2$s::numeric\n    END' END,
               v_body, coalesce(v_global_settings -> 'replay' ->> 'sample_rate',
                                memgov.setting_defaults() -> 'replay' ->> 'sample_rate')::numeric));
    -- a tenant whose policy stops sampling has its samples deleted: samples exist only where
    -- the memories' deletion deletes them (the trigger forget_samples)
    DELETE FROM memgov.replay_samples s WHERE memgov.sample_rate(s.org_id) = 0;
    PERFORM memgov.rebuild_shadow_dispatch();
END
$rebuild$;

-- Until the first deploy every tenant is routed to memgov.no_policy_decision().
SELECT memgov.rebuild_dispatch();

-- One setting of a tenant's active policy (p_section feedback or retention), or the
-- engine's default when the policy leaves it out (memgov.setting_defaults()): the one place
-- that falls back on a default. The typed helpers below are what callers use. Like them it
-- has no SET clause, so that it is inlined into the per-row queries that call it.
CREATE FUNCTION memgov.policy_setting(p_org_id text, p_section text, p_key text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(memgov.policy_settings(p_org_id) -> p_section ->> p_key,
                    memgov.setting_defaults() -> p_section ->> p_key)
$$;

-- A feedback setting of a tenant (confirm_delta, reject_delta, reject_delete_below, edit_confidence).
CREATE FUNCTION memgov.feedback_setting(p_org_id text, p_key text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'feedback', p_key)::numeric
$$;

-- A retention setting of a tenant that is a duration (confidence_grace, approval_ttl).
CREATE FUNCTION memgov.retention_interval(p_org_id text, p_key text)
RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'retention', p_key)::interval
$$;

-- The confidence below which a tenant's confidence_based memories start their grace.
CREATE FUNCTION memgov.confidence_floor(p_org_id text)
RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT memgov.policy_setting(p_org_id, 'retention', 'confidence_floor')::numeric
$$;

-- the sweep (run_maintenance runs as its caller) reads the retention settings, and
-- `memgov retention schedule` the default schedule
GRANT EXECUTE ON FUNCTION memgov.policy_settings(text), memgov.policy_setting(text, text, text),
                          memgov.setting_defaults()
    TO memgov_admin;
-- which deployed versions make the sweep decide forget per due memory (docs/retention.md)
GRANT EXECUTE ON FUNCTION memgov.policy_may_hold(text, text), memgov.rule_excludes_forget(jsonb) TO memgov_admin;

-- Serialises deploys, activations and rollbacks: a row lock no client can take or hold.
CREATE FUNCTION memgov.lock_deploys()
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT FROM memgov.engine_locks WHERE name = 'deploy' FOR UPDATE
$$;

-- Makes one deployed version the active one of its tenant and reroutes the dispatchers.
CREATE FUNCTION memgov.activate_policy(p_org_id text, p_version text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_previous  text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF NOT EXISTS (SELECT FROM memgov.policy_versions
                    WHERE org_id = p_org_id AND version = p_version) THEN
        RAISE EXCEPTION 'policy version % is not deployed for %', p_version,
                        CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
            USING ERRCODE = 'MG404',
                  HINT = 'list the deployed versions: SELECT org_id, version FROM memgov.policy_versions';
    END IF;
    SELECT version INTO v_previous FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    UPDATE memgov.policy_versions SET active = false
     WHERE org_id = p_org_id AND active AND version <> p_version;
    UPDATE memgov.policy_versions SET active = true
     WHERE org_id = p_org_id AND version = p_version AND NOT active;
    -- the history memgov.undeploy_policy reads: only a change of the active version
    IF v_previous IS DISTINCT FROM p_version THEN
        INSERT INTO memgov.policy_activations (org_id, version, previous_version)
        VALUES (p_org_id, p_version, v_previous);
    END IF;
    PERFORM memgov.rebuild_dispatch();
    RETURN p_version;
END
$$;

-- Installs a compiled policy version without activating it (what a shadow deployment and
-- a replay decide with). The three bodies become memgov.<p_function_name>, _explain and
-- _retention, with the signatures written here; PostgreSQL, not our compiler, has the
-- last word on each body. A version deployed before with the same content is left as it is.
CREATE FUNCTION memgov.stage_policy(
    p_org_id          text,
    p_version         text,
    p_sha256          text,
    p_mode            text,
    p_function_name   text,
    p_source_yaml     text,
    p_decide_body     text,
    p_explain_body    text,
    p_retention_body  text,
    p_settings        jsonb,
    p_rules           jsonb)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing   memgov.policy_versions;
    v_function   record;
    v_compiled   text := '';
BEGIN
    -- one deploy at a time; concurrent writers keep using the old dispatchers until commit
    PERFORM memgov.lock_deploys();

    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_function_name IS NULL OR p_function_name !~ '^policy_[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'invalid compiled function name %', p_function_name USING ERRCODE = '22023';
    END IF;

    SELECT * INTO v_existing FROM memgov.policy_versions
     WHERE org_id = p_org_id AND version = p_version;
    IF FOUND THEN
        IF v_existing.sha256 <> p_sha256 THEN
            RAISE EXCEPTION 'policy version % is already deployed with different content', p_version
                USING ERRCODE = 'MG409',
                      HINT = 'bump `version:` in the policy file; deployed versions never change';
        END IF;
        RETURN p_version;
    END IF;

    FOR v_function IN
        SELECT f.name, f.args, f.types, f.returns, f.body
          FROM (VALUES
                (p_function_name, 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'memgov.decision', p_decide_body),
                (p_function_name || '_explain', 'p_item memgov.long_term_memory_items, p_operation text, p_actor text',
                 'memgov.long_term_memory_items, text, text', 'jsonb', p_explain_body),
                (p_function_name || '_retention', 'p_item memgov.long_term_memory_items',
                 'memgov.long_term_memory_items', 'text', p_retention_body)) AS f(name, args, types, returns, body)
    LOOP
        IF v_function.body IS NULL THEN
            RAISE EXCEPTION 'the compiled policy has no body for %', v_function.name USING ERRCODE = '22023';
        END IF;
        BEGIN
            EXECUTE format('CREATE OR REPLACE FUNCTION memgov.%I(%s) RETURNS %s '
                           'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                           v_function.name, v_function.args, v_function.returns, v_function.body);
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'PostgreSQL rejected the compiled policy %: %', p_version, SQLERRM
                USING ERRCODE = 'MG500',
                      HINT = 'this is a memgov compiler bug: run `memgov compile` and report the output';
        END;
        PERFORM memgov.hand_to_policy_role(format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure);
        EXECUTE format('COMMENT ON FUNCTION memgov.%I(%s) IS %L', v_function.name, v_function.types,
                       format('memgov policy %s (%s), sha256 %s', p_version, p_org_id, p_sha256));
        v_compiled := v_compiled || pg_get_functiondef(
            format('memgov.%I(%s)', v_function.name, v_function.types)::regprocedure) || E';\n\n';
    END LOOP;

    INSERT INTO memgov.policy_versions
           (org_id, version, sha256, mode, function_name, source_yaml, compiled_sql, settings, deployed_by)
    VALUES (p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml, v_compiled,
            p_settings, session_user);

    INSERT INTO memgov.memory_policy_rules
           (org_id, policy_version, rule_id, rule_key, position, category, condition, action,
            priority, reason_codes, description)
    SELECT p_org_id, p_version, r.rule_id, r.rule_key, r.position, r.category, r.condition,
           r.action, r.priority, r.reason_codes, r.description
      FROM jsonb_to_recordset(p_rules) AS r(rule_id text, rule_key text, position integer,
           category text[], condition jsonb, action text, priority integer, reason_codes text[],
           description text);
    RETURN p_version;
END
$$;

-- Installs a compiled policy (what `memgov compile` prints) and activates it, atomically.
CREATE FUNCTION memgov.install_policy(
    p_org_id          text,
    p_version         text,
    p_sha256          text,
    p_mode            text,
    p_function_name   text,
    p_source_yaml     text,
    p_decide_body     text,
    p_explain_body    text,
    p_retention_body  text,
    p_settings        jsonb,
    p_rules           jsonb)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN memgov.activate_policy(p_org_id,
        memgov.stage_policy(p_org_id, p_version, p_sha256, p_mode, p_function_name, p_source_yaml,
                            p_decide_body, p_explain_body, p_retention_body, p_settings, p_rules));
END
$$;

-- Re-activates an earlier version (default: the latest one deployed before the active one
-- that was ever active).
CREATE FUNCTION memgov.rollback_policy(p_org_id text DEFAULT '*', p_to_version text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_target  text := p_to_version;
BEGIN
    IF v_target IS NULL THEN
        SELECT prev.version INTO v_target
          FROM memgov.policy_versions cur
          JOIN memgov.policy_versions prev
            ON prev.org_id = cur.org_id AND prev.deployed_at < cur.deployed_at
         WHERE cur.org_id = p_org_id AND cur.active
           -- a version only ever shadowed (or replayed) was never the policy: not a target
           AND EXISTS (SELECT FROM memgov.policy_activations a
                        WHERE a.org_id = prev.org_id AND a.version = prev.version)
         ORDER BY prev.deployed_at DESC
         LIMIT 1;
        IF v_target IS NULL THEN
            RAISE EXCEPTION 'no earlier policy version to roll back to for %',
                            CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
                USING ERRCODE = 'MG404',
                      HINT = 'name a version with --to';
        END IF;
    END IF;
    RETURN memgov.activate_policy(p_org_id, v_target);
END
$$;

-- Undoes the latest activation of a version (what a policy revision's downgrade runs):
-- re-activates the version that was active right before it, or leaves the scope with no
-- active policy (every write is then denied: memgov.no_policy_decision). When p_version is
-- not the active version of the scope, nothing changes (a NOTICE says so). Returns the
-- version active afterwards (NULL: none). The undone version stays deployed.
CREATE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope       text := CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END;
    v_active      text;
    v_activation  memgov.policy_activations;
    v_target      text;
BEGIN
    PERFORM memgov.lock_deploys();
    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF p_version IS NULL OR p_version = '' THEN
        RAISE EXCEPTION 'undeploy_policy needs the version to undeploy' USING ERRCODE = '22023';
    END IF;
    SELECT version INTO v_active FROM memgov.policy_versions WHERE org_id = p_org_id AND active;
    IF v_active IS DISTINCT FROM p_version THEN
        RAISE NOTICE 'policy version % is not the active one of % (active: %): nothing to undeploy',
                     p_version, v_scope, coalesce(v_active, 'none');
        RETURN v_active;
    END IF;

    -- the latest activation of this version that nothing has undone yet (an undo row is
    -- itself never undone: undeploying twice walks back two activations)
    SELECT a.* INTO v_activation FROM memgov.policy_activations a
     WHERE a.org_id = p_org_id AND a.version = p_version AND a.undoes IS NULL
       AND NOT EXISTS (SELECT FROM memgov.policy_activations u
                        WHERE u.org_id = a.org_id AND u.undoes = a.activation_id)
     ORDER BY a.activation_id DESC
     LIMIT 1;
    v_target := v_activation.previous_version;
    IF v_target IS NOT NULL AND NOT EXISTS (SELECT FROM memgov.policy_versions
                                             WHERE org_id = p_org_id AND version = v_target) THEN
        RAISE NOTICE 'policy version % of % is no longer deployed: no policy is active now', v_target, v_scope;
        v_target := NULL;
    END IF;

    UPDATE memgov.policy_versions SET active = false WHERE org_id = p_org_id AND active;
    UPDATE memgov.policy_versions SET active = true WHERE org_id = p_org_id AND version = v_target;
    INSERT INTO memgov.policy_activations (org_id, version, previous_version, undoes)
    VALUES (p_org_id, v_target, p_version, v_activation.activation_id);
    PERFORM memgov.rebuild_dispatch();
    RETURN v_target;
END
$$;

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
    memgov.activate_policy(text, text),
    memgov.install_policy(text, text, text, text, text, text, text, text, text, jsonb, jsonb),
    memgov.stage_policy(text, text, text, text, text, text, text, text, text, jsonb, jsonb),
    memgov.rollback_policy(text, text),
    memgov.undeploy_policy(text, text)
    TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.evaluate(jsonb, text), memgov.explain(jsonb, text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
-- the compiled policies run as memgov_policy and call what it may execute
GRANT EXECUTE ON FUNCTION memgov.no_policy_decision(), memgov.decision_json(memgov.decision)
    TO memgov_policy;

RESET ROLE;

-- memgov: shadow deployments and replays (docs/changing-policies.md).
--
-- A shadow is a deployed, inactive policy version (the candidate) that decides beside
-- the active policy of its scope (a tenant, or '*': the tenants that follow the global
-- policy) without being enforced. Where a write or read of the scope is decided and
-- logged, memgov.shadow_decision records the candidate's decision next to the logged one,
-- in the same transaction: a write rolled back takes its shadow decision with it, and a
-- decision is recorded once, under the decision_id of the log. memgov.shadow_of and
-- memgov.shadow_decide (generated by memgov.rebuild_shadow_dispatch, sql/030_policy.sql)
-- route each row to its shadow; while none runs, the write path's test is a constant.
--
-- Where a decision is taken: memgov.judge_shadow right after it (the shadow's verdict);
-- where it is logged: memgov.record_shadow.
--
-- A replay is a shadow over the past: the payloads the engine keeps, decided by a
-- candidate inside a block whose work is undone before it returns.
--
-- SQLSTATEs: MG404 no such version or no shadow running, MG409 the candidate is the
-- active version already, 22023 a bad argument.

SET ROLE memgov_owner;

-- A shadow's verdict on one decision: which shadow, and what its candidate decided.
CREATE TYPE memgov.shadow_verdict AS (
    shadow_id  bigint,
    candidate  memgov.decision
);

-- What the shadow that sees p_item's tenant decides about a write or read: its shadow_id
-- and its candidate's decision (both NULL while no shadow sees the tenant; action 'error'
-- with reason codes SHADOW_ERROR and the SQLSTATE when the candidate raised). p_old is the
-- row an update of the write trigger changes (NULL elsewhere): the candidate then applies
-- its forget rules where the trigger applies the active policy's. Asked right after the
-- active decision, before anything is written: a shadow that starts or ends meanwhile is
-- then seen by both or by neither. (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.judge_shadow(
    p_operation  text,
    p_item       memgov.long_term_memory_items,
    p_old        memgov.long_term_memory_items,
    p_actor      text)
RETURNS memgov.shadow_verdict
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_verdict  memgov.shadow_verdict;
    v_forget   memgov.decision;
BEGIN
    v_verdict.shadow_id := memgov.shadow_of(p_item.org_id);
    IF v_verdict.shadow_id IS NULL THEN
        RETURN v_verdict;
    END IF;
    -- a candidate that fails never fails the write: its verdict is an error
    BEGIN
        v_verdict.candidate := memgov.shadow_decide(p_item, p_operation, p_actor);
        IF p_old.memory_id IS NOT NULL THEN
            v_forget := memgov.shadow_decide(p_old, 'forget', p_actor);
            IF memgov.shortens_life(p_old, p_item)
               OR (memgov.denied_by_rule(v_forget)
                   AND NOT memgov.denied_by_rule(memgov.shadow_decide(p_item, 'forget', 'memgov_owner'))) THEN
                v_verdict.candidate := memgov.stricter(v_verdict.candidate, v_forget);
            END IF;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        v_verdict.candidate := ROW('error', ARRAY['SHADOW_ERROR', SQLSTATE], ARRAY[]::text[], NULL, NULL, true,
                                   NULL, NULL)::memgov.decision;
    END;
    RETURN v_verdict;
END
$$;

-- Records a shadow's verdict beside the active decision p_active, logged as p_decision_id:
-- one row of memgov.shadow_decisions, in the transaction of the decision. p_source is a
-- replay's (where the payload came from). (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.record_shadow(
    p_verdict      memgov.shadow_verdict,
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_active       memgov.decision,
    p_decision_id  bigint,
    p_source       text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF (p_verdict.candidate).action IS NULL THEN
        RETURN;  -- no shadow saw the decision
    END IF;
    INSERT INTO memgov.shadow_decisions
           (shadow_id, decision_id, org_id, operation, memory_id, active_action, active_rule_ids,
            candidate_action, candidate_rule_ids, candidate_reason_codes, source)
    VALUES (p_verdict.shadow_id, p_decision_id, p_item.org_id, p_operation, p_item.memory_id,
            memgov.applied_action(p_active), p_active.matched_rule_ids,
            memgov.applied_action(p_verdict.candidate), (p_verdict.candidate).matched_rule_ids,
            (p_verdict.candidate).reason_codes, p_source);
END
$$;

-- 'the global policy' or 'tenant <org_id>', for messages.
CREATE FUNCTION memgov.scope_name(p_org_id text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END;

-- Checks that a version is deployed for a scope (MG404 otherwise).
CREATE FUNCTION memgov.check_deployed(p_org_id text, p_version text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_org_id IS DISTINCT FROM '*' THEN
        PERFORM memgov.check_tenant_id(p_org_id);
    END IF;
    IF NOT EXISTS (SELECT FROM memgov.policy_versions WHERE org_id = p_org_id AND version = p_version) THEN
        RAISE EXCEPTION 'policy version % is not deployed for %', coalesce(p_version, 'NULL'), memgov.scope_name(p_org_id)
            USING ERRCODE = 'MG404',
                  HINT = 'list the deployed versions: SELECT org_id, version FROM memgov.policy_versions';
    END IF;
END
$$;

-- Opens a shadow of a deployed version for a scope, ending the one running there
-- ('replaced'), and reroutes the shadow dispatchers. Returns its shadow_id.
CREATE FUNCTION memgov.open_shadow(p_org_id text, p_version text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id  bigint;
BEGIN
    UPDATE memgov.policy_shadows SET ended_at = now(), ended_by = session_user, outcome = 'replaced'
     WHERE org_id = p_org_id AND ended_at IS NULL;
    INSERT INTO memgov.policy_shadows (org_id, version) VALUES (p_org_id, p_version)
    RETURNING shadow_id INTO v_id;
    PERFORM memgov.rebuild_shadow_dispatch();
    RETURN v_id;
END
$$;

-- Starts shadowing a deployed version (`memgov deploy --shadow`): from this transaction's
-- commit on, every decision of the scope is also decided by it, and recorded. A shadow
-- running there is replaced; the decisions of the scope's earlier shadows are deleted.
CREATE FUNCTION memgov.start_shadow(p_org_id text, p_version text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.lock_deploys();
    PERFORM memgov.check_deployed(p_org_id, p_version);
    IF EXISTS (SELECT FROM memgov.policy_versions WHERE org_id = p_org_id AND version = p_version AND active) THEN
        RAISE EXCEPTION 'policy version % is already the active version of %: there is nothing to shadow',
                        p_version, memgov.scope_name(p_org_id)
            USING ERRCODE = 'MG409',
                  HINT = 'bump `version:` in the candidate policy file';
    END IF;
    DELETE FROM memgov.shadow_decisions d
     USING memgov.policy_shadows s
     WHERE d.shadow_id = s.shadow_id AND s.org_id = p_org_id;
    RETURN memgov.open_shadow(p_org_id, p_version);
END
$$;

-- Ends the running shadow of a scope with an outcome (MG404 when none runs); returns it.
CREATE FUNCTION memgov.end_shadow(p_org_id text, p_outcome text)
RETURNS memgov.policy_shadows
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shadow  memgov.policy_shadows;
BEGIN
    UPDATE memgov.policy_shadows SET ended_at = now(), ended_by = session_user, outcome = p_outcome
     WHERE org_id = p_org_id AND ended_at IS NULL
    RETURNING * INTO v_shadow;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no shadow runs for %', memgov.scope_name(p_org_id)
            USING ERRCODE = 'MG404',
                  HINT = 'start one with `memgov deploy CANDIDATE --shadow`';
    END IF;
    RETURN v_shadow;
END
$$;

-- Activates the running shadow's candidate and ends the shadow, in one transaction (as a
-- deploy activates). Returns the version now active.
CREATE FUNCTION memgov.promote_shadow(p_org_id text DEFAULT '*')
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.lock_deploys();
    RETURN memgov.activate_policy(p_org_id, (memgov.end_shadow(p_org_id, 'promoted')).version);
END
$$;

-- Ends the running shadow of a scope; its decisions stay until the next shadow there.
-- Returns the candidate's version.
CREATE FUNCTION memgov.stop_shadow(p_org_id text DEFAULT '*')
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shadow  memgov.policy_shadows;
BEGIN
    PERFORM memgov.lock_deploys();
    v_shadow := memgov.end_shadow(p_org_id, 'stopped');
    PERFORM memgov.rebuild_shadow_dispatch();
    RETURN v_shadow.version;
END
$$;

-- What a shadow's candidate decided otherwise than the active policy: the number of
-- decisions, and the divergences (another action, or the same action by other rules)
-- counted per (active action, candidate action), the most frequent first, with the first
-- p_examples of each; with the payloads' sources counted where a replay recorded them.
CREATE FUNCTION memgov.divergences(p_shadow_id bigint, p_examples integer)
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH decided AS (
        SELECT * FROM memgov.shadow_decisions WHERE shadow_id = p_shadow_id
    ), diverged AS (
        SELECT d.*, row_number() OVER (PARTITION BY active_action, candidate_action ORDER BY decision_id) AS n
          FROM decided d
         WHERE active_action <> candidate_action OR active_rule_ids <> candidate_rule_ids
    ), per_source AS (
        SELECT active_action, candidate_action, jsonb_object_agg(source, n ORDER BY source) AS sources
          FROM (SELECT active_action, candidate_action, source, count(*) AS n
                  FROM diverged WHERE source IS NOT NULL GROUP BY 1, 2, 3) AS s
         GROUP BY 1, 2
    ), pairs AS (
        SELECT g.active_action, g.candidate_action, g.count, g.examples, ps.sources
          FROM (SELECT active_action, candidate_action, count(*) AS count,
                       jsonb_agg(jsonb_build_object(
                           'decision_id', decision_id, 'operation', operation, 'memory_id', memory_id,
                           'active_rule_ids', active_rule_ids, 'candidate_rule_ids', candidate_rule_ids,
                           'candidate_reason_codes', candidate_reason_codes, 'decided_at', decided_at)
                           || CASE WHEN source IS NULL THEN '{}' ELSE jsonb_build_object('source', source) END
                           ORDER BY decision_id) FILTER (WHERE n <= p_examples) AS examples
                  FROM diverged GROUP BY 1, 2) AS g
          LEFT JOIN per_source ps USING (active_action, candidate_action)
    )
    SELECT jsonb_build_object(
               'decisions', (SELECT count(*) FROM decided),
               'divergences', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'active', active_action, 'candidate', candidate_action, 'count', count,
                              'examples', coalesce(examples, '[]'))
                              || CASE WHEN sources IS NULL THEN '{}' ELSE jsonb_build_object('sources', sources) END
                              ORDER BY count DESC, active_action, candidate_action)
                     FROM pairs), '[]'))
           || coalesce((SELECT jsonb_build_object('sources', jsonb_object_agg(source, n ORDER BY source))
                          FROM (SELECT source, count(*) AS n FROM decided WHERE source IS NOT NULL GROUP BY 1) AS s
                        HAVING count(*) > 0), '{}')
$$;

-- `memgov shadow report`: the running shadow of a scope (else its latest one) and what
-- its candidate decided otherwise (memgov.divergences).
CREATE FUNCTION memgov.shadow_report(p_org_id text DEFAULT '*', p_examples integer DEFAULT 3)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shadow  memgov.policy_shadows;
BEGIN
    IF p_examples IS NULL OR p_examples < 0 THEN
        RAISE EXCEPTION 'the number of examples must be 0 or more' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_shadow FROM memgov.policy_shadows
     WHERE org_id = p_org_id
     ORDER BY ended_at IS NULL DESC, shadow_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no shadow has run for %', memgov.scope_name(p_org_id)
            USING ERRCODE = 'MG404',
                  HINT = 'start one with `memgov deploy CANDIDATE --shadow`';
    END IF;
    RETURN jsonb_build_object(
               'candidate', v_shadow.version,
               'tenant', v_shadow.org_id,
               'state', coalesce(v_shadow.outcome, 'running'),
               'started_at', v_shadow.started_at,
               'ended_at', v_shadow.ended_at)
           || memgov.divergences(v_shadow.shadow_id, p_examples);
END
$$;

-- `memgov replay`: re-decides the writes of a scope decided in the last p_since under a
-- deployed version, from the payloads the engine keeps: the samples of decided writes
-- (replay.sample_rate), approval requests, quarantine entries and the stored memories (as
-- they are now), each decision once (in that order of preference). The report is a shadow's, with the sources counted; the active action is
-- the one logged. Changes nothing: the shadow it decides in is undone before it returns.
CREATE FUNCTION memgov.replay(p_org_id text, p_version text, p_since interval DEFAULT '7 days',
                              p_examples integer DEFAULT 3)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shadow   bigint;
    v_payload  record;
    v_report   jsonb;
BEGIN
    PERFORM memgov.check_deployed(p_org_id, p_version);
    IF p_since IS NULL OR p_since < interval '0' THEN
        RAISE EXCEPTION 'replay needs a window of 0 or more, not %', coalesce(p_since::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_examples IS NULL OR p_examples < 0 THEN
        RAISE EXCEPTION 'the number of examples must be 0 or more' USING ERRCODE = '22023';
    END IF;
    BEGIN
        PERFORM memgov.lock_deploys();
        -- the replay's candidate alone decides: no running shadow routes a tenant elsewhere
        UPDATE memgov.policy_shadows SET ended_at = now(), ended_by = session_user, outcome = 'replaced'
         WHERE ended_at IS NULL;
        v_shadow := memgov.open_shadow(p_org_id, p_version);
        FOR v_payload IN
            SELECT DISTINCT ON (p.org_id, p.decision_id)
                   p.source, p.item, coalesce(p.operation, l.operation) AS operation,
                   coalesce(p.actor, l.actor) AS actor, l.decision_id,
                   ROW(l.action, l.reason_codes, l.matched_rule_ids, l.policy_version, l.mode, l.enforced,
                       NULL, NULL)::memgov.decision AS active
              FROM (SELECT 0 AS rank, 'samples' AS source, r.org_id, r.decision_id, r.operation, r.actor,
                           jsonb_populate_record(NULL::memgov.long_term_memory_items, r.payload) AS item
                      FROM memgov.replay_samples r
                     WHERE p_org_id = '*' OR r.org_id = p_org_id
                    UNION ALL
                    SELECT 1 AS rank, 'approval_requests' AS source, a.org_id, a.decision_id,
                           a.operation::text AS operation, a.requested_by AS actor,
                           jsonb_populate_record(NULL::memgov.long_term_memory_items, a.payload) AS item
                      FROM memgov.approval_requests a
                     WHERE a.operation IN ('remember', 'update', 'forget')
                       AND (p_org_id = '*' OR a.org_id = p_org_id)
                    UNION ALL
                    SELECT 2, 'quarantine', q.org_id, q.decision_id, q.operation::text, q.quarantined_by,
                           jsonb_populate_record(NULL::memgov.long_term_memory_items, q.payload)
                      FROM memgov.quarantine q
                     WHERE q.operation IN ('remember', 'update', 'forget')
                       AND (p_org_id = '*' OR q.org_id = p_org_id)
                    UNION ALL
                    SELECT 3, 'memories', m.org_id, m.decision_id, NULL, NULL, m
                      FROM memgov.long_term_memory_items m
                     WHERE m.decision_id IS NOT NULL
                       AND (p_org_id = '*' OR m.org_id = p_org_id)) AS p
              JOIN memgov.decision_log l ON l.org_id = p.org_id AND l.decision_id = p.decision_id
             WHERE l.decided_at >= now() - p_since
               AND l.operation IN ('remember', 'update', 'forget')
             ORDER BY p.org_id, p.decision_id, p.rank
        LOOP
            PERFORM memgov.record_shadow(memgov.judge_shadow(v_payload.operation, v_payload.item, NULL, v_payload.actor),
                                         v_payload.operation, v_payload.item, v_payload.active,
                                         v_payload.decision_id, v_payload.source);
        END LOOP;
        v_report := memgov.divergences(v_shadow, p_examples);
        RAISE EXCEPTION USING ERRCODE = 'MG299';  -- undo the shadow and its decisions
    EXCEPTION WHEN SQLSTATE 'MG299' THEN
        NULL;
    END;
    RETURN jsonb_build_object('candidate', p_version, 'tenant', p_org_id, 'since', p_since)
           || jsonb_build_object('sources', '{}'::jsonb) || v_report;
END
$$;

-- Privileges: shadows and replays are memgov_admin's, like deploys.
GRANT EXECUTE ON FUNCTION
    memgov.start_shadow(text, text),
    memgov.promote_shadow(text),
    memgov.stop_shadow(text),
    memgov.shadow_report(text, integer),
    memgov.replay(text, text, interval, integer)
    TO memgov_admin;

RESET ROLE;

-- memgov: the write path. Every INSERT, UPDATE and DELETE on
-- memgov.long_term_memory_items is decided by the active policy.
--
-- Two row triggers split the table's writers by who performs the statement,
-- which a trigger's WHEN clause sees (it runs with the statement's rights):
--
--   enforce_write   every client (WHEN current_user <> 'memgov_owner'). Its
--                   function is SECURITY DEFINER: it checks the tenant, decides,
--                   logs and files for the client, and nothing it calls is
--                   executable by a client role.
--   engine_columns  memgov's own SECURITY DEFINER functions (approve, confirm,
--                   the sweep ...), which have decided already: it only keeps
--                   the engine's derived columns.
--
-- What a held or quarantined write becomes is the reviewers' (sql/045_review.sql).
--
-- SQLSTATEs: MG403 write denied (error), MG201 write held for approval
-- (notice), MG202 write quarantined (notice), MG409 a pending memory is frozen,
-- 42501 another tenant, 54000 fact_text over memgov.settings' max_fact_text_bytes.

SET ROLE memgov_owner;

-- What memgov.record_write() did about one decided row.
CREATE TYPE memgov.write_outcome AS (
    action          text,       -- the action applied: allow, deny, require_approval, quarantine
    decision        jsonb,      -- the decision plus decision_id
    decision_id     bigint,
    policy_version  text,
    request_id      uuid,
    quarantine_id   uuid
);

-- Expiry of a row under its retention policy (NULL: no automatic expiry). STABLE, as
-- timestamptz + interval is (days follow the session's time zone): the planner inlines it.
CREATE FUNCTION memgov.expiry_of(p_retention_policy text, p_created_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE p_retention_policy
               WHEN 'ttl_7d'  THEN p_created_at + interval '7 days'
               WHEN 'ttl_30d' THEN p_created_at + interval '30 days'
           END
$$;

-- Since when a confidence_based row has been below its tenant's confidence_floor (NULL: it is not).
CREATE FUNCTION memgov.low_confidence_since(p_item memgov.long_term_memory_items)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
               WHEN p_item.retention_policy IS DISTINCT FROM 'confidence_based' THEN NULL
               WHEN p_item.confidence < memgov.confidence_floor(p_item.org_id)
               THEN coalesce(p_item.low_confidence_since, pg_catalog.now())
           END
$$;

-- One of the engine's limits (memgov.settings), else its default.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.engine_limit(p_name text)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_limit  bigint;
BEGIN
    SELECT s.value INTO v_limit FROM memgov.settings s WHERE s.name = p_name;
    RETURN coalesce(v_limit, (memgov.setting_defaults() -> 'limits' ->> p_name)::bigint);
END
$$;

-- Raises 54000 when fact_text is over the engine's max_fact_text_bytes; texts up to
-- 1 KiB (the smallest limit allowed) never look the limit up.
CREATE FUNCTION memgov.check_fact_size(p_fact_text text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit  bigint;
BEGIN
    IF octet_length(p_fact_text) > 1024 THEN
        v_limit := memgov.engine_limit('max_fact_text_bytes');
        IF octet_length(p_fact_text) > v_limit THEN
            RAISE EXCEPTION 'memgov: fact_text is % bytes; the limit is %', octet_length(p_fact_text), v_limit
                USING ERRCODE = '54000',
                      HINT = 'store a summary; memgov_admin can raise memgov.settings max_fact_text_bytes';
        END IF;
    END IF;
END
$$;

-- Raises 54000 when a row's fact_text or the rest of its columns together (metadata,
-- scope, category ...) are over the engine's limits; rows up to 1 KiB never look them up.
CREATE FUNCTION memgov.check_item_size(p_item memgov.long_term_memory_items)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rest   bigint := pg_column_size(p_item) - coalesce(octet_length(p_item.fact_text), 0);
    v_limit  bigint;
BEGIN
    PERFORM memgov.check_fact_size(p_item.fact_text);
    v_limit := memgov.engine_limit('max_other_bytes');
    IF v_rest > v_limit THEN
        RAISE EXCEPTION 'memgov: the columns besides fact_text take % bytes; the limit is %', v_rest, v_limit
            USING ERRCODE = '54000',
                  HINT = 'keep metadata and scope small; memgov_admin can raise memgov.settings max_other_bytes';
    END IF;
END
$$;

-- Whether a change of retention makes a memory's life shorter (it may then be deleted sooner).
CREATE FUNCTION memgov.shortens_life(p_old memgov.long_term_memory_items, p_new memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_new.retention_policy IS DISTINCT FROM p_old.retention_policy
           AND p_new.retention_policy <> 'permanent_until_revoked'
           AND NOT (p_new.expires_at IS NOT NULL AND p_old.expires_at IS NOT NULL
                    AND p_new.expires_at >= p_old.expires_at)
$$;

-- The stricter of two decisions (deny > quarantine > require_approval > allow; enforced first).
CREATE FUNCTION memgov.stricter(p_a memgov.decision, p_b memgov.decision)
RETURNS memgov.decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN (p_b.enforced AND NOT p_a.enforced)
                  OR (p_b.enforced = p_a.enforced
                      AND array_position(ARRAY['allow', 'require_approval', 'quarantine', 'deny'], p_b.action)
                        > array_position(ARRAY['allow', 'require_approval', 'quarantine', 'deny'], p_a.action))
                THEN p_b ELSE p_a END
$$;

-- Logs one decision about a write (by p_actor, for session_user); returns its decision_id.
-- The only INSERT into memgov.decision_log. (No SET clause: it runs once per governed row,
-- inside functions that pin search_path, and names only qualified objects. It takes the
-- memory's ids, not its row: a whole row is copied to be passed.)
CREATE FUNCTION memgov.log_decision(
    p_operation  text,
    p_memory_id  uuid,
    p_org_id     text,
    p_actor      text,
    p_decision   memgov.decision)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids,
            policy_version, mode, enforced, actor, login, risk_score, risk_level)
    VALUES (p_operation, p_memory_id, p_org_id, p_decision.action,
            p_decision.reason_codes, p_decision.matched_rule_ids, p_decision.policy_version,
            p_decision.mode, p_decision.enforced, p_actor, session_user,
            pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level)
    RETURNING decision_id INTO v_id;
    RETURN v_id;
END
$$;

-- Logs one decision about a write and files the request or quarantine entry it calls for.
-- Engine-internal: reached from the write trigger and memgov's functions only, which pin
-- search_path (no SET clause of its own: it runs once per governed row).
CREATE FUNCTION memgov.record_write(
    p_operation  text,
    p_item       memgov.long_term_memory_items,
    p_actor      text,
    p_decision   memgov.decision)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
AS $$
DECLARE
    v_outcome   memgov.write_outcome;
    v_payload   jsonb;
BEGIN
    -- monitor mode (and a decision that is not enforced) lets the write through
    v_outcome.action := CASE WHEN p_decision.enforced THEN p_decision.action ELSE 'allow' END;
    v_outcome.policy_version := p_decision.policy_version;

    v_outcome.decision_id := memgov.log_decision(p_operation, p_item.memory_id, p_item.org_id, p_actor, p_decision);

    IF v_outcome.action IN ('require_approval', 'quarantine') THEN
        v_payload := to_jsonb(p_item);
    END IF;

    IF v_outcome.action = 'require_approval' THEN
        INSERT INTO memgov.approval_requests
               (memory_id, org_id, operation, payload, requested_by, requested_login,
                decision_id, policy_version)
        VALUES (p_item.memory_id, p_item.org_id, p_operation, v_payload, p_actor, session_user,
                v_outcome.decision_id, p_decision.policy_version)
        RETURNING request_id INTO v_outcome.request_id;
        PERFORM pg_notify(memgov.approval_channel(p_item.org_id), v_outcome.request_id::text);
    ELSIF v_outcome.action = 'quarantine' THEN
        INSERT INTO memgov.quarantine
               (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
        VALUES (p_item.org_id, p_operation, p_item.memory_id, v_payload,
                memgov.decision_json(p_decision), v_outcome.decision_id, p_actor, session_user)
        RETURNING quarantine_id INTO v_outcome.quarantine_id;
    END IF;

    -- the decision as JSON is for errors, notices and remember(): a stored write needs none
    IF v_outcome.action <> 'allow' OR current_setting('memgov.capture', true) = 'on' THEN
        v_outcome.decision := memgov.decision_json(p_decision)
            || jsonb_build_object('decision_id', v_outcome.decision_id,
                                  'memory_id', p_item.memory_id,
                                  'request_id', v_outcome.request_id,
                                  'quarantine_id', v_outcome.quarantine_id);
    END IF;
    RETURN v_outcome;
END
$$;

-- Keeps a decided write's item for `memgov replay` (memgov.replay_samples): called for a
-- sampled share (memgov.sample_rate) of the writes the policy stored or held. (No SET
-- clause: the write trigger pins search_path.)
CREATE FUNCTION memgov.keep_sample(
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_actor        text,
    p_decision_id  bigint)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO memgov.replay_samples (org_id, decision_id, memory_id, operation, actor, payload)
    VALUES (p_item.org_id, p_decision_id, p_item.memory_id, p_operation, p_actor, to_jsonb(p_item));
END
$$;

-- Raises MG403 for a denied write: rule ids and reason codes in the message, the decision in DETAIL.
CREATE FUNCTION memgov.raise_denied(p_operation text, p_outcome memgov.write_outcome)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rules    text := coalesce(nullif(array_to_string(ARRAY(
                           SELECT jsonb_array_elements_text(p_outcome.decision -> 'matched_rule_ids')), ', '), ''),
                       '(no rule: on_policy_miss)');
    v_reasons  text := array_to_string(ARRAY(
                           SELECT jsonb_array_elements_text(p_outcome.decision -> 'reason_codes')), ', ');
BEGIN
    RAISE EXCEPTION 'memgov: % denied by rule % [%]', p_operation, v_rules, v_reasons
        USING ERRCODE = 'MG403',
              DETAIL = p_outcome.decision::text,
              HINT = 'the active policy refuses this write; `memgov evaluate --explain` shows why';
END
$$;

-- The client row trigger on memgov.long_term_memory_items (BEFORE INSERT OR UPDATE OR DELETE,
-- WHEN current_user <> 'memgov_owner'). PL/pgSQL prepares each expression it evaluates once
-- per transaction, and a single-row write is a transaction: the common case (a remembered
-- memory the policy stores) takes as few statements as the checks allow.
CREATE FUNCTION memgov.enforce_write()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor      text := memgov.invoker_role();  -- inlined: a SQL function without a SET clause
    v_operation  text;
    v_item       memgov.long_term_memory_items;
    v_decision   memgov.decision;
    v_forget     memgov.decision;
    v_action     text;
    v_outcome    memgov.write_outcome;
    v_shadow     memgov.shadow_verdict;
BEGIN
    IF TG_TABLE_SCHEMA <> 'memgov' OR TG_TABLE_NAME <> 'long_term_memory_items' THEN
        RAISE EXCEPTION 'memgov.enforce_write() governs memgov.long_term_memory_items only'
            USING ERRCODE = '42501';
    END IF;

    -- the engine's columns: whatever a client's statement said, the engine decides
    IF TG_OP = 'INSERT' THEN
        -- another tenant is refused before anything is decided, logged or filed
        -- (row level security would see the row only after this trigger); under tenant
        -- binding the session's own setting may name a tenant the login is not granted
        IF NEW.org_id IS DISTINCT FROM current_setting('memgov.org_id', true) OR memgov.binding_on() THEN
            PERFORM memgov.check_tenant(NEW.org_id);
        END IF;
        IF pg_column_size(NEW) > 1024 THEN
            PERFORM memgov.check_item_size(NEW);
        END IF;
        -- a new memory starts active, never confirmed, undecided (one test for the five)
        IF (NEW.status, NEW.last_confirmed_at, NEW.low_confidence_since, NEW.policy_version, NEW.decision_id)
           IS DISTINCT FROM ('active', NULL, NULL, NULL, NULL) THEN
            NEW.status := 'active';
            NEW.last_confirmed_at := NULL;
            NEW.low_confidence_since := NULL;
            NEW.policy_version := NULL;
            NEW.decision_id := NULL;
        END IF;
        NEW.created_at := pg_catalog.now();
        NEW.updated_at := NEW.created_at;
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        IF NEW.retention_policy = 'confidence_based' THEN
            NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        END IF;
        NEW.search_config := memgov.search_config(NEW.org_id);

        v_decision := memgov.decide(NEW, 'remember', v_actor);
        IF memgov.shadow_of(NEW.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow('remember', NEW, NULL, v_actor);
        END IF;
        IF (v_decision.action = 'allow' OR NOT v_decision.enforced)
           AND current_setting('memgov.capture', true) IS DISTINCT FROM 'on' THEN
            -- stored as written: one decision logged, nothing filed, nobody to tell
            NEW.decision_id := memgov.log_decision('remember', NEW.memory_id, NEW.org_id, v_actor, v_decision);
            NEW.policy_version := v_decision.policy_version;
            IF v_shadow.shadow_id IS NOT NULL THEN
                PERFORM memgov.record_shadow(v_shadow, 'remember', NEW, v_decision, NEW.decision_id);
            END IF;
            IF memgov.sample_rate(NEW.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(NEW.org_id) THEN
                PERFORM memgov.keep_sample('remember', NEW, v_actor, NEW.decision_id);
            END IF;
            IF memgov.reads_governed(NEW.org_id) THEN
                PERFORM memgov.mark_written(NEW, TG_OP);  -- its INSERT ... RETURNING reads it back
            END IF;
            RETURN NEW;
        END IF;
        v_operation := 'remember';
        v_item := NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.org_id IS DISTINCT FROM OLD.org_id OR NEW.memory_id IS DISTINCT FROM OLD.memory_id THEN
            RAISE EXCEPTION 'memgov: a memory''s memory_id and org_id never change'
                USING ERRCODE = '42501',
                      HINT = 'forget the memory and remember it again under the new tenant';
        END IF;
        IF OLD.status = 'pending_approval' THEN
            RAISE EXCEPTION 'memgov: memory % is pending approval and cannot change', OLD.memory_id
                USING ERRCODE = 'MG409',
                      HINT = 'a reviewer approves or denies it first (memgov.approve / memgov.deny)';
        END IF;
        IF pg_column_size(NEW) > 1024 THEN
            PERFORM memgov.check_item_size(NEW);
        END IF;
        NEW.created_at := OLD.created_at;
        NEW.updated_at := pg_catalog.now();
        NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
        NEW.status := OLD.status;
        NEW.last_confirmed_at := OLD.last_confirmed_at;
        NEW.low_confidence_since := OLD.low_confidence_since;
        NEW.policy_version := OLD.policy_version;
        NEW.decision_id := OLD.decision_id;
        NEW.low_confidence_since := memgov.low_confidence_since(NEW);
        v_operation := 'update';
        v_item := NEW;
        v_decision := memgov.decide(v_item, v_operation, v_actor);
        -- forget rules apply to an update that makes a memory expire sooner (it is partly
        -- forgotten) and to one that takes it out of a hold (a legal hold is lifted by
        -- changing the policy, never by changing the memory)
        v_forget := memgov.decide(OLD, 'forget', v_actor);
        IF memgov.shortens_life(OLD, NEW) OR (memgov.denied_by_rule(v_forget) AND NOT memgov.retention_held(NEW)) THEN
            v_decision := memgov.stricter(v_decision, v_forget);
        END IF;
        IF memgov.shadow_of(NEW.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow(v_operation, NEW, OLD, v_actor);
        END IF;
    ELSE
        IF OLD.status = 'pending_approval' THEN
            RAISE EXCEPTION 'memgov: memory % is pending approval and cannot be forgotten', OLD.memory_id
                USING ERRCODE = 'MG409',
                      HINT = 'a reviewer denies it instead (memgov.deny / memgov.reject)';
        END IF;
        v_operation := 'forget';
        v_item := OLD;
        v_decision := memgov.decide(v_item, v_operation, v_actor);
        IF memgov.shadow_of(OLD.org_id) IS NOT NULL THEN
            v_shadow := memgov.judge_shadow(v_operation, OLD, NULL, v_actor);
        END IF;
    END IF;

    v_action := CASE WHEN v_decision.enforced THEN v_decision.action ELSE 'allow' END;
    IF TG_OP = 'INSERT' AND (v_action = 'quarantine'
                             OR (v_action = 'deny' AND current_setting('memgov.on_deny', true) = 'skip')) THEN
        -- the row will not reach row level security: check the session's tenant binding here
        PERFORM memgov.check_tenant(NEW.org_id);
    END IF;

    v_outcome := memgov.record_write(v_operation, v_item, v_actor, v_decision);
    IF v_shadow.shadow_id IS NOT NULL THEN
        PERFORM memgov.record_shadow(v_shadow, v_operation, v_item, v_decision, v_outcome.decision_id);
    END IF;
    -- a sample of what stays in the table: stored writes, held INSERTs (not a forget)
    IF TG_OP <> 'DELETE' AND v_outcome.action IN ('allow', 'require_approval')
       AND memgov.sample_rate(v_item.org_id) > 0 AND pg_catalog.random() < memgov.sample_rate(v_item.org_id) THEN
        PERFORM memgov.keep_sample(v_operation, v_item, v_actor, v_outcome.decision_id);
    END IF;
    IF current_setting('memgov.capture', true) = 'on' THEN
        -- memgov.remember() reads the outcome of the row it inserted
        PERFORM set_config('memgov.last_outcome', v_outcome.decision::text, true);
    END IF;

    CASE v_outcome.action
    WHEN 'allow' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        NEW.policy_version := v_outcome.policy_version;
        NEW.decision_id := v_outcome.decision_id;
        IF memgov.reads_governed(NEW.org_id) THEN
            PERFORM memgov.mark_written(NEW, TG_OP);
        END IF;
        RETURN NEW;
    WHEN 'deny' THEN
        IF current_setting('memgov.on_deny', true) = 'skip' THEN
            RETURN NULL;  -- memgov.remember(): report the denial instead of raising
        END IF;
        PERFORM memgov.raise_denied(v_operation, v_outcome);
        RETURN NULL;
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %)', v_operation, v_outcome.request_id
            USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
        IF TG_OP = 'INSERT' THEN
            NEW.status := 'pending_approval';
            NEW.policy_version := v_outcome.policy_version;
            NEW.decision_id := v_outcome.decision_id;
            -- only reviewers read pending memories: this one its writer's RETURNING too
            PERFORM memgov.mark_written(NEW, TG_OP);
            RETURN NEW;
        END IF;
        RETURN NULL;  -- the change waits in memgov.approval_requests; the row is untouched
    WHEN 'quarantine' THEN
        RAISE NOTICE 'memgov: % quarantined (quarantine %)', v_operation, v_outcome.quarantine_id
            USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
        RETURN NULL;
    END CASE;
END
$$;

-- The engine's row trigger (BEFORE INSERT OR UPDATE, WHEN current_user = 'memgov_owner'):
-- memgov's functions have decided already; the derived columns follow the row.
CREATE FUNCTION memgov.engine_columns()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (a new text search configuration alone, from a deploy, is no change of the memory)
    IF TG_OP = 'UPDATE' AND NEW.updated_at = OLD.updated_at AND NEW.search_config = OLD.search_config THEN
        NEW.updated_at := now();
    END IF;
    IF TG_OP = 'INSERT' THEN
        NEW.search_config := memgov.search_config(NEW.org_id);
    END IF;
    NEW.expires_at := memgov.expiry_of(NEW.retention_policy, NEW.created_at);
    NEW.low_confidence_since := memgov.low_confidence_since(NEW);
    RETURN NEW;
END
$$;

CREATE TRIGGER enforce_write
    BEFORE INSERT OR UPDATE OR DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user <> 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.enforce_write();
CREATE TRIGGER engine_columns
    BEFORE INSERT OR UPDATE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (current_user = 'memgov_owner'::name)
    EXECUTE FUNCTION memgov.engine_columns();
-- session_replication_role = replica does not switch them off
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write;
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER engine_columns;

-- Deletes a deleted memory's replay samples (AFTER DELETE, only for a tenant that samples).
CREATE FUNCTION memgov.forget_samples()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM memgov.replay_samples s WHERE s.memory_id = OLD.memory_id AND s.org_id = OLD.org_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER forget_samples
    AFTER DELETE ON memgov.long_term_memory_items
    FOR EACH ROW WHEN (memgov.sample_rate(OLD.org_id) > 0)
    EXECUTE FUNCTION memgov.forget_samples();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER forget_samples;

-- Refuses TRUNCATE to everyone but memgov_admin (and superusers): it would bypass every row decision.
CREATE FUNCTION memgov.refuse_truncate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user <> 'memgov_owner' AND NOT pg_has_role(current_user, 'memgov_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'memgov: only memgov_admin may TRUNCATE %', TG_TABLE_NAME
            USING ERRCODE = 'MG403', HINT = 'forget memories one by one so that each is decided';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER refuse_truncate
    BEFORE TRUNCATE ON memgov.long_term_memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_truncate();
ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER refuse_truncate;

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
            source, confidence, is_sensitive, retention_policy, context_source, metadata)
    VALUES (coalesce(v_row.memory_id, gen_random_uuid()), v_row.org_id, v_row.project_id,
            v_row.agent_id, v_row.subject_id, v_row.session_id, v_row.category, v_row.fact_text,
            v_row.source, v_row.confidence, v_row.is_sensitive, v_row.retention_policy,
            v_row.context_source, v_row.metadata);
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
-- remember() runs with its caller's rights and builds its row with item_from_json()
GRANT EXECUTE ON FUNCTION memgov.item_from_json(jsonb) TO memgov_writer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.approval_channel() TO memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: the review workflow. A write the policy held for approval (MG201) waits in
-- memgov.approval_requests until a reviewer approves or denies it (memgov.approve,
-- memgov.deny); a quarantined write (MG202) waits in memgov.quarantine until a reviewer
-- releases or purges it (memgov.release_quarantine, memgov.purge_quarantine).
--
-- Approving, denying and releasing are four eyes (memgov.check_reviewer: never the login
-- that made the write); what is approved or released is decided again by the active
-- policy first, and a policy that now refuses it wins over the reviewer. Every call
-- reaches only the caller's tenant: another tenant's ids answer MG404, like missing ones.
-- The writes applied here pass the engine's row trigger (engine_columns, sql/040_enforce.sql).
--
-- SQLSTATEs: MG404 no such request or entry in the tenant, MG409 already decided or
-- changed since, MG403 the active policy now denies a release, 42501 one's own write.

SET ROLE memgov_owner;

-- Four eyes: the login deciding a held or quarantined write is not the login that made
-- it (p_login, acting as p_role), nor a login that is a member of it (it could have made
-- it as that role). A superuser login, a member of every role, is compared by the role
-- it acts as. Returns the deciding role.
CREATE FUNCTION memgov.check_reviewer(p_login text, p_role text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := memgov.invoker_role();
    v_super  boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user);
    v_own    boolean;
BEGIN
    IF v_super THEN
        v_own := session_user = p_login AND v_actor = p_role;
    ELSE
        v_own := session_user = p_login
                 OR coalesce(pg_has_role(session_user, to_regrole(quote_ident(p_login)), 'MEMBER'), false);
    END IF;
    IF v_own THEN
        RAISE EXCEPTION 'memgov: % cannot decide its own write (made by %)', session_user, p_login
            USING ERRCODE = '42501', HINT = 'another reviewer, on another login, must decide it';
    END IF;
    RETURN v_actor;
END
$$;

-- Locks a pending request for a decision; MG404 when it does not exist in the caller's
-- tenant, MG409 when it is closed (memgov.check_found).
CREATE FUNCTION memgov.pending_request(p_request_id uuid)
RETURNS memgov.approval_requests
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.request_id = p_request_id AND memgov.sees_tenant(r.org_id)
       FOR UPDATE;
    PERFORM memgov.check_found('approval request', p_request_id, v_request.status, 'pending');
    RETURN v_request;
END
$$;

-- Closes a request and, for a held INSERT that is refused, removes the pending row.
CREATE FUNCTION memgov.close_request(p_request memgov.approval_requests, p_status text, p_actor text, p_note text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE memgov.approval_requests
       SET status = p_status, decided_at = now(), decided_by = p_actor, decided_login = session_user,
           note = p_note
     WHERE request_id = p_request.request_id AND org_id = p_request.org_id;
    IF p_status <> 'approved' AND p_request.operation = 'remember' THEN
        DELETE FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval';
    END IF;
END
$$;

-- The columns of a memory that its writer chose (not the engine's).
CREATE FUNCTION memgov.content_of(p_item memgov.long_term_memory_items)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'memory_id', p_item.memory_id, 'org_id', p_item.org_id, 'project_id', p_item.project_id,
        'agent_id', p_item.agent_id, 'subject_id', p_item.subject_id, 'session_id', p_item.session_id,
        'category', p_item.category, 'fact_text', p_item.fact_text, 'source', p_item.source,
        'confidence', p_item.confidence, 'is_sensitive', p_item.is_sensitive,
        'retention_policy', p_item.retention_policy, 'context_source', p_item.context_source,
        'metadata', p_item.metadata)
$$;

-- Raises MG409 for a held or quarantined read: it is a record of what was asked, which a
-- reviewer closes (deny, purge) and never lets through afterwards; the agent asks again.
CREATE FUNCTION memgov.check_not_read(p_operation text, p_what text, p_id uuid)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_operation IN ('search', 'get') THEN
        RAISE EXCEPTION 'memgov: % % is a held %, which is never replayed', p_what, p_id, p_operation
            USING ERRCODE = 'MG409',
                  HINT = 'close it with memgov.deny (a request) or memgov.purge_quarantine (an entry)';
    END IF;
END
$$;

-- Applies a write a reviewer let through (held or quarantined), on the engine's path.
-- p_pending: a held INSERT, whose pending row becomes active; otherwise a quarantined
-- INSERT is stored now and never replaces an existing memory (MG409).
CREATE FUNCTION memgov.apply_write(
    p_operation text, p_item memgov.long_term_memory_items, p_policy_version text, p_decision_id bigint,
    p_pending boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE p_operation
    WHEN 'remember' THEN
        IF p_pending THEN
            UPDATE memgov.long_term_memory_items AS m
               SET status = 'active', policy_version = p_policy_version, decision_id = p_decision_id
             WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
               AND m.status = 'pending_approval';
        ELSE
            BEGIN
                INSERT INTO memgov.long_term_memory_items
                       (memory_id, org_id, project_id, agent_id, subject_id, session_id, category,
                        fact_text, source, confidence, is_sensitive, retention_policy, context_source,
                        metadata, status, created_at, updated_at, policy_version, decision_id)
                VALUES (p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id,
                        p_item.subject_id, p_item.session_id, p_item.category, p_item.fact_text,
                        p_item.source, p_item.confidence, p_item.is_sensitive, p_item.retention_policy,
                        p_item.context_source, p_item.metadata, 'active', p_item.created_at,
                        p_item.created_at, p_policy_version, p_decision_id);
            EXCEPTION WHEN unique_violation THEN
                RAISE EXCEPTION 'memgov: memory % exists already; the quarantined write is not applied',
                                p_item.memory_id
                    USING ERRCODE = 'MG409', HINT = 'purge the quarantine entry instead';
            END;
        END IF;
    WHEN 'update' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET project_id = p_item.project_id, agent_id = p_item.agent_id,
               subject_id = p_item.subject_id, session_id = p_item.session_id,
               category = p_item.category, fact_text = p_item.fact_text, source = p_item.source,
               confidence = p_item.confidence, is_sensitive = p_item.is_sensitive,
               retention_policy = p_item.retention_policy, context_source = p_item.context_source,
               metadata = p_item.metadata, policy_version = p_policy_version, decision_id = p_decision_id
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id
           AND m.status = 'active';
    WHEN 'forget' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id;
    END CASE;
END
$$;

-- Approves a locked pending request: re-decided by the active policy first (a policy
-- that now denies or quarantines it wins over the approval), four eyes, logged.
-- A held INSERT is approved as the reviewer saw it: the request's payload.
CREATE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_id        bigint;
BEGIN
    PERFORM memgov.check_not_read(p_request.operation, 'request', p_request.request_id);
    v_item.org_id := p_request.org_id;
    v_item.memory_id := p_request.memory_id;
    IF p_request.operation = 'remember' THEN
        SELECT * INTO v_row FROM memgov.long_term_memory_items
         WHERE memory_id = p_request.memory_id AND org_id = p_request.org_id
           AND status = 'pending_approval'
           FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memgov: the memory of request % no longer exists', p_request.request_id
                USING ERRCODE = 'MG404';
        END IF;
        IF memgov.content_of(v_row) IS DISTINCT FROM memgov.content_of(v_item) THEN
            RAISE EXCEPTION 'memgov: the memory of request % changed after it was requested', p_request.request_id
                USING ERRCODE = 'MG409', HINT = 'deny the request; the writer remembers it again';
        END IF;
    END IF;

    v_decision := memgov.decide(v_item, p_request.operation, p_request.requested_by);
    v_shadow := memgov.judge_shadow(p_request.operation, v_item, NULL, p_request.requested_by);
    v_id := memgov.log_decision(p_request.operation, v_item.memory_id, v_item.org_id, v_actor, v_decision);
    PERFORM memgov.record_shadow(v_shadow, p_request.operation, v_item, v_decision, v_id);

    IF v_decision.enforced AND v_decision.action IN ('deny', 'quarantine') THEN
        PERFORM memgov.close_request(p_request, 'denied', v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
        RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'denied',
                                  'decision', memgov.decision_json(v_decision));
    END IF;

    PERFORM memgov.apply_write(p_request.operation, v_item, v_decision.policy_version, v_id, true);
    PERFORM memgov.close_request(p_request, 'approved', v_actor, p_note);
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'approved',
                              'decision', memgov.decision_json(v_decision));
END
$$;

-- Denies a locked pending request (four eyes); a held INSERT's pending row is removed.
CREATE FUNCTION memgov.deny_request(p_request memgov.approval_requests, p_note text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memgov.close_request(p_request, 'denied',
                                 memgov.check_reviewer(p_request.requested_login, p_request.requested_by), p_note);
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', 'denied');
END
$$;

-- Applies a held write, re-decided by the active policy first.
CREATE FUNCTION memgov.approve(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.approve_request(memgov.pending_request(approve.request_id), approve.note)
$$;

-- Drops a held write (a held INSERT's pending row is removed).
CREATE FUNCTION memgov.deny(request_id uuid, note text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memgov.deny_request(memgov.pending_request(deny.request_id), deny.note)
$$;

-- Locks a held quarantine entry; MG404 when it does not exist in the caller's tenant,
-- MG409 when it is resolved (memgov.check_found).
CREATE FUNCTION memgov.held_quarantine(p_quarantine_id uuid)
RETURNS memgov.quarantine
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine;
BEGIN
    SELECT * INTO v_entry FROM memgov.quarantine q
     WHERE q.quarantine_id = p_quarantine_id AND memgov.sees_tenant(q.org_id)
       FOR UPDATE;
    PERFORM memgov.check_found('quarantine entry', p_quarantine_id, v_entry.status, 'held');
    RETURN v_entry;
END
$$;

-- Releases a quarantined write: a reviewer's decision (four eyes), applied as written,
-- unless the active policy now denies it (a legal hold placed since, say): MG403.
CREATE FUNCTION memgov.release_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry     memgov.quarantine := memgov.held_quarantine(release_quarantine.quarantine_id);
    v_item      memgov.long_term_memory_items := jsonb_populate_record(NULL::memgov.long_term_memory_items, v_entry.payload);
    v_decision  memgov.decision;
BEGIN
    PERFORM memgov.check_not_read(v_entry.operation, 'quarantine entry', v_entry.quarantine_id);
    PERFORM memgov.check_reviewer(v_entry.quarantined_login, v_entry.quarantined_by);
    v_item.org_id := v_entry.org_id;
    v_item.memory_id := v_entry.memory_id;
    IF v_entry.operation = 'forget' THEN
        SELECT * INTO v_item FROM memgov.long_term_memory_items m
         WHERE m.memory_id = v_entry.memory_id AND m.org_id = v_entry.org_id;
    END IF;
    v_decision := memgov.decide(v_item, v_entry.operation, v_entry.quarantined_by);
    IF v_decision.enforced AND v_decision.action = 'deny' THEN
        RAISE EXCEPTION 'memgov: the active policy now denies this % (rule %)', v_entry.operation,
                        array_to_string(v_decision.matched_rule_ids, ', ')
            USING ERRCODE = 'MG403', DETAIL = memgov.decision_json(v_decision)::text,
                  HINT = 'purge the quarantine entry instead';
    END IF;
    PERFORM memgov.apply_write(v_entry.operation, v_item, v_entry.decision ->> 'policy_version', NULL, false);
    UPDATE memgov.quarantine AS q
       SET status = 'released', resolved_at = now(), resolved_by = memgov.invoker_role(),
           resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'released',
                              'memory_id', v_item.memory_id);
END
$$;

-- Purges a quarantined write: its payload is erased, the entry stays as a record.
CREATE FUNCTION memgov.purge_quarantine(quarantine_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_entry  memgov.quarantine := memgov.held_quarantine(purge_quarantine.quarantine_id);
BEGIN
    UPDATE memgov.quarantine AS q
       SET status = 'purged', payload = jsonb_build_object('purged', true),
           resolved_at = now(), resolved_by = memgov.invoker_role(), resolved_login = session_user
     WHERE q.quarantine_id = v_entry.quarantine_id AND q.org_id = v_entry.org_id;
    RETURN jsonb_build_object('quarantine_id', v_entry.quarantine_id, 'status', 'purged');
END
$$;

-- Privileges: reviewers decide requests and quarantine entries. Nothing else here is a client's.
GRANT EXECUTE ON FUNCTION
    memgov.approve(uuid, text),
    memgov.deny(uuid, text),
    memgov.release_quarantine(uuid),
    memgov.purge_quarantine(uuid)
    TO memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: the user's feedback on a memory (docs/retention.md).
--
-- confirm, reject and edit are the user's acts: the application calls them on
-- the user's behalf as memgov_reviewer; agents (memgov_writer) cannot.
-- forget is a governed DELETE that writers may call too. Every call locks
-- the row (concurrent feedback never loses an update), works in exact
-- numeric clamped to [0, 1], and is recorded in memgov.feedback_events.
--
-- The deltas come from the `feedback:` section of the tenant's active policy
-- (memgov.feedback_setting: the engine's default for what it leaves out).

SET ROLE memgov_owner;

-- Locks a memory for feedback; raises MG404 when it does not exist in the caller's tenant
-- (memgov.check_found).
CREATE FUNCTION memgov.memory_for_feedback(p_memory_id uuid)
RETURNS memgov.long_term_memory_items
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items;
BEGIN
    -- an admin reaches every tenant; a memory_id two tenants share is then ambiguous
    -- unless the session names one
    SELECT * INTO STRICT v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = p_memory_id AND memgov.sees_tenant(m.org_id)
       AND (m.org_id = current_setting('memgov.org_id', true)
            OR coalesce(current_setting('memgov.org_id', true), '') = '')
       FOR UPDATE;
    RETURN v_item;
EXCEPTION
    WHEN no_data_found THEN
        PERFORM memgov.check_found('memory', p_memory_id, NULL);  -- raises MG404
    WHEN too_many_rows THEN
        RAISE EXCEPTION 'memgov: memory % exists in several tenants', p_memory_id
            USING ERRCODE = 'MG409', HINT = 'SET memgov.org_id to the tenant you mean';
END
$$;

-- The pending approval request of a held INSERT, locked (MG404 when there is none).
CREATE FUNCTION memgov.held_insert_request(p_item memgov.long_term_memory_items)
RETURNS memgov.approval_requests
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request  memgov.approval_requests;
BEGIN
    SELECT * INTO v_request FROM memgov.approval_requests r
     WHERE r.memory_id = p_item.memory_id AND r.org_id = p_item.org_id
       AND r.status = 'pending' AND r.operation = 'remember'
     ORDER BY r.requested_at
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: pending memory % has no open approval request', p_item.memory_id
            USING ERRCODE = 'MG404';
    END IF;
    RETURN v_request;
END
$$;

-- Records one feedback event and returns it as the function's result.
CREATE FUNCTION memgov.record_feedback(
    p_item memgov.long_term_memory_items, p_kind text, p_after numeric, p_outcome text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event  bigint;
BEGIN
    INSERT INTO memgov.feedback_events
           (memory_id, org_id, kind, confidence_before, confidence_after, actor, login)
    VALUES (p_item.memory_id, p_item.org_id, p_kind, p_item.confidence, p_after, memgov.invoker_role(),
            session_user)
    RETURNING event_id INTO v_event;
    RETURN jsonb_build_object('memory_id', p_item.memory_id, 'kind', p_kind, 'event_id', v_event,
                              'confidence_before', p_item.confidence, 'confidence_after', p_after,
                              'outcome', p_outcome);
END
$$;

-- Refuses feedback that would change a memory while it waits for approval.
CREATE FUNCTION memgov.check_not_pending(p_item memgov.long_term_memory_items, p_what text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_item.status = 'pending_approval' THEN
        RAISE EXCEPTION 'memgov: memory % is pending approval; it cannot be %', p_item.memory_id, p_what
            USING ERRCODE = 'MG409',
                  HINT = 'confirm or reject it (or approve or deny its request) first';
    END IF;
END
$$;

-- Decides a write memgov applies on its caller's behalf (edit, forget), logs it, files
-- what it calls for, and raises MG403 for a denial. Returns the outcome with its decision.
CREATE FUNCTION memgov.govern_feedback_write(p_operation text, p_item memgov.long_term_memory_items)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_capture   text := current_setting('memgov.capture', true);
    v_actor     text := memgov.invoker_role();
    v_decision  memgov.decision := memgov.decide(p_item, p_operation, v_actor);
    v_shadow    memgov.shadow_verdict := memgov.judge_shadow(p_operation, p_item, NULL, v_actor);
    v_outcome   memgov.write_outcome;
BEGIN
    PERFORM set_config('memgov.capture', 'on', true);
    v_outcome := memgov.record_write(p_operation, p_item, v_actor, v_decision);
    PERFORM set_config('memgov.capture', coalesce(v_capture, ''), true);
    PERFORM memgov.record_shadow(v_shadow, p_operation, p_item, v_decision, v_outcome.decision_id);
    CASE v_outcome.action
    WHEN 'deny' THEN
        PERFORM memgov.raise_denied(p_operation, v_outcome);
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %)', p_operation, v_outcome.request_id
            USING ERRCODE = 'MG201', DETAIL = v_outcome.decision::text;
    WHEN 'quarantine' THEN
        RAISE NOTICE 'memgov: % quarantined (quarantine %)', p_operation, v_outcome.quarantine_id
            USING ERRCODE = 'MG202', DETAIL = v_outcome.decision::text;
    ELSE
        NULL;
    END CASE;
    RETURN v_outcome;
END
$$;

-- The user confirms a memory: confidence += confirm_delta. A pending memory is the
-- approval it waits for: approved as memgov.approve() would (re-decided by the
-- active policy, logged, never by the login that asked for it), then confirmed.
CREATE FUNCTION memgov.confirm(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(confirm.memory_id);
    v_after    numeric(4,3);
    v_result   jsonb;
BEGIN
    IF v_item.status = 'pending_approval' THEN
        v_result := memgov.approve_request(memgov.held_insert_request(v_item), 'confirmed by the user');
        IF v_result ->> 'status' <> 'approved' THEN
            RETURN memgov.record_feedback(v_item, 'confirm', NULL, 'refused')
                   || jsonb_build_object('decision', v_result -> 'decision');
        END IF;
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'confirm_delta')));
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after, last_confirmed_at = now()
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'confirm', v_after,
        CASE WHEN v_item.status = 'pending_approval' THEN 'approved' ELSE 'confirmed' END);
END
$$;

-- The user rejects a memory: confidence += reject_delta, deleted below reject_delete_below
-- (unless a forget rule holds it: then only lowered); a pending memory is refused (its
-- request denied as memgov.deny() would, the row removed).
CREATE FUNCTION memgov.reject(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(reject.memory_id);
    v_after    numeric(4,3);
BEGIN
    IF v_item.status = 'pending_approval' THEN
        PERFORM memgov.deny_request(memgov.held_insert_request(v_item), 'rejected by the user');
        RETURN memgov.record_feedback(v_item, 'reject', NULL, 'refused');
    END IF;
    v_after := least(1, greatest(0, v_item.confidence
                   + memgov.feedback_setting(v_item.org_id, 'reject_delta')));
    IF v_after < memgov.feedback_setting(v_item.org_id, 'reject_delete_below')
       AND NOT memgov.retention_held(v_item) THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
        PERFORM memgov.log_deletion(v_item, 'rejected', NULL);
        RETURN memgov.record_feedback(v_item, 'reject', v_after, 'deleted');
    END IF;
    UPDATE memgov.long_term_memory_items AS m
       SET confidence = v_after
     WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    RETURN memgov.record_feedback(v_item, 'reject', v_after, 'lowered');
END
$$;

-- The user corrects a memory's text: confidence = edit_confidence. The new text is
-- decided as an `update` (a secret in it is denied with MG403 and the old text stays).
CREATE FUNCTION memgov.edit(memory_id uuid, new_text text)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(edit.memory_id);
    v_after    numeric(4,3) := least(1, greatest(0,
                   memgov.feedback_setting(v_item.org_id, 'edit_confidence')));
    v_new      memgov.long_term_memory_items;
    v_outcome  memgov.write_outcome;
BEGIN
    IF new_text IS NULL THEN
        RAISE EXCEPTION 'memgov: new_text must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM memgov.check_not_pending(v_item, 'edited');
    PERFORM memgov.check_fact_size(new_text);
    v_new := v_item;
    v_new.fact_text := new_text;
    v_new.confidence := v_after;
    v_new.updated_at := now();
    v_outcome := memgov.govern_feedback_write('update', v_new);
    IF v_outcome.action = 'allow' THEN
        UPDATE memgov.long_term_memory_items AS m
           SET fact_text = new_text, confidence = v_after,
               policy_version = v_outcome.policy_version, decision_id = v_outcome.decision_id
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    RETURN v_outcome.decision || memgov.record_feedback(v_item, 'edit',
        CASE WHEN v_outcome.action = 'allow' THEN v_after ELSE v_item.confidence END,
        v_outcome.action);
END
$$;

-- Forgets a memory: decided as a `forget` on behalf of the caller, as a DELETE would be.
CREATE FUNCTION memgov.forget(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     memgov.long_term_memory_items := memgov.memory_for_feedback(forget.memory_id);
    v_outcome  memgov.write_outcome;
BEGIN
    PERFORM memgov.check_not_pending(v_item, 'forgotten');
    v_outcome := memgov.govern_feedback_write('forget', v_item);
    IF v_outcome.action = 'allow' THEN
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    PERFORM memgov.record_feedback(v_item, 'forget', NULL, v_outcome.action);
    RETURN v_outcome.decision;
END
$$;

GRANT EXECUTE ON FUNCTION memgov.confirm(uuid), memgov.reject(uuid), memgov.edit(uuid, text)
    TO memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.forget(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: governed reads. What an agent recalls is decided by the active policy, the
-- way a write is (docs/recall.md):
--
--   memgov.search(query)   the session tenant's memories that match a query, best first:
--                          the search is decided once (operation search), then every
--                          candidate (operation get); the candidates a get decision
--                          refuses are withheld and counted
--   memgov.get(memory_id)  one memory, decided as a get
--   SELECT                 row level security shows a writer or reviewer only the rows a
--                          get decision allows, and pending rows to reviewers only
--
-- A policy decides reads only when one of its rules names search or get
-- (memgov.reads_governed, generated from the settings' "reads"): under any other
-- policy every active memory of the tenant is readable, as before reads were governed,
-- and no get decision is taken. Each search and each get is logged (one row, with a
-- salted fingerprint of the query instead of its text, and the counts returned and
-- withheld). Pending, quarantined and expired memories are never recalled.
--
-- SQLSTATEs: MG403 read denied (error), MG203 read held for approval (notice),
-- MG204 read quarantined (notice): a held or quarantined read returns nothing and
-- is filed for reviewers to see (never replayed); 22023 a malformed query; 42501
-- no tenant.

SET ROLE memgov_owner;

-- What memgov.search and memgov.get return: a memory's columns (not the engine's search
-- columns) and its score (memgov.recall_score; NULL from get).
CREATE TYPE memgov.recalled AS (
    memory_id          uuid,
    org_id             text,
    project_id         text,
    agent_id           text,
    subject_id         text,
    session_id         text,
    category           text,
    fact_text          text,
    source             text,
    confidence         numeric(4,3),
    is_sensitive       boolean,
    retention_policy   text,
    context_source     text,
    metadata           jsonb,
    created_at         timestamptz,
    updated_at         timestamptz,
    last_confirmed_at  timestamptz,
    expires_at         timestamptz,
    policy_version     text,
    decision_id        bigint,
    score              double precision
);

CREATE FUNCTION memgov.recalled_of(p_item memgov.long_term_memory_items, p_score double precision)
RETURNS memgov.recalled
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(p_item.memory_id, p_item.org_id, p_item.project_id, p_item.agent_id, p_item.subject_id,
               p_item.session_id, p_item.category, p_item.fact_text, p_item.source, p_item.confidence,
               p_item.is_sensitive, p_item.retention_policy, p_item.context_source, p_item.metadata,
               p_item.created_at, p_item.updated_at, p_item.last_confirmed_at, p_item.expires_at,
               p_item.policy_version, p_item.decision_id, p_score)::memgov.recalled
$$;

-- A search result's score: how well the text matches (ts_rank_cd, normalised to 0..1 by
-- rank / (rank + 1); 1 for a search without text), weighted by confidence (0.5 at
-- confidence 0, 1 at confidence 1) and by freshness (halved every 30 days since the memory
-- last changed or was confirmed). (SQL, so that the planner inlines it into the ranking.)
CREATE FUNCTION memgov.recall_score(
    p_rank real, p_confidence numeric, p_updated_at timestamptz, p_last_confirmed_at timestamptz)
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_rank::float8
           * (0.5 + 0.5 * p_confidence::float8)
           * pg_catalog.power(0.5::float8,
                 GREATEST(pg_catalog.date_part('epoch', pg_catalog.now() - GREATEST(p_updated_at, p_last_confirmed_at)), 0)
                 / 2592000.0)
$$;

-- The tenant a recall reads: the session's (memgov.org_id), which the caller may act in.
CREATE FUNCTION memgov.recall_tenant()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id  text := nullif(current_setting('memgov.org_id', true), '');
BEGIN
    IF v_org_id IS NULL THEN
        RAISE EXCEPTION 'memgov: a recall reads the session''s tenant, and memgov.org_id is not set'
            USING ERRCODE = '42501',
                  HINT = 'SET memgov.org_id to the tenant you act in';
    END IF;
    RETURN memgov.check_tenant(v_org_id);
END
$$;

-- A recall query, checked and normalised: keys project_id, agent_id, subject_id,
-- session_id, context_source, text (strings), categories (a list of strings, or one),
-- min_confidence (0..1), limit (1..1000, default 20). A key whose value is null is left
-- out; every other malformed query raises 22023 naming the key.
CREATE FUNCTION memgov.recall_query(p_query jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_keys    constant text[] := ARRAY['project_id', 'agent_id', 'subject_id', 'session_id', 'context_source',
                                       'text', 'categories', 'min_confidence', 'limit'];
    v_query   jsonb := jsonb_strip_nulls(coalesce(p_query, '{}'::jsonb));
    v_key     text;
    v_value   jsonb;
BEGIN
    IF jsonb_typeof(v_query) <> 'object' THEN
        RAISE EXCEPTION 'memgov: a recall query must be a JSON object, got %', jsonb_typeof(v_query)
            USING ERRCODE = '22023', HINT = 'e.g. {"text": "coffee", "project_id": "atlas", "limit": 5}';
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(v_query) AS e LOOP
        IF v_key <> ALL (v_keys) THEN
            RAISE EXCEPTION 'memgov: unknown key "%" in a recall query', v_key
                USING ERRCODE = '22023', HINT = 'the keys are ' || array_to_string(v_keys, ', ');
        END IF;
        IF v_key = 'categories' THEN
            IF jsonb_typeof(v_value) = 'string' THEN
                v_value := jsonb_build_array(v_value);
                v_query := jsonb_set(v_query, '{categories}', v_value);
            END IF;
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0
               OR EXISTS (SELECT FROM jsonb_array_elements(v_value) AS c WHERE jsonb_typeof(c) <> 'string') THEN
                RAISE EXCEPTION 'memgov: categories in a recall query must be a non-empty list of strings'
                    USING ERRCODE = '22023', HINT = 'e.g. "categories": ["preference", "user_fact"]';
            END IF;
        ELSIF v_key = 'min_confidence' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::numeric NOT BETWEEN 0 AND 1 THEN
                RAISE EXCEPTION 'memgov: min_confidence in a recall query must be a number from 0 to 1, got %', v_value
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_key = 'limit' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::numeric <> trunc(v_value::numeric)
               OR v_value::numeric NOT BETWEEN 1 AND 1000 THEN
                RAISE EXCEPTION 'memgov: limit in a recall query must be a whole number from 1 to 1000, got %', v_value
                    USING ERRCODE = '22023';
            END IF;
            v_query := jsonb_set(v_query, '{limit}', to_jsonb(v_value::numeric::integer));  -- 5.0 is 5
        ELSIF jsonb_typeof(v_value) <> 'string' THEN
            RAISE EXCEPTION 'memgov: % in a recall query must be a string, got %', v_key, jsonb_typeof(v_value)
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    RETURN jsonb_build_object('limit', 20) || v_query;
END
$$;

-- The item a search is decided on: the query's scope, context and min_confidence as the
-- item's columns, its text as fact_text (what the detectors read), its category when it
-- names exactly one; no source.
CREATE FUNCTION memgov.search_item(p_org_id text, p_query jsonb)
RETURNS memgov.long_term_memory_items
LANGUAGE sql STABLE
AS $$
    SELECT memgov.item_from_json(jsonb_build_object(
        'org_id', p_org_id,
        'project_id', p_query ->> 'project_id',
        'agent_id', p_query ->> 'agent_id',
        'subject_id', p_query ->> 'subject_id',
        'session_id', p_query ->> 'session_id',
        'context_source', p_query ->> 'context_source',
        'category', CASE WHEN jsonb_array_length(p_query -> 'categories') = 1 THEN p_query -> 'categories' ->> 0 END,
        'fact_text', p_query ->> 'text',
        'confidence', p_query -> 'min_confidence'))
$$;

-- The decision on a read: the active policy's when it governs reads, else an allow that
-- says so (READS_NOT_GOVERNED), with the tenant's policy version and mode.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.read_decision(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_settings  jsonb;
BEGIN
    IF memgov.reads_governed(p_item.org_id) THEN
        RETURN memgov.decide(p_item, p_operation, p_actor);
    END IF;
    v_settings := memgov.policy_settings(p_item.org_id);
    RETURN memgov.ungoverned_read(v_settings ->> 'version', v_settings ->> 'mode');
END
$$;

-- Logs one decision about a read of p_item (a get's memory, a search's memgov.search_item),
-- and a shadow's verdict on it (memgov.judge_shadow); returns its decision_id. (No SET
-- clause: its callers pin search_path.)
CREATE FUNCTION memgov.log_read(
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_actor        text,
    p_decision     memgov.decision,
    p_shadow       memgov.shadow_verdict,
    p_fingerprint  text,
    p_returned     integer,
    p_withheld     integer)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id  bigint;
BEGIN
    INSERT INTO memgov.decision_log
           (operation, memory_id, org_id, action, reason_codes, matched_rule_ids, policy_version, mode,
            enforced, actor, login, risk_score, risk_level, query_fingerprint, returned, withheld)
    VALUES (p_operation, p_item.memory_id, p_item.org_id, p_decision.action, p_decision.reason_codes,
            p_decision.matched_rule_ids, p_decision.policy_version, p_decision.mode, p_decision.enforced,
            p_actor, session_user, pg_catalog.round(p_decision.risk_score, 3), p_decision.risk_level,
            p_fingerprint, p_returned, p_withheld)
    RETURNING decision_id INTO v_id;
    PERFORM memgov.record_shadow(p_shadow, p_operation, p_item, p_decision, v_id);
    RETURN v_id;
END
$$;

-- A query's fingerprint in the log: sha256 of the database's secret and the normalised
-- query, so that equal queries share it and nobody outside the database can test a guess.
CREATE FUNCTION memgov.query_fingerprint(p_query jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(s.secret || ':' || p_query::text, 'UTF8')), 'hex')
      FROM memgov.channel_secret s
$$;

-- Answers a read the policy refused: MG403 for a deny; a held or quarantined read is filed
-- (approval_requests, quarantine) with what was asked and announced by a notice (MG203,
-- MG204). Returns the decision as JSON, with decision_id and request_id / quarantine_id.
-- (No SET clause: its callers pin search_path.)
CREATE FUNCTION memgov.refuse_read(
    p_operation    text,
    p_org_id       text,
    p_memory_id    uuid,
    p_asked        jsonb,
    p_actor        text,
    p_decision     memgov.decision,
    p_decision_id  bigint)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_request_id     uuid;
    v_quarantine_id  uuid;
    v_detail         jsonb;
BEGIN
    IF p_decision.action = 'require_approval' THEN
        INSERT INTO memgov.approval_requests
               (memory_id, org_id, operation, payload, requested_by, requested_login, decision_id, policy_version)
        VALUES (p_memory_id, p_org_id, p_operation, p_asked, p_actor, session_user, p_decision_id,
                p_decision.policy_version)
        RETURNING request_id INTO v_request_id;
        PERFORM pg_notify(memgov.approval_channel(p_org_id), v_request_id::text);
    ELSIF p_decision.action = 'quarantine' THEN
        INSERT INTO memgov.quarantine
               (org_id, operation, memory_id, payload, decision, decision_id, quarantined_by, quarantined_login)
        VALUES (p_org_id, p_operation, p_memory_id, p_asked, memgov.decision_json(p_decision), p_decision_id,
                p_actor, session_user)
        RETURNING quarantine_id INTO v_quarantine_id;
    END IF;
    v_detail := memgov.decision_json(p_decision)
        || jsonb_build_object('decision_id', p_decision_id, 'memory_id', p_memory_id,
                              'request_id', v_request_id, 'quarantine_id', v_quarantine_id);
    CASE p_decision.action
    WHEN 'deny' THEN
        RAISE EXCEPTION 'memgov: % denied by rule % [%]', p_operation,
                        coalesce(nullif(array_to_string(p_decision.matched_rule_ids, ', '), ''), '(no rule: on_policy_miss)'),
                        array_to_string(p_decision.reason_codes, ', ')
            USING ERRCODE = 'MG403', DETAIL = v_detail::text,
                  HINT = 'the active policy refuses this read; `memgov evaluate --operation ' || p_operation
                         || ' --explain` shows why';
    WHEN 'require_approval' THEN
        RAISE NOTICE 'memgov: % held for approval (request %): nothing returned', p_operation, v_request_id
            USING ERRCODE = 'MG203', DETAIL = v_detail::text;
    ELSE
        RAISE NOTICE 'memgov: % quarantined (quarantine %): nothing returned', p_operation, v_quarantine_id
            USING ERRCODE = 'MG204', DETAIL = v_detail::text;
    END CASE;
    RETURN v_detail;
END
$$;

-- What the last recall of this transaction did, for clients that cannot read the log:
-- memgov.last_recall holds {"decision_id", "action", "enforced", "returned", "withheld", ...}
-- ("withheld" is null for a role that cannot read the log).
CREATE FUNCTION memgov.note_recall(p_outcome jsonb)
RETURNS void
LANGUAGE sql
AS $$
    SELECT FROM pg_catalog.set_config('memgov.last_recall', p_outcome::text, true)
$$;

-- The session tenant's memories that match a query, best first (memgov.recall_score),
-- each allowed by a get decision. Examines candidates in score order until `limit` are
-- allowed or the matches run out.
CREATE FUNCTION memgov.search(query jsonb DEFAULT '{}')
RETURNS SETOF memgov.recalled
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id       text := memgov.recall_tenant();
    v_query        jsonb := memgov.recall_query(query);
    v_actor        text := memgov.invoker_role();
    v_governed     boolean := memgov.reads_governed(v_org_id);
    v_limit        integer := (v_query ->> 'limit')::integer;
    v_categories   text[] := ARRAY(SELECT jsonb_array_elements_text(v_query -> 'categories'));
    v_min          numeric := (v_query ->> 'min_confidence')::numeric;
    v_project_id   text := v_query ->> 'project_id';
    v_agent_id     text := v_query ->> 'agent_id';
    v_subject_id   text := v_query ->> 'subject_id';
    v_session_id   text := v_query ->> 'session_id';
    v_asked        memgov.long_term_memory_items := memgov.search_item(v_org_id, v_query);
    v_shadow       memgov.shadow_verdict;
    v_text         tsquery;
    v_decision     memgov.decision;
    v_get          memgov.decision;
    v_cursor       refcursor;
    v_candidate    record;
    v_offset       integer := 0;
    v_batch        integer;
    v_examined     integer;
    v_returned     integer := 0;
    v_withheld     integer := 0;
    v_id           bigint;
    v_outcome      jsonb;
BEGIN
    v_decision := memgov.read_decision(v_asked, 'search', v_actor);
    v_shadow := memgov.judge_shadow('search', v_asked, NULL, v_actor);
    IF v_decision.enforced AND v_decision.action <> 'allow' THEN
        v_id := memgov.log_read('search', v_asked, v_actor, v_decision, v_shadow, memgov.query_fingerprint(v_query),
                                0, 0);
        v_outcome := memgov.refuse_read('search', v_org_id, NULL, jsonb_build_object('query', v_query),
                                        v_actor, v_decision, v_id);
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    IF v_query ? 'text' THEN
        v_text := websearch_to_tsquery(memgov.search_config(v_org_id), v_query ->> 'text');
    END IF;

    -- candidates are read in batches, best first, until `limit` are allowed or the matches
    -- run out: never fewer because of how many rows were withheld (a cap on the candidates
    -- examined would make what a search returns tell of the rows it may not return)
    v_batch := v_limit;
    -- a text without a word to match matches nothing
    WHILE v_text IS NULL OR numnode(v_text) > 0 LOOP
        -- two static queries, so that each keeps its plan: with a text the index finds the matches
        IF v_text IS NULL THEN
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(1, m.confidence, m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        ELSE
            OPEN v_cursor FOR
                SELECT m AS item,
                       memgov.recall_score(ts_rank_cd(m.search_vector, v_text, 32), m.confidence,
                                           m.updated_at, m.last_confirmed_at) AS score
                  FROM memgov.long_term_memory_items m
                 WHERE m.search_vector @@ v_text
                   AND m.org_id = v_org_id AND m.status = 'active'
                   AND (m.expires_at IS NULL OR m.expires_at > now())
                   AND (v_project_id IS NULL OR m.project_id = v_project_id)
                   AND (v_agent_id IS NULL OR m.agent_id = v_agent_id)
                   AND (v_subject_id IS NULL OR m.subject_id = v_subject_id)
                   AND (v_session_id IS NULL OR m.session_id = v_session_id)
                   AND (cardinality(v_categories) = 0 OR m.category = ANY (v_categories))
                   AND (v_min IS NULL OR m.confidence >= v_min)
                 ORDER BY score DESC, m.memory_id
                 LIMIT v_batch OFFSET v_offset;
        END IF;
        v_examined := 0;
        LOOP
            FETCH v_cursor INTO v_candidate;
            EXIT WHEN NOT FOUND;
            v_examined := v_examined + 1;
            IF v_governed THEN
                v_get := memgov.decide(v_candidate.item, 'get', v_actor);
                IF v_get.action <> 'allow' THEN
                    v_withheld := v_withheld + 1;
                    -- monitor mode returns it and counts what would have been withheld
                    CONTINUE WHEN v_get.enforced;
                END IF;
            END IF;
            v_returned := v_returned + 1;
            RETURN NEXT memgov.recalled_of(v_candidate.item, v_candidate.score);
            EXIT WHEN v_returned = v_limit;
        END LOOP;
        CLOSE v_cursor;
        v_offset := v_offset + v_examined;
        EXIT WHEN v_returned = v_limit OR v_examined < v_batch;
        v_batch := v_batch * 2;  -- the rows past a withheld stretch, in ever larger batches
    END LOOP;

    v_id := memgov.log_read('search', v_asked, v_actor, v_decision, v_shadow, memgov.query_fingerprint(v_query),
                            v_returned, v_withheld);
    -- how many candidates were withheld tells of rows the caller may not read (a search for
    -- a word, or a min_confidence, per probe): only a role that reads the log is told
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'returned', v_returned,
                              'withheld', CASE WHEN pg_catalog.has_table_privilege(v_actor, 'memgov.decision_log', 'SELECT')
                                               THEN v_withheld END));
END
$$;

-- One memory of the session's tenant, decided as a get: its row, or no row when there is
-- no such active memory (another tenant's, a pending or an expired one included).
CREATE FUNCTION memgov.get(memory_id uuid)
RETURNS SETOF memgov.recalled
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_org_id    text := memgov.recall_tenant();
    v_actor     text := memgov.invoker_role();
    v_item      memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_allowed   boolean;
    v_id        bigint;
    v_outcome   jsonb;
BEGIN
    SELECT * INTO v_item FROM memgov.long_term_memory_items m
     WHERE m.memory_id = get.memory_id AND m.org_id = v_org_id AND m.status = 'active'
       AND (m.expires_at IS NULL OR m.expires_at > now());
    IF NOT FOUND THEN
        PERFORM memgov.note_recall(jsonb_build_object('decision_id', NULL, 'returned', 0, 'withheld', 0));
        RETURN;
    END IF;
    v_decision := memgov.read_decision(v_item, 'get', v_actor);
    v_shadow := memgov.judge_shadow('get', v_item, NULL, v_actor);
    v_allowed := NOT v_decision.enforced OR v_decision.action = 'allow';
    v_id := memgov.log_read('get', v_item, v_actor, v_decision, v_shadow, NULL,
                            CASE WHEN v_allowed THEN 1 ELSE 0 END,
                            CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END);
    IF NOT v_allowed THEN
        v_outcome := memgov.refuse_read('get', v_org_id, v_item.memory_id,
                                        jsonb_build_object('memory_id', v_item.memory_id), v_actor, v_decision, v_id);
        PERFORM memgov.note_recall(v_outcome || jsonb_build_object('returned', 0, 'withheld', 1));
        RETURN;
    END IF;
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'memory_id', v_item.memory_id, 'returned', 1,
                              'withheld', CASE WHEN v_decision.action = 'allow' THEN 0 ELSE 1 END));
    RETURN NEXT memgov.recalled_of(v_item, NULL);
END
$$;

-- Row level security of a direct SELECT ------------------------------------------------

-- The mark the write trigger leaves on a row that its writer may not read back (a pending
-- memory, or one the tenant's get rules withhold), so that the INSERT or UPDATE ...
-- RETURNING of that very row still sees it: a digest of the database's secret, the
-- transaction, and the row version as the trigger let it through (tenant, memory_id,
-- updated_at, fact_text), in a transaction-local setting. A client can set the setting,
-- never compute a valid value. The mark opens that row version only: a row another
-- session commits under the same memory_id later (after an INSERT ... ON CONFLICT DO
-- NOTHING that lost, or one rolled back to a savepoint) has another updated_at and text.
-- (No SET clause: the write trigger calls it under its pinned search_path.)
CREATE FUNCTION memgov.row_token(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.md5(s.secret || ':' || pg_catalog.pg_current_xact_id_if_assigned()::text || ':'
                          || p_item.org_id || ':' || p_item.memory_id::text || ':' || extract(epoch FROM p_item.updated_at)::text
                          || ':' || pg_catalog.md5(p_item.fact_text))
      FROM memgov.channel_secret s
$$;

-- Marks the row version a write trigger lets through (NEW, as it will be stored). An
-- INSERT that names the memory_id of a row already there marks nothing: it is an upsert,
-- whose ON CONFLICT DO UPDATE must find the row it would change readable as it is.
CREATE FUNCTION memgov.mark_written(p_item memgov.long_term_memory_items, p_operation text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_operation = 'INSERT' AND EXISTS (
        SELECT FROM memgov.long_term_memory_items m WHERE m.memory_id = p_item.memory_id AND m.org_id = p_item.org_id) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('memgov.written', memgov.row_token(p_item), true);
END
$$;

-- Whether this row version is the one this transaction's write trigger just let through.
CREATE FUNCTION memgov.written_here(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mark  text := current_setting('memgov.written', true);
BEGIN
    RETURN coalesce(v_mark <> '' AND v_mark = memgov.row_token(p_item), false);
END
$$;

-- Whether the active policy lets the querying role read a row of the session's tenant
-- (a get decision; monitor mode lets everything through). Row level security calls it
-- only for a tenant whose policy governs reads; a row of another tenant is never readable
-- (so that it tells a client nothing about another tenant's policy).
CREATE FUNCTION memgov.get_allowed(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_decision  memgov.decision;
BEGIN
    IF p_item.org_id IS DISTINCT FROM memgov.session_tenant() THEN
        RETURN false;
    END IF;
    v_decision := memgov.decide(p_item, 'get', memgov.invoker_role());
    RETURN NOT v_decision.enforced OR v_decision.action = 'allow';
END
$$;

-- Whether a writer or reviewer may read a row of its tenant: pending rows are the
-- reviewers' (and the RETURNING of the write that made one), the tenant's get rules decide
-- the others. Everything it asks is a function of the row (the row's tenant, not the
-- session's setting, which a statement may change while it runs; tenant_isolation has
-- fixed the tenant for the statement already). Under a policy that does not govern reads,
-- reads_governed is the constant false and the test costs next to nothing. A SQL-standard
-- body (its names bound when it was created, whatever the caller's search_path), which
-- the planner inlines into the row level security policies below; p_item is read only
-- where a get decision is asked for.
CREATE FUNCTION memgov.readable(p_status text, p_org_id text, p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE
RETURN CASE WHEN p_status = 'pending_approval'
            THEN pg_catalog.pg_has_role('memgov_reviewer', 'MEMBER') OR memgov.written_here(p_item)
            WHEN memgov.reads_governed(p_org_id)
            THEN memgov.get_allowed(p_item) OR memgov.written_here(p_item)
            ELSE true
       END;

-- On top of tenant_isolation (sql/010_schema.sql): a writer or reviewer reads only the
-- rows it may read, and changes only those (else an UPDATE without a WHERE clause, which
-- row level security lets through unread, would reach a row its writer cannot see).
CREATE POLICY governed_reads ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR SELECT
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items));
CREATE POLICY governed_updates ON memgov.long_term_memory_items
    AS RESTRICTIVE FOR UPDATE
    TO memgov_writer, memgov_reviewer
    USING (memgov.readable(status, org_id, long_term_memory_items))
    WITH CHECK (true);

-- Privileges: recall is every memgov role's; row level security calls readable,
-- reads_governed (both must be executable to be inlined), get_allowed and written_here
-- as the querying role. Everything else here is the engine's.
GRANT EXECUTE ON FUNCTION memgov.search(jsonb), memgov.get(uuid)
    TO memgov_writer, memgov_reviewer, memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.readable(text, text, memgov.long_term_memory_items),
                          memgov.reads_governed(text), memgov.get_allowed(memgov.long_term_memory_items),
                          memgov.written_here(memgov.long_term_memory_items)
    TO memgov_writer, memgov_reviewer;

RESET ROLE;

-- memgov: retention (docs/retention.md). What is deleted, and when:
--
--   ttl_7d / ttl_30d    expires_at (created_at + 7 / 30 days) has passed      memgov.ttl_due
--   confidence_based    below the policy's confidence_floor for confidence_grace  memgov.confidence_due
--   any but permanent   an auto_delete rule of the tenant's active policy matches  memgov.auto_delete_due
--   permanent_until_revoked   never by any automatic process
--
-- unless a forget rule holds the memory (memgov.retention_held). The sweep, its dry run
-- (memgov.retention_preview) and memgov.apply_retention ask those same functions.
--
-- CALL memgov.run_maintenance() runs the sweep in batches of retention.batch_size,
-- each committed on its own (FOR UPDATE SKIP LOCKED: writers are never blocked
-- for long), expires stale approval requests, prunes its own pg_cron history,
-- and records a JSON summary in memgov.maintenance_runs. A lease that only memgov
-- can take (memgov.claim_maintenance) lets one run at a time proceed (per database); killing a run loses nothing, the
-- next one finishes the work and marks the killed one interrupted. Deletions
-- are logged without the memory's content.

SET ROLE memgov_owner;

-- Every deletion by retention or feedback: which memories, why, by which rule; never the text.
-- One row per batch of the sweep and tenant (and rule): the ids of the memories it deleted,
-- so that a sweep writes one log row per few thousand deletions, not one per deletion;
-- memgov.apply_retention and a reject's deletion write a row of one id. The GIN index finds
-- a memory's row: WHERE memory_ids @> ARRAY[<memory_id>].
CREATE TABLE memgov.deletion_log (
    deletion_id     bigint       GENERATED ALWAYS AS IDENTITY,
    deleted_at      timestamptz  NOT NULL DEFAULT now(),
    org_id          text         NOT NULL,
    reason          text         NOT NULL CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected')),
    rule_id         text,
    policy_version  text,
    run_id          bigint,
    memory_count    integer      NOT NULL,
    memory_ids      uuid[]       NOT NULL,
    PRIMARY KEY (org_id, deletion_id),
    CHECK (memory_count = cardinality(memory_ids) AND memory_count > 0)
);
COMMENT ON TABLE memgov.deletion_log IS
    'Memories deleted by retention or rejection, a row per batch and tenant: ids, reason, rule; never the content';
-- A batch's ids (16 random bytes each) do not compress: stored out of line as they are, not
-- after pglz has tried every array (a fifth of the log's INSERT, measured).
ALTER TABLE memgov.deletion_log ALTER COLUMN memory_ids SET STORAGE EXTERNAL;
CREATE INDEX deletion_log_deleted_at_idx ON memgov.deletion_log USING brin (deleted_at);
-- The GIN index takes a batch's ids into its pending list (cheap, sequential); merging that
-- list into the index is left to autovacuum, which the table's settings call for every 100
-- log rows (about half a million ids at the default batch_size), instead of to whichever
-- batch finds the list over the default 4 MB (a merge of some 130 000 ids inside a batch:
-- measured, a fifth of a 200 000-row sweep's time). A lookup reads the pending list whole:
-- at most 16 MB.
CREATE INDEX deletion_log_memory_ids_idx ON memgov.deletion_log USING gin (memory_ids)
    WITH (fastupdate = on, gin_pending_list_limit = 16384);
ALTER TABLE memgov.deletion_log SET (autovacuum_vacuum_insert_threshold = 100,
                                    autovacuum_vacuum_insert_scale_factor = 0);

-- One row per maintenance run, with its JSON summary (global: org_id '*').
CREATE TABLE memgov.maintenance_runs (
    org_id       text        NOT NULL DEFAULT '*',
    run_id       bigint      GENERATED ALWAYS AS IDENTITY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    status       text        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'finished', 'interrupted')),
    dry_run      boolean     NOT NULL DEFAULT false,
    run_by       text        NOT NULL DEFAULT current_user,
    summary      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (org_id, run_id)
);
COMMENT ON TABLE memgov.maintenance_runs IS 'Retention sweeps: when, by whom, and what each deleted or expired';

ALTER TABLE memgov.deletion_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memgov.deletion_log
    TO memgov_writer, memgov_reviewer
    USING (org_id = (SELECT memgov.session_tenant()));
CREATE POLICY admin_read ON memgov.deletion_log TO memgov_admin USING (true);
GRANT SELECT ON memgov.deletion_log TO memgov_reviewer, memgov_admin;
-- the runs count every tenant's deletions: admins only
GRANT SELECT ON memgov.maintenance_runs TO memgov_admin;

-- When each kind of memory is due. These are SQL without a SET clause, so that the
-- planner inlines them into the sweep's queries (and uses the indexes on expires_at and
-- low_confidence_since).

-- Whether a memory's TTL has run out.
CREATE FUNCTION memgov.ttl_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.expires_at <= pg_catalog.now() AND p_item.retention_policy <> 'permanent_until_revoked'
$$;

-- Whether a confidence_based memory has been below its tenant's confidence_floor for the
-- tenant's confidence_grace, and still is (a new policy may have lowered the floor).
CREATE FUNCTION memgov.confidence_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.retention_policy = 'confidence_based'
           AND p_item.low_confidence_since
               <= pg_catalog.now() - memgov.retention_interval(p_item.org_id, 'confidence_grace')
           AND p_item.confidence < memgov.confidence_floor(p_item.org_id)
$$;

-- Whether an auto_delete rule of the tenant's active policy matches a memory.
CREATE FUNCTION memgov.auto_delete_due(p_item memgov.long_term_memory_items)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_item.retention_policy <> 'permanent_until_revoked' AND memgov.retention_rule(p_item) IS NOT NULL
$$;

-- The highest confidence that an auto_delete rule of an active policy can match, NULL when
-- some such rule may match any: each rule that must pass all its tests (match all, or a
-- single test) and tests `confidence lt|lte X` is bounded by X. Read from the versions' rule
-- rows, it lets the walk pass over rows above it without calling the policy (the default
-- policy deletes below 0.3 only).
CREATE FUNCTION memgov.auto_delete_confidence_bound()
RETURNS numeric
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN bool_and(b.bound IS NOT NULL) THEN max(b.bound) END
      FROM (SELECT (SELECT min((c ->> 'value')::numeric)
                      FROM jsonb_array_elements(r.condition -> 'conditions') AS c
                     WHERE (r.condition ->> 'match' = 'all' OR jsonb_array_length(r.condition -> 'conditions') = 1)
                       AND c ->> 'field' = 'confidence' AND c ->> 'operator' IN ('lt', 'lte')
                       AND jsonb_typeof(c -> 'value') = 'number') AS bound
              FROM memgov.memory_policy_rules r
              JOIN memgov.policy_versions v ON v.org_id = r.org_id AND v.version = r.policy_version
             WHERE v.active AND r.action = 'auto_delete') AS b
$$;

-- Whether a pending approval request has waited longer than its tenant's approval_ttl.
CREATE FUNCTION memgov.approval_expired(p_request memgov.approval_requests)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT p_request.status = 'pending'
           AND p_request.requested_at <= pg_catalog.now() - memgov.retention_interval(p_request.org_id, 'approval_ttl')
$$;

-- Why a memory is due for deletion now ('ttl', 'confidence', 'auto_delete'), or NULL.
CREATE FUNCTION memgov.due_reason(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN memgov.ttl_due(p_item) THEN 'ttl'
        WHEN memgov.confidence_due(p_item) THEN 'confidence'
        WHEN memgov.auto_delete_due(p_item) THEN 'auto_delete'
    END
$$;

-- Whether a forget rule holds a memory against automatic deletion, memgov.retention_held(item),
-- is generated with the dispatchers (sql/030_policy.sql): its tenant's active policy, deciding
-- `forget` for it, denies by a rule (a legal hold). Retention and a rejection's deletion skip
-- such memories; on_policy_miss and holds for approval do not stop them (the retention
-- schedule is itself the policy's decision). Where the active policy has no deny rule that
-- can decide a forget (memgov.policy_may_hold), it decides nothing per row and is false.

-- Records one deletion made outside the sweep (apply_retention, rejection): a row of one id.
CREATE FUNCTION memgov.log_deletion(p_item memgov.long_term_memory_items, p_reason text, p_run_id bigint)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
    VALUES (p_item.org_id, p_reason,
            CASE WHEN p_reason = 'auto_delete' THEN memgov.retention_rule(p_item) END,
            memgov.policy_settings(p_item.org_id) ->> 'version', p_run_id, 1, ARRAY[p_item.memory_id])
$$;

-- Deletes one batch of due memories of one kind and logs the deletions; returns how many
-- rows it took (fewer than p_batch_size: that kind is done for this run).
--
-- Each kind picks and locks its batch (FOR UPDATE SKIP LOCKED: a row someone holds waits
-- for the next run, the sweep never waits for it), and reads what the log needs from the
-- rows it locks: their ids, tenants and (auto_delete) rules. A second statement deletes the
-- locked rows by ctid (a TID scan: no second index probe, no join against the whole table);
-- the rows are ours until the commit, so it deletes each of them, as its count checks. The
-- log is then written from the locked rows: one deletion_log row per tenant (and
-- auto_delete rule) holding the batch's ids, a tenant's policy version looked up once per
-- batch, not per row. Reading the deleted rows back instead (DELETE ... RETURNING feeding
-- the log's INSERT) cost some 0.6 µs more a deleted row (measured).
CREATE FUNCTION memgov.sweep_batch(p_run_id bigint, p_kind text, p_batch_size integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_batch    tid[];     -- the locked rows, and what the log says of each
    v_ids      uuid[];
    v_orgs     text[];
    v_rules    text[];
    v_taken    integer := 0;
    v_deleted  integer := 0;
    v_cursor   bigint;
    v_blocks   bigint;
    v_step     bigint;
    v_path     text[];
    v_cutoff   timestamptz;
    v_bound    numeric;
BEGIN
    PERFORM memgov.check_lease();
    IF p_kind = 'ttl' THEN
        -- in expiry order, through the partial index on expires_at
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE memgov.ttl_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.expires_at
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'confidence' THEN
        -- the loosest grace of any active policy (or the default, for tenants that have
        -- none) bounds the index scan; each row is then held to its own tenant's grace and floor
        SELECT now() - least((memgov.setting_defaults() #>> '{retention,confidence_grace}')::interval,
                             min(memgov.retention_interval(v.org_id, 'confidence_grace')))
          INTO v_cutoff
          FROM memgov.policy_versions v
         WHERE v.active;
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM memgov.long_term_memory_items d
                 WHERE d.low_confidence_since <= v_cutoff
                   AND memgov.confidence_due(d) AND NOT memgov.retention_held(d)
                 ORDER BY d.low_confidence_since
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
    ELSIF p_kind = 'auto_delete' THEN
        -- no active policy has an auto_delete rule: nothing to walk
        IF NOT EXISTS (SELECT FROM memgov.memory_policy_rules r
                         JOIN memgov.policy_versions v
                           ON v.org_id = r.org_id AND v.version = r.policy_version
                        WHERE v.active AND r.action = 'auto_delete') THEN
            RETURN 0;
        END IF;
        -- auto_delete rules are arbitrary predicates: walk the table once per run in
        -- physical order (a TID range scan), up to the size the table had when the walk
        -- began. A batch reads at most four times p_batch_size rows' worth of blocks (reading
        -- is cheap, a batch's commit and bookkeeping are not) and takes at most p_batch_size
        -- of them; a full batch ends the step at the block of its last row
        SELECT (r.summary ->> 'cursor')::bigint, (r.summary ->> 'blocks')::bigint
          INTO v_cursor, v_blocks
          FROM memgov.maintenance_runs r WHERE r.org_id = '*' AND r.run_id = p_run_id;
        IF v_cursor IS NULL THEN
            v_cursor := 0;
            v_blocks := pg_relation_size('memgov.long_term_memory_items')
                        / current_setting('block_size')::bigint;
        END IF;
        v_bound := memgov.auto_delete_confidence_bound();
        SELECT greatest(1, ceil(4.0 * p_batch_size / CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                                    THEN c.reltuples / c.relpages ELSE 50 END))::bigint
          INTO v_step
          FROM pg_class c WHERE c.oid = 'memgov.long_term_memory_items'::regclass;
        -- (the rule is named from the locked version of the row)
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id), array_agg(b.rule_id)
          INTO v_batch, v_ids, v_orgs, v_rules
          FROM (SELECT d.ctid, d.memory_id, d.org_id, memgov.retention_rule(d) AS rule_id
                  FROM memgov.long_term_memory_items d
                 WHERE d.ctid >= ('(' || v_cursor || ',0)')::tid
                   AND d.ctid < ('(' || (v_cursor + v_step) || ',0)')::tid
                   AND (v_bound IS NULL OR d.confidence <= v_bound)
                   AND memgov.auto_delete_due(d) AND NOT memgov.retention_held(d)
                 LIMIT p_batch_size
                   FOR UPDATE SKIP LOCKED) AS b;
        -- a TID range scan returns rows in ctid order: a full batch resumes at its last row's
        -- block (its rows are deleted below; the block's others are read again, so each full
        -- batch moves on by p_batch_size deletions), any other ends the step
        v_cursor := CASE WHEN cardinality(v_batch) >= p_batch_size
                         THEN (v_batch[cardinality(v_batch)]::text::point)[0]::bigint
                         ELSE v_cursor + v_step END;
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('cursor', v_cursor, 'blocks', v_blocks)
         WHERE org_id = '*' AND run_id = p_run_id;
    ELSIF p_kind = 'approvals' THEN
        WITH stale AS (
            SELECT r.request_id, r.org_id FROM memgov.approval_requests r
             WHERE memgov.approval_expired(r)
             LIMIT p_batch_size
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            UPDATE memgov.approval_requests r
               SET status = 'expired', decided_at = now(), decided_by = 'memgov', note = 'approval_ttl passed'
              FROM stale
             WHERE r.request_id = stale.request_id AND r.org_id = stale.org_id
            RETURNING r.memory_id, r.org_id, r.operation
        ), dropped AS (
            -- a held INSERT that nobody approved goes with its request
            DELETE FROM memgov.long_term_memory_items m USING expired e
             WHERE e.operation = 'remember' AND m.memory_id = e.memory_id AND m.org_id = e.org_id
               AND m.status = 'pending_approval'
            RETURNING 1
        )
        SELECT count(*) INTO v_deleted FROM expired;
        v_taken := v_deleted;
    ELSE
        RAISE EXCEPTION 'unknown sweep kind %', p_kind USING ERRCODE = '22023';
    END IF;

    IF p_kind <> 'approvals' THEN
        -- the batch through a subquery, whose size the planner cannot see: it looks the tids up
        -- (a TID scan); shown an array of thousands of tids, it would scan the whole table
        DELETE FROM memgov.long_term_memory_items m
         WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> coalesce(cardinality(v_batch), 0) THEN
            RAISE EXCEPTION 'memgov: the sweep deleted % of the % rows it had locked', v_deleted, cardinality(v_batch)
                USING ERRCODE = 'XX000';
        END IF;
        -- the ids in order: the GIN index sorts a row's ids before it stores them, and a sorted
        -- array costs that sort a single pass
        INSERT INTO memgov.deletion_log (org_id, reason, rule_id, policy_version, run_id, memory_count, memory_ids)
        SELECT b.org_id, p_kind, b.rule_id, memgov.policy_settings(b.org_id) ->> 'version', p_run_id,
               count(*), array_agg(b.memory_id ORDER BY b.memory_id)
          FROM unnest(v_ids, v_orgs, v_rules) AS b (memory_id, org_id, rule_id)
         GROUP BY b.org_id, b.rule_id;
        -- auto_delete: a full batch while blocks remain; the last one ends the walk
        v_taken := CASE WHEN p_kind <> 'auto_delete' THEN v_deleted
                        WHEN v_cursor < v_blocks THEN p_batch_size ELSE 0 END;
    END IF;

    v_path := CASE p_kind WHEN 'approvals' THEN ARRAY['expired', 'approvals'] ELSE ARRAY['deleted', p_kind] END;
    UPDATE memgov.maintenance_runs
       SET summary = jsonb_set(summary, v_path, to_jsonb(coalesce((summary #>> v_path)::bigint, 0) + v_deleted))
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_taken;
END
$$;

-- What a sweep would delete and expire now, without deleting anything.
CREATE FUNCTION memgov.retention_preview()
RETURNS jsonb
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'deleted', jsonb_build_object(
            'ttl',         count(*) FILTER (WHERE d.reason = 'ttl'),
            'confidence',  count(*) FILTER (WHERE d.reason = 'confidence'),
            'auto_delete', count(*) FILTER (WHERE d.reason = 'auto_delete')),
        'expired', jsonb_build_object(
            'approvals', (SELECT count(*) FROM memgov.approval_requests r WHERE memgov.approval_expired(r))))
      FROM (SELECT memgov.due_reason(m) AS reason
              FROM memgov.long_term_memory_items m
             WHERE m.retention_policy <> 'permanent_until_revoked') AS d
$$;

-- The backend whose run holds the maintenance lease now (NULL: none).
CREATE FUNCTION memgov.maintenance_holder()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.holder_pid
      FROM memgov.engine_locks e
     WHERE e.name = 'maintenance'
       AND EXISTS (SELECT FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.granted AND l.pid = e.holder_pid
                      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                      AND l.classid = e.lock_key[1]::oid AND l.objid = e.lock_key[2]::oid
                      AND l.objsubid = 2)
$$;

-- Claims the maintenance lease: returns the advisory-lock key this backend now holds for
-- the run, or NULL while another backend's run holds it. The key is random and chosen
-- here, so no other session can take it first and stall the sweep; a run that dies
-- releases its advisory lock, and with it the lease.
CREATE FUNCTION memgov.claim_maintenance()
RETURNS integer[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease  memgov.engine_locks;
    v_key    integer[];
BEGIN
    SELECT * INTO STRICT v_lease FROM memgov.engine_locks WHERE name = 'maintenance' FOR UPDATE;
    IF memgov.maintenance_holder() IS NOT NULL THEN
        RETURN NULL;
    END IF;
    LOOP
        v_key := ARRAY[(floor(random() * 4294967296) - 2147483648)::integer,
                       (floor(random() * 4294967296) - 2147483648)::integer];
        EXIT WHEN pg_try_advisory_lock(v_key[1], v_key[2]);
    END LOOP;
    UPDATE memgov.engine_locks
       SET holder_pid = pg_backend_pid(), lock_key = v_key, acquired_at = now()
     WHERE name = 'maintenance';
    RETURN v_key;
END
$$;

-- Raises 55P03 unless this backend holds the maintenance lease: the run's own steps
-- (start, batches, finish) are the lease holder's alone.
CREATE FUNCTION memgov.check_lease()
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF memgov.maintenance_holder() IS DISTINCT FROM pg_backend_pid() THEN
        RAISE EXCEPTION 'memgov: this session does not hold the maintenance lease'
            USING ERRCODE = '55P03', HINT = 'CALL memgov.run_maintenance() runs every step of a sweep';
    END IF;
END
$$;

-- Gives the maintenance lease back (the caller's run is over).
CREATE FUNCTION memgov.release_maintenance(p_key integer[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_advisory_unlock(p_key[1], p_key[2]);
    UPDATE memgov.engine_locks SET holder_pid = NULL, lock_key = NULL, acquired_at = NULL
     WHERE name = 'maintenance' AND lock_key = p_key AND holder_pid = pg_backend_pid();
END
$$;

-- Opens a run (after marking runs that were killed as interrupted); returns its id.
CREATE FUNCTION memgov.start_maintenance(p_dry_run boolean)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run  bigint;
BEGIN
    PERFORM memgov.check_lease();
    -- we hold the lease, so a run still marked running was killed
    UPDATE memgov.maintenance_runs SET status = 'interrupted', finished_at = now()
     WHERE status = 'running';
    INSERT INTO memgov.maintenance_runs (dry_run, run_by, summary)
    VALUES (p_dry_run, memgov.invoker_role(),
            jsonb_build_object('deleted', jsonb_build_object('ttl', 0, 'confidence', 0, 'auto_delete', 0),
                               'expired', jsonb_build_object('approvals', 0)))
    RETURNING run_id INTO v_run;
    RETURN v_run;
END
$$;

-- Deletes the replay samples older than their tenant's replay.keep, and any whose memory
-- is gone (a TRUNCATE); records the count in the run's summary (replay_samples_pruned).
CREATE FUNCTION memgov.prune_replay_samples(p_run_id bigint)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_pruned  bigint;
BEGIN
    PERFORM memgov.check_lease();
    DELETE FROM memgov.replay_samples s
     WHERE s.sampled_at < now() - memgov.policy_setting(s.org_id, 'replay', 'keep')::interval
        OR NOT EXISTS (SELECT FROM memgov.long_term_memory_items m
                        WHERE m.memory_id = s.memory_id AND m.org_id = s.org_id);
    GET DIAGNOSTICS v_pruned = ROW_COUNT;
    UPDATE memgov.maintenance_runs SET summary = summary || jsonb_build_object('replay_samples_pruned', v_pruned)
     WHERE org_id = '*' AND run_id = p_run_id;
    RETURN v_pruned;
END
$$;

-- Closes a run with its summary (p_preview: a dry run's counts; p_cron_pruned: pg_cron history rows pruned).
CREATE FUNCTION memgov.finish_maintenance(p_run_id bigint, p_preview jsonb DEFAULT NULL, p_cron_pruned bigint DEFAULT 0)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_summary  jsonb;
    v_now      timestamptz := clock_timestamp();  -- a dry run's preview ran in this transaction
BEGIN
    PERFORM memgov.check_lease();
    UPDATE memgov.maintenance_runs
       SET status = 'finished', finished_at = v_now,
           summary = (coalesce(p_preview, summary) - 'cursor' - 'blocks')
                     || jsonb_build_object('run_id', run_id, 'dry_run', dry_run,
                                           'cron_history_pruned', coalesce(p_cron_pruned, 0),
                                           'started_at', started_at, 'finished_at', v_now)
     WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
    RETURNING summary INTO v_summary;
    RETURN v_summary;
END
$$;

-- The sweep: one idempotent entry point for pg_cron and the CLI. Each batch commits on its own.
-- No SECURITY DEFINER and no SET clause: either would forbid the COMMITs. It runs as its
-- caller, which is also what lets it prune the caller's own pg_cron history.
CREATE PROCEDURE memgov.run_maintenance(dry_run boolean DEFAULT false)
LANGUAGE plpgsql
AS $$
DECLARE
    v_lock     integer[];
    -- how much the sweep yields to the database's other sessions: while one of them is
    -- busy, it pauses after each batch for this many times the batch's duration (at most
    -- 1 s), which leaves writers the WAL bandwidth their commits wait for (0: never pauses)
    v_yield    float8 := coalesce(nullif(pg_catalog.current_setting('memgov.maintenance_yield', true), '')::float8, 10.0);
    v_run      bigint;
    v_batch    integer;
    v_kind     text;
    v_taken    integer;
    v_started  timestamptz;
    v_pruned   bigint := 0;
BEGIN
    -- a second run while one is going returns at once (the lease is per database)
    v_lock := memgov.claim_maintenance();
    IF v_lock IS NULL THEN
        RAISE NOTICE 'memgov: another maintenance run is in progress; this one does nothing'
            USING ERRCODE = 'MG409';
        RETURN;
    END IF;
    -- the lease's lock belongs to the session: every step that can fail releases it before re-raising,
    -- so that a failed run in a long-lived session does not block the runs that follow
    BEGIN
        v_batch := greatest(1, memgov.policy_setting('*', 'retention', 'batch_size')::integer);
        v_run := memgov.start_maintenance(dry_run);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM memgov.release_maintenance(v_lock);
        RAISE;
    END;
    COMMIT;
    IF dry_run THEN
        BEGIN
            PERFORM memgov.finish_maintenance(v_run, memgov.retention_preview());
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    ELSE
        FOREACH v_kind IN ARRAY ARRAY['ttl', 'confidence', 'auto_delete', 'approvals'] LOOP
            LOOP
                v_started := pg_catalog.clock_timestamp();
                -- a batch's commit does not wait for its WAL to reach the disk: a crash may undo
                -- the last batches, each whole (deletions with their log rows), and the next run
                -- does them again; the run's last commit (below) waits, for them all
                PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
                BEGIN
                    v_taken := memgov.sweep_batch(v_run, v_kind, v_batch);
                EXCEPTION WHEN OTHERS OR query_canceled THEN
                    PERFORM memgov.release_maintenance(v_lock);
                    RAISE;
                END;
                COMMIT;
                EXIT WHEN v_taken < v_batch;
                -- other sessions are at work here: leave them WAL and CPU (a backend whose
                -- state the caller may not see counts as busy)
                IF v_yield > 0 AND EXISTS (
                       SELECT FROM pg_catalog.pg_stat_activity a
                        WHERE a.datname = pg_catalog.current_database()
                          AND a.pid <> pg_catalog.pg_backend_pid()
                          AND a.backend_type = 'client backend'
                          AND a.state IS DISTINCT FROM 'idle') THEN
                    PERFORM pg_catalog.pg_sleep(LEAST(1.0, v_yield
                        * pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - v_started)));
                END IF;
            END LOOP;
        END LOOP;
        -- this database's own pg_cron history, when it lives here and the caller may see it
        -- (pg_cron's row security shows each user its own jobs' runs)
        BEGIN
            IF pg_catalog.to_regclass('cron.job_run_details') IS NOT NULL THEN
                -- dynamic: the cron schema exists in pg_cron's database only
                EXECUTE pg_catalog.format($sql$
                    DELETE FROM %I.job_run_details d
                     USING %I.job j
                     WHERE d.jobid = j.jobid
                       AND j.database = pg_catalog.current_database()
                       AND j.command LIKE '%%memgov.run_maintenance%%'
                       AND d.end_time < pg_catalog.now() - interval '7 days'
                $sql$, 'cron', 'cron');
                GET DIAGNOSTICS v_pruned = ROW_COUNT;
            END IF;
        EXCEPTION WHEN insufficient_privilege OR undefined_table OR invalid_schema_name THEN
            v_pruned := 0;  -- not ours to prune
        END;
        BEGIN
            -- seal the decision log's new rows into its hash chain (sql/080_audit.sql; summary key 'sealed')
            PERFORM memgov.seal_decision_log(p_run_id => v_run);
            PERFORM memgov.prune_replay_samples(v_run);
            PERFORM memgov.finish_maintenance(v_run, NULL, v_pruned);
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM memgov.release_maintenance(v_lock);
            RAISE;
        END;
    END IF;
    COMMIT;
    PERFORM memgov.release_maintenance(v_lock);
END
$$;

-- Applies the sweep's rules to one memory now; returns whether it was deleted and why.
CREATE FUNCTION memgov.apply_retention(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item    memgov.long_term_memory_items := memgov.memory_for_feedback(apply_retention.memory_id);
    v_reason  text := memgov.due_reason(v_item);
    v_held    boolean := v_reason IS NOT NULL AND memgov.retention_held(v_item);
BEGIN
    IF v_held THEN
        -- due, but a forget rule holds it: like the sweep, apply_retention leaves it
        RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', false, 'reason', v_reason,
                                  'held', true);
    END IF;
    IF v_reason IS NOT NULL THEN
        PERFORM memgov.log_deletion(v_item, v_reason, NULL);
        DELETE FROM memgov.long_term_memory_items AS m
         WHERE m.memory_id = v_item.memory_id AND m.org_id = v_item.org_id;
    END IF;
    RETURN jsonb_build_object('memory_id', v_item.memory_id, 'deleted', v_reason IS NOT NULL,
                              'reason', v_reason,
                              'rule_id', CASE WHEN v_reason = 'auto_delete' THEN memgov.retention_rule(v_item) END);
END
$$;

GRANT EXECUTE ON FUNCTION
    memgov.maintenance_holder(),
    memgov.claim_maintenance(),
    memgov.release_maintenance(integer[]),
    memgov.sweep_batch(bigint, text, integer),
    memgov.retention_preview(),
    memgov.start_maintenance(boolean),
    memgov.finish_maintenance(bigint, jsonb, bigint),
    memgov.prune_replay_samples(bigint)
    TO memgov_admin;
-- `memgov retention run` counts what the TTL sweep has to delete (its progress bar)
GRANT EXECUTE ON FUNCTION memgov.ttl_due(memgov.long_term_memory_items) TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.auto_delete_confidence_bound() TO memgov_admin;
GRANT EXECUTE ON PROCEDURE memgov.run_maintenance(boolean) TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.apply_retention(uuid) TO memgov_writer, memgov_reviewer, memgov_admin;

RESET ROLE;

-- memgov: the decision log is append-only and sealed into a hash chain.
--
-- A decision, once logged, is never changed or removed: UPDATE, DELETE and TRUNCATE of
-- memgov.decision_log, of its seals and of its archive records are refused for every role,
-- superusers and memgov_owner's own functions included (SQLSTATE 42501), by triggers that
-- fire even under session_replication_role = replica (ENABLE ALWAYS). Rows leave only
-- through memgov.archive_decision_log(before), which removes whole seals, oldest first, and
-- records what it removed.
--
-- Sealing costs a writer a column default and nothing else: each row records the
-- transaction that wrote it (xact_id). memgov.seal_decision_log(), run at the end of every
-- memgov.run_maintenance(), takes as its horizon the oldest transaction still running (its
-- snapshot's xmin): every transaction below it has committed or aborted, so no row of one
-- can appear later. It seals exactly those rows, in (xact_id, decision_id) order, after the
-- last row of the previous seal. A row whose transaction was still open waits for a later
-- seal, however low the decision_id it took: late commits are never mistaken for tampering.
-- Each seal keeps the ids and sha256 digests of its rows and
--
--     seal_hash = sha256(prev_hash || 'memgov-seal-v1 <seal_id> <after> <last> <ids>' || digests)
--
-- (the first seal's prev_hash is 32 zero bytes). memgov.verify_decision_log() recomputes
-- it all and names the first altered, missing or extra row.
--
-- What this cannot stop: a superuser or memgov_owner may disable the triggers and rewrite
-- the log and the chain alike. Keep the last seal's hash outside the database (memgov
-- verify-log prints it, --anchor checks it later). docs/security.md says more.

SET ROLE memgov_owner;

-- The seals, a hash chain (global: org_id '*'). Seal n covers the rows after seal n-1's
-- last row up to its own, in (xact_id, decision_id) order; after = (0, 0) for the first.
CREATE TABLE memgov.decision_log_seals (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    seal_id            bigint      NOT NULL CHECK (seal_id > 0),
    sealed_at          timestamptz NOT NULL DEFAULT now(),
    sealed_by          text        NOT NULL,
    sealed_login       text        NOT NULL DEFAULT session_user,
    horizon_xact_id    bigint      NOT NULL,  -- every transaction below it had ended
    after_xact_id      bigint      NOT NULL,
    after_decision_id  bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          integer     NOT NULL CHECK (row_count > 0),
    decision_ids       bigint[]    NOT NULL,  -- in (xact_id, decision_id) order
    row_digests        bytea       NOT NULL,  -- 32 bytes a row, in the order of decision_ids
    last_decided_at    timestamptz NOT NULL,  -- the latest decided_at of its rows (archival)
    prev_hash          bytea       NOT NULL,
    seal_hash          bytea       NOT NULL,
    PRIMARY KEY (org_id, seal_id)
);
COMMENT ON TABLE memgov.decision_log_seals IS
    'Hash chain over memgov.decision_log: each seal covers a batch of rows and the previous seal';

-- What memgov.archive_decision_log() removed: whole seals, the oldest first. Verification
-- continues from the last one's hash and last row.
CREATE TABLE memgov.decision_log_archives (
    org_id             text        NOT NULL DEFAULT '*' CHECK (org_id = '*'),
    archive_id         bigint      NOT NULL CHECK (archive_id > 0),
    archived_at        timestamptz NOT NULL DEFAULT now(),
    archived_by        text        NOT NULL,
    archived_login     text        NOT NULL DEFAULT session_user,
    archived_xact_id   bigint      NOT NULL DEFAULT (pg_catalog.pg_current_xact_id())::text::bigint,
    decided_before     timestamptz NOT NULL,
    first_seal_id      bigint      NOT NULL,
    last_seal_id       bigint      NOT NULL,
    last_xact_id       bigint      NOT NULL,
    last_decision_id   bigint      NOT NULL,
    row_count          bigint      NOT NULL,
    last_hash          bytea       NOT NULL,
    PRIMARY KEY (org_id, archive_id),
    CHECK (last_seal_id >= first_seal_id)
);
COMMENT ON TABLE memgov.decision_log_archives IS
    'Seals removed from the decision log by memgov.archive_decision_log, with the last removed seal''s hash';

-- Refuses UPDATE, DELETE and TRUNCATE of the decision log, its seals and its archive records,
-- for every role. It lets through only memgov.archive_decision_log()'s deletes of what that
-- function has just recorded, in this very transaction, as archived.
CREATE FUNCTION memgov.refuse_log_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_archive  text;
    v_allowed  boolean := false;
BEGIN
    -- current_user is memgov_owner only inside memgov's SECURITY DEFINER functions (no client
    -- role is a member of it); memgov.archiving alone proves nothing: any session may set it
    IF TG_OP = 'DELETE' AND current_user = 'memgov_owner' THEN
        v_archive := current_setting('memgov.archiving', true);
        IF v_archive ~ '^[1-9][0-9]{0,17}$' THEN
            IF TG_TABLE_NAME = 'decision_log' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND (OLD.xact_id, OLD.decision_id) <= (a.last_xact_id, a.last_decision_id));
            ELSIF TG_TABLE_NAME = 'decision_log_seals' THEN
                v_allowed := EXISTS (
                    SELECT FROM memgov.decision_log_archives a
                     WHERE a.org_id = '*' AND a.archive_id = v_archive::bigint
                       AND a.archived_xact_id = pg_current_xact_id_if_assigned()::text::bigint
                       AND OLD.seal_id <= a.last_seal_id);
            END IF;
        END IF;
    END IF;
    IF v_allowed THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memgov: %.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = '42501',
              HINT = 'logged decisions are never changed; sealed rows leave only through '
                     'memgov.archive_decision_log(before), which records what it removes';
END
$$;

CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_seals
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_seals
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON memgov.decision_log_archives
    FOR EACH ROW EXECUTE FUNCTION memgov.refuse_log_change();
CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON memgov.decision_log_archives
    FOR EACH STATEMENT EXECUTE FUNCTION memgov.refuse_log_change();
-- also under session_replication_role = replica, which would silence ordinary triggers
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log          ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_seals    ENABLE ALWAYS TRIGGER refuse_truncate;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_change;
ALTER TABLE memgov.decision_log_archives ENABLE ALWAYS TRIGGER refuse_truncate;

-- The sha256 of one log row: all its columns as jsonb, NULLs left out (a column added later,
-- NULL in old rows, leaves their digests as they were). Timestamps print in the session's
-- TimeZone: every caller pins TimeZone = 'UTC'. (No SET clause, so that it is inlined.)
CREATE FUNCTION memgov.decision_digest(p_row memgov.decision_log)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(
               pg_catalog.jsonb_strip_nulls(pg_catalog.to_jsonb(p_row))::text, 'UTF8'))
$$;

-- The hash of a seal: of the previous seal's hash, the seal's own header and its rows' digests.
CREATE FUNCTION memgov.seal_hash(p_prev_hash bytea, p_seal_id bigint,
                                 p_after_xact_id bigint, p_after_decision_id bigint,
                                 p_last_xact_id bigint, p_last_decision_id bigint,
                                 p_decision_ids bigint[], p_row_digests bytea)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(
               p_prev_hash
               || pg_catalog.convert_to(pg_catalog.format('memgov-seal-v1 %s %s:%s %s:%s %s',
                      p_seal_id, p_after_xact_id, p_after_decision_id, p_last_xact_id, p_last_decision_id,
                      pg_catalog.array_to_string(p_decision_ids, ',')), 'UTF8')
               || p_row_digests)
$$;

-- Where the chain ends now: its last seal, else the last archive record (its last seal);
-- NULLs when nothing was ever sealed.
CREATE FUNCTION memgov.chain_end(OUT seal_id bigint, OUT xact_id bigint, OUT decision_id bigint, OUT hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT s.seal_id, s.last_xact_id, s.last_decision_id, s.seal_hash
      INTO chain_end.seal_id, chain_end.xact_id, chain_end.decision_id, chain_end.hash
      FROM memgov.decision_log_seals s
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        SELECT a.last_seal_id, a.last_xact_id, a.last_decision_id, a.last_hash
          INTO chain_end.seal_id, chain_end.xact_id, chain_end.decision_id, chain_end.hash
          FROM memgov.decision_log_archives a
         ORDER BY a.archive_id DESC
         LIMIT 1;
    END IF;
END
$$;

-- Seals the log's new rows: every row of a transaction older than all running ones, after
-- the last seal, p_batch_rows a seal; returns what it sealed. memgov.run_maintenance() passes
-- its run id: the run's summary then says how many rows it sealed (key 'sealed').
CREATE FUNCTION memgov.seal_decision_log(p_batch_rows integer DEFAULT 10000, p_run_id bigint DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_seal_id   bigint;
    v_after_x   bigint;
    v_after_d   bigint;
    v_hash      bytea;
    v_horizon   bigint;
    v_next_xid  bigint;
    v_count     integer;
    v_ids       bigint[];
    v_digests   bytea;
    v_last_x    bigint;
    v_decided   timestamptz;
    v_new_hash  bytea;
    v_rows      bigint := 0;
    v_seals     integer := 0;
BEGIN
    IF p_batch_rows IS NULL OR p_batch_rows < 1 THEN
        RAISE EXCEPTION 'memgov: p_batch_rows must be at least 1, not %', coalesce(p_batch_rows::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- one sealer or archiver at a time; clients may only read the seals, so none can hold
    -- a lock that conflicts with this one
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    -- where the chain ends, else nowhere yet
    SELECT e.seal_id, e.xact_id, e.decision_id, e.hash
      INTO v_seal_id, v_after_x, v_after_d, v_hash
      FROM memgov.chain_end() AS e;
    IF v_seal_id IS NULL THEN
        v_seal_id := 0;
        v_after_x := 0;
        v_after_d := 0;
        v_hash := decode(repeat('00', 32), 'hex');
    END IF;
    -- the horizon, from a snapshot taken now: the rows read below are read with a snapshot no
    -- older than it, so every row of a transaction below the horizon is there to be sealed
    SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
      INTO v_horizon, v_next_xid
      FROM pg_current_snapshot() AS s;
    IF v_after_x >= v_next_xid THEN
        -- the chain ends in a transaction this cluster has not reached: a logical copy of the
        -- database into another cluster (docs/security.md: restoring a sealed log)
        RAISE WARNING 'memgov: the decision log''s last seal ends at transaction %, ahead of this cluster''s next transaction %; nothing sealed',
                      v_after_x, v_next_xid
            USING ERRCODE = 'MG409',
                  HINT = 'a restored copy must start its transaction counter past the chain: see docs/security.md';
        v_horizon := 0;
    END IF;
    LOOP
        SELECT count(*)::integer,
               array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
               string_agg(memgov.decision_digest(b.d), ''::bytea ORDER BY b.xact_id, b.decision_id),
               max(b.xact_id),
               max(b.decided_at)
          INTO v_count, v_ids, v_digests, v_last_x, v_decided
          -- the digests are taken of the batch only, after the LIMIT (in the subquery's
          -- target list they would be computed for every remaining row, once per batch)
          FROM (SELECT d.xact_id, d.decision_id, d.decided_at, d
                  FROM memgov.decision_log d
                 WHERE d.xact_id >= v_after_x AND d.xact_id < v_horizon
                   AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
                 ORDER BY d.xact_id, d.decision_id
                 LIMIT p_batch_rows) AS b;
        EXIT WHEN v_count = 0;
        v_seal_id := v_seal_id + 1;
        v_new_hash := memgov.seal_hash(v_hash, v_seal_id, v_after_x, v_after_d, v_last_x, v_ids[v_count],
                                       v_ids, v_digests);
        INSERT INTO memgov.decision_log_seals
               (seal_id, sealed_by, horizon_xact_id, after_xact_id, after_decision_id, last_xact_id,
                last_decision_id, row_count, decision_ids, row_digests, last_decided_at, prev_hash, seal_hash)
        VALUES (v_seal_id, memgov.invoker_role(), v_horizon, v_after_x, v_after_d, v_last_x,
                v_ids[v_count], v_count, v_ids, v_digests, v_decided, v_hash, v_new_hash);
        v_hash := v_new_hash;
        v_after_x := v_last_x;
        v_after_d := v_ids[v_count];
        v_rows := v_rows + v_count;
        v_seals := v_seals + 1;
        EXIT WHEN v_count < p_batch_rows;
    END LOOP;
    -- the run's summary, when the caller is that run (it holds the maintenance lease)
    IF p_run_id IS NOT NULL THEN
        UPDATE memgov.maintenance_runs
           SET summary = summary || jsonb_build_object('sealed', v_rows)
         WHERE org_id = '*' AND run_id = p_run_id AND status = 'running'
           AND memgov.maintenance_holder() = pg_backend_pid();
    END IF;
    RETURN jsonb_build_object('sealed', v_rows, 'seals', v_seals, 'last_seal_id', nullif(v_seal_id, 0),
                              'last_hash', CASE WHEN v_seal_id > 0 THEN encode(v_hash, 'hex') END,
                              'horizon_xact_id', v_horizon);
END
$$;

-- Recomputes the chain: every seal in sequence, continuing the previous one (or the last
-- archive), its hash its own, its rows exactly the rows now in its range with the digests
-- it recorded; no row left before the chain's start, none after its end that the last
-- seal should have covered. Returns
--   {"ok", "seals", "rows", "first_break": {"seal_id", "decision_id", "problem", "detail"} | null,
--    "last_seal_id", "last_hash", "unsealed_rows", "archived": {...}, "anchor": ...}
-- problem: 'altered' (the row, or with decision_id null the seal, differs from what was
-- sealed), 'missing' (a sealed row or seal is gone), 'extra' (a row no seal accounts for).
-- p_anchor_seal_id / p_anchor_hash: a seal's hash kept outside the database; a different
-- hash there is a break (the chain was rewritten).
CREATE FUNCTION memgov.verify_decision_log(p_anchor_seal_id bigint DEFAULT NULL, p_anchor_hash text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE  -- one snapshot for every statement: seals and rows as of one moment
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_archive     memgov.decision_log_archives;
    v_seal        memgov.decision_log_seals;
    v_hash        bytea := decode(repeat('00', 32), 'hex');
    v_next_seal   bigint := 1;
    v_after_x     bigint := 0;
    v_after_d     bigint := 0;
    v_horizon     bigint := 0;
    v_next_xid    bigint := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    v_break       jsonb;
    v_anchor      text;
    v_seals       bigint := 0;
    v_rows        bigint := 0;
    v_archives    integer := 0;
    v_arch_seals  bigint := 0;
    v_arch_rows   bigint := 0;
    v_ids         bigint[];
    v_digests     bytea;
    v_stored      bigint;
    v_actual      bigint;
    v_id          bigint;
    v_last_id     bigint;
    v_last_hash   bytea;
    v_end_x       bigint;
    v_end_d       bigint;
    v_unsealed    bigint;
BEGIN
    IF (p_anchor_seal_id IS NULL) <> (p_anchor_hash IS NULL)
       OR (p_anchor_hash IS NOT NULL AND p_anchor_hash !~ '^[0-9A-Fa-f]{64}$') THEN
        RAISE EXCEPTION 'memgov: an anchor is a seal id and that seal''s 64-digit hex hash'
            USING ERRCODE = '22023';
    END IF;
    v_anchor := CASE WHEN p_anchor_seal_id IS NOT NULL THEN 'not reached' END;

    -- the archives: each continues the previous one; the chain goes on from the last
    FOR v_archive IN SELECT * FROM memgov.decision_log_archives a ORDER BY a.archive_id LOOP
        IF v_archive.archive_id <> v_archives + 1 OR v_archive.first_seal_id <> v_next_seal THEN
            v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                'detail', format('archive record %s does not continue the chain at seal %s',
                                 v_archive.archive_id, v_next_seal));
            EXIT;
        END IF;
        IF p_anchor_seal_id BETWEEN v_archive.first_seal_id AND v_archive.last_seal_id THEN
            IF p_anchor_seal_id = v_archive.last_seal_id THEN
                IF v_archive.last_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL,
                        'problem', 'altered', 'detail', format(
                            'archived seal %s has a different hash than its anchor: the chain was rewritten',
                            p_anchor_seal_id));
                    EXIT;
                END IF;
                v_anchor := 'matched';
            ELSE
                v_anchor := 'archived';  -- its hash went with its rows
            END IF;
        END IF;
        v_archives := v_archives + 1;
        v_arch_seals := v_arch_seals + (v_archive.last_seal_id - v_archive.first_seal_id + 1);
        v_arch_rows := v_arch_rows + v_archive.row_count;
        v_next_seal := v_archive.last_seal_id + 1;
        v_hash := v_archive.last_hash;
        v_after_x := v_archive.last_xact_id;
        v_after_d := v_archive.last_decision_id;
    END LOOP;

    -- nothing left of what was archived
    IF v_break IS NULL AND v_archives > 0 THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id <= v_after_x AND (d.xact_id, d.decision_id) <= (v_after_x, v_after_d)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row lies in the archived part of the log');
        END IF;
    END IF;

    -- the seals, in sequence
    IF v_break IS NULL THEN
        FOR v_seal IN SELECT * FROM memgov.decision_log_seals s ORDER BY s.seal_id LOOP
            IF v_seal.seal_id <> v_next_seal THEN
                v_break := jsonb_build_object('seal_id', v_next_seal, 'decision_id', NULL, 'problem', 'missing',
                    'detail', format('seal %s is gone', v_next_seal));
                EXIT;
            END IF;
            IF v_seal.prev_hash <> v_hash
               OR (v_seal.after_xact_id, v_seal.after_decision_id) <> (v_after_x, v_after_d) THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal does not continue the previous one');
                EXIT;
            END IF;
            IF coalesce(array_length(v_seal.decision_ids, 1), 0) <> v_seal.row_count
               OR length(v_seal.row_digests) <> 32 * v_seal.row_count
               OR v_seal.decision_ids[v_seal.row_count] <> v_seal.last_decision_id
               OR memgov.seal_hash(v_seal.prev_hash, v_seal.seal_id, v_seal.after_xact_id,
                                   v_seal.after_decision_id, v_seal.last_xact_id, v_seal.last_decision_id,
                                   v_seal.decision_ids, v_seal.row_digests) <> v_seal.seal_hash THEN
                v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                    'detail', 'the seal record was altered');
                EXIT;
            END IF;
            IF v_seal.seal_id = p_anchor_seal_id THEN
                IF v_seal.seal_hash <> decode(lower(p_anchor_hash), 'hex') THEN
                    v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL, 'problem', 'altered',
                        'detail', 'the seal''s hash differs from its anchor: the chain was rewritten');
                    EXIT;
                END IF;
                v_anchor := 'matched';
            END IF;
            -- its rows as they are now, in the seal's order
            SELECT array_agg(b.decision_id ORDER BY b.xact_id, b.decision_id),
                   string_agg(b.digest, ''::bytea ORDER BY b.xact_id, b.decision_id)
              INTO v_ids, v_digests
              FROM (SELECT d.xact_id, d.decision_id, memgov.decision_digest(d) AS digest
                      FROM memgov.decision_log d
                     WHERE d.xact_id >= v_seal.after_xact_id AND d.xact_id <= v_seal.last_xact_id
                       AND (d.xact_id, d.decision_id) > (v_seal.after_xact_id, v_seal.after_decision_id)
                       AND (d.xact_id, d.decision_id) <= (v_seal.last_xact_id, v_seal.last_decision_id)) AS b;
            IF v_ids IS DISTINCT FROM v_seal.decision_ids OR v_digests IS DISTINCT FROM v_seal.row_digests THEN
                -- the first position where they part
                FOR v_i IN 1 .. greatest(v_seal.row_count, coalesce(array_length(v_ids, 1), 0)) LOOP
                    v_stored := v_seal.decision_ids[v_i];
                    v_actual := v_ids[v_i];
                    IF v_stored IS NOT DISTINCT FROM v_actual THEN
                        CONTINUE WHEN substring(v_seal.row_digests FROM (v_i - 1) * 32 + 1 FOR 32)
                                      = substring(v_digests FROM (v_i - 1) * 32 + 1 FOR 32);
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    ELSIF v_stored IS NOT NULL AND NOT (v_stored = ANY (coalesce(v_ids, '{}'))) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'missing', 'detail', 'a sealed row is gone');
                    ELSIF v_actual IS NOT NULL AND NOT (v_actual = ANY (v_seal.decision_ids)) THEN
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_actual,
                            'problem', 'extra', 'detail', 'a row the seal does not account for');
                    ELSE
                        -- both ids are there, in another order: the row's xact_id was changed
                        v_break := jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', v_stored,
                            'problem', 'altered', 'detail', 'the row differs from what was sealed');
                    END IF;
                    EXIT;
                END LOOP;
                v_break := coalesce(v_break, jsonb_build_object('seal_id', v_seal.seal_id, 'decision_id', NULL,
                    'problem', 'altered', 'detail', 'the rows differ from what was sealed'));
                EXIT;
            END IF;
            v_seals := v_seals + 1;
            v_rows := v_rows + v_seal.row_count;
            v_next_seal := v_seal.seal_id + 1;
            v_hash := v_seal.seal_hash;
            v_after_x := v_seal.last_xact_id;
            v_after_d := v_seal.last_decision_id;
            v_horizon := v_seal.horizon_xact_id;
        END LOOP;
    END IF;

    -- an anchor beyond the chain: the chain was cut back
    IF v_break IS NULL AND v_anchor = 'not reached' THEN
        v_break := jsonb_build_object('seal_id', p_anchor_seal_id, 'decision_id', NULL, 'problem', 'missing',
            'detail', format('the anchored seal %s is gone: the chain was cut back', p_anchor_seal_id));
    END IF;

    -- after the chain: rows not sealed yet, unless the last seal would have covered them (their
    -- transaction had ended before its horizon) or their transaction has not even begun
    IF v_break IS NULL THEN
        SELECT d.decision_id INTO v_id
          FROM memgov.decision_log d
         WHERE d.xact_id >= v_after_x AND (d.xact_id, d.decision_id) > (v_after_x, v_after_d)
           AND (d.xact_id < v_horizon OR d.xact_id >= v_next_xid)
         ORDER BY d.xact_id, d.decision_id
         LIMIT 1;
        IF FOUND THEN
            v_break := jsonb_build_object('seal_id', NULL, 'decision_id', v_id, 'problem', 'extra',
                'detail', 'a row after the last seal that its transaction id places before it');
        END IF;
    END IF;

    -- the chain's end as recorded (what to anchor), and what lies after it
    SELECT e.seal_id, e.hash, e.xact_id, e.decision_id
      INTO v_last_id, v_last_hash, v_end_x, v_end_d
      FROM memgov.chain_end() AS e;
    SELECT count(*) INTO v_unsealed
      FROM memgov.decision_log d
     WHERE d.xact_id >= coalesce(v_end_x, 0)
       AND (d.xact_id, d.decision_id) > (coalesce(v_end_x, 0), coalesce(v_end_d, 0));

    RETURN jsonb_build_object(
        'ok', v_break IS NULL,
        'seals', v_seals,
        'rows', v_rows,
        'first_break', v_break,
        'last_seal_id', v_last_id,
        'last_hash', encode(v_last_hash, 'hex'),
        'unsealed_rows', v_unsealed,
        'archived', jsonb_build_object('archives', v_archives, 'seals', v_arch_seals, 'rows', v_arch_rows),
        'anchor', v_anchor);
END
$$;

-- Removes from the log the sealed rows decided before p_before: whole seals, the oldest first,
-- while every row of a seal was decided before it. Refuses (MG409) when the log does not
-- verify: archival never erases the evidence of a break. Records what it removed in
-- memgov.decision_log_archives; verification goes on from there. Export the rows first.
CREATE FUNCTION memgov.archive_decision_log(p_before timestamptz)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_report    jsonb;
    v_first     bigint;
    v_last      memgov.decision_log_seals;
    v_rows      bigint;
    v_archive   bigint;
    v_deleted   bigint;
BEGIN
    IF p_before IS NULL THEN
        RAISE EXCEPTION 'memgov: archive_decision_log needs a time: rows decided before it are archived'
            USING ERRCODE = '22023';
    END IF;
    -- no seal is made while we archive
    LOCK TABLE memgov.decision_log_seals IN SHARE ROW EXCLUSIVE MODE;
    v_report := memgov.verify_decision_log();
    IF NOT (v_report ->> 'ok')::boolean THEN
        RAISE EXCEPTION 'memgov: the decision log does not verify (%); nothing archived', v_report -> 'first_break'
            USING ERRCODE = 'MG409',
                  HINT = 'run memgov verify-log and find out what changed; archiving would erase the evidence';
    END IF;
    SELECT min(s.seal_id) INTO v_first FROM memgov.decision_log_seals s;
    -- the seals before the first one that holds a row decided at or after p_before
    SELECT * INTO v_last
      FROM memgov.decision_log_seals s
     WHERE s.seal_id < coalesce((SELECT min(o.seal_id) FROM memgov.decision_log_seals o
                                  WHERE o.last_decided_at >= p_before), s.seal_id + 1)
     ORDER BY s.seal_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('archived_rows', 0, 'archived_seals', 0, 'archive_id', NULL,
                                  'decided_before', p_before);
    END IF;
    SELECT sum(s.row_count) INTO v_rows FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    SELECT coalesce(max(a.archive_id), 0) + 1 INTO v_archive FROM memgov.decision_log_archives a;
    INSERT INTO memgov.decision_log_archives
           (archive_id, archived_by, decided_before, first_seal_id, last_seal_id, last_xact_id,
            last_decision_id, row_count, last_hash)
    VALUES (v_archive, memgov.invoker_role(), p_before, v_first, v_last.seal_id, v_last.last_xact_id,
            v_last.last_decision_id, v_rows, v_last.seal_hash);
    -- the guard triggers let this transaction delete what that record covers, and nothing else
    PERFORM set_config('memgov.archiving', v_archive::text, true);
    DELETE FROM memgov.decision_log d
     WHERE d.xact_id <= v_last.last_xact_id
       AND (d.xact_id, d.decision_id) <= (v_last.last_xact_id, v_last.last_decision_id);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM memgov.decision_log_seals s WHERE s.seal_id <= v_last.seal_id;
    PERFORM set_config('memgov.archiving', '', true);
    IF v_deleted <> v_rows THEN  -- cannot happen: the log verified a moment ago
        RAISE EXCEPTION 'memgov: archiving found % rows where the seals hold %; nothing archived', v_deleted, v_rows
            USING ERRCODE = 'MG409';
    END IF;
    RETURN jsonb_build_object('archive_id', v_archive, 'archived_rows', v_rows,
                              'archived_seals', v_last.seal_id - v_first + 1,
                              'first_seal_id', v_first, 'last_seal_id', v_last.seal_id,
                              'last_hash', encode(v_last.seal_hash, 'hex'), 'decided_before', p_before);
END
$$;

-- The chain is global, the log of every tenant: memgov_admin reads, seals, verifies, archives.
REVOKE EXECUTE ON FUNCTION
    memgov.refuse_log_change(),
    memgov.chain_end(),
    memgov.decision_digest(memgov.decision_log),
    memgov.seal_hash(bytea, bigint, bigint, bigint, bigint, bigint, bigint[], bytea),
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    memgov.seal_decision_log(integer, bigint),
    memgov.verify_decision_log(bigint, text),
    memgov.archive_decision_log(timestamptz)
    TO memgov_admin;
GRANT SELECT ON memgov.decision_log_seals, memgov.decision_log_archives TO memgov_admin;

RESET ROLE;

-- migrate:downgrade
-- Roles are cluster-wide and may serve other databases: they are kept.
DROP SCHEMA memgov CASCADE;
ALTER DEFAULT PRIVILEGES FOR ROLE memgov_owner GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
