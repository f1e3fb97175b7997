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
-- Row security asks it of every statement a client runs (memgov.session_tenant). The
-- length is counted apart from the pattern: PostgreSQL's regex engine takes 20k
-- instructions to match '{0,62}' against a short id, 3k for '*'.
-- (No SET clause, so that it is inlined; operators and functions are schema-qualified instead.)
CREATE FUNCTION memgov.is_tenant_id(p_org_id text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_org_id OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
                    AND pg_catalog.length(p_org_id) OPERATOR(pg_catalog.<=) 63, false)
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

-- A secret of each session: the currval of a sequence that no client may read or advance,
-- set at random on the session's first use (memgov.session_key()). What memgov marks in
-- settings a client can read and set (its own writes, a statement's shared decisions) it
-- seals with it.
CREATE SEQUENCE memgov.session_key AS bigint MINVALUE -9223372036854775808;
COMMENT ON SEQUENCE memgov.session_key IS 'Per session (currval), a secret of memgov''s: read and set by memgov only';

-- This session's secret (memgov.session_key's currval), a new random one on the session's
-- first use (memgov.session_keyed says there was one: a client that sets it in a fresh
-- session only makes its own statement fail on currval).
CREATE FUNCTION memgov.session_key()
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    IF pg_catalog.current_setting('memgov.session_keyed', true) = 'on' THEN
        RETURN pg_catalog.currval('memgov.session_key');
    END IF;
    PERFORM pg_catalog.set_config('memgov.session_keyed', 'on', false);
    RETURN pg_catalog.setval('memgov.session_key',
                             (pg_catalog.floor(pg_catalog.random() * 18446744073709551615::numeric)
                              - 9223372036854775808::numeric)::bigint);
END
$$;

-- memgov's own writes ---------------------------------------------------------------------
--
-- memgov's functions decide before they write (approve, confirm, reject, edit, a deploy's
-- re-indexing) and write as memgov_owner; the write trigger must then keep only the derived
-- columns. A trigger's WHEN clause could tell them apart by current_user, but PostgreSQL
-- prepares it anew for every statement (25k instructions of every single-row write, twice
-- with the two triggers it took). So such a function marks its writes: right before them
-- memgov.engine_writes() sets memgov.engine_write to memgov.engine_token(), a hash of the
-- transaction under the session's key that no client can compute, and right after them
-- memgov.engine_writes_done() clears it (an error in between rolls it back with the rest;
-- tests/db/test_attacks.py checks that no memgov function leaves it set). A session acting
-- as memgov_owner itself (a superuser's SET ROLE) writes as the engine too.

-- The mark of memgov's own writes in this transaction.
CREATE FUNCTION memgov.engine_token()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.hashtextextended('memgov engine write ' || pg_catalog.txid_current(),
                                       pg_catalog.currval('memgov.session_key'))::text
$$;

-- Whether p_mark is this transaction's mark of memgov's own writes (a session without a
-- key has none: whatever a client set is not).
CREATE FUNCTION memgov.is_engine_write(p_mark text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN p_mark = memgov.engine_token();
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN false;
END
$$;

-- Marks what the calling memgov function writes next as memgov's own.
CREATE FUNCTION memgov.engine_writes()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM memgov.session_key();
    PERFORM pg_catalog.set_config('memgov.engine_write', memgov.engine_token(), true);
END
$$;

-- Ends the mark of memgov.engine_writes().
CREATE FUNCTION memgov.engine_writes_done()
RETURNS void
LANGUAGE sql
BEGIN ATOMIC
    SELECT pg_catalog.set_config('memgov.engine_write', '', true);
END;

RESET ROLE;
