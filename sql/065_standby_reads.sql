-- memgov: governed reads on a hot standby, logged on the primary (docs/operations.md,
-- "Reads on a standby").
--
-- A standby writes nothing, not even a temporary row, and every transaction on it is read
-- only: PostgreSQL refuses there any change of a table, a foreign table's included. So
-- memgov.search and memgov.get on a standby decide as on the primary (with the policy the
-- standby has replayed) and hand their log row to the primary, through dblink (contrib):
-- a call the standby only reads, whose remote side writes. The primary logs the read (and
-- files a held or quarantined one) in memgov.log_standby_read, then the standby returns
-- its rows: a read is never returned unlogged, and when the primary cannot be reached the
-- read fails (MG503) rather than go unlogged.
--
-- Who may write log rows this way: the primary trusts a read only if it is sealed with the
-- database's secret (memgov.channel_secret, readable by memgov_owner alone), which only
-- memgov's own functions on a standby of this very database compute. The login that the
-- standby's user mapping holds (a member of memgov_standby_logger, which may execute
-- memgov.log_standby_read and nothing else) carries reads; it cannot make one. Each read is
-- logged once (its nonce), within five minutes of being sent, for a login that exists and
-- may act as the read's role in its tenant.
--
-- Set up on the primary by a superuser (memgov.setup_standby_logger, or `memgov
-- standby-logger setup`): dblink in a schema of its own that only memgov_owner may use, the
-- foreign server memgov_primary, the login and memgov_owner's user mapping. All of it is in
-- the catalogs and replicates to every standby.
--
-- SQLSTATEs: MG503 the primary cannot be reached (a standby's read is refused); 42501 a read
-- the primary does not trust (a seal that does not match, a replay, a stale read, a login
-- or role that may not read there); 25006 the setup run on a standby.

SET ROLE memgov_owner;

-- The reads a standby had logged in the last minutes, by their nonce: a read is logged
-- once. Rows older than the window are pruned by the next read (its sent_at check refuses
-- them anyway).
CREATE TABLE memgov.standby_reads (
    nonce        uuid        PRIMARY KEY,
    received_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE memgov.standby_reads IS
    'Reads logged for a standby in the last ten minutes, by nonce: each is logged once (memgov.log_standby_read)';
CREATE INDEX standby_reads_received_at_idx ON memgov.standby_reads (received_at);

-- The seal of a standby's read: sha256 of the database's secret and of the read's hash, so
-- that only memgov's functions (which alone read the secret) can make one, and no suffix
-- can be appended to a sealed read.
CREATE FUNCTION memgov.standby_read_seal(p_read jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.encode(pg_catalog.sha256(
               pg_catalog.convert_to(s.secret, 'UTF8')
               || pg_catalog.sha256(pg_catalog.convert_to('memgov-standby-read:' || p_read::text, 'UTF8'))), 'hex')
      FROM memgov.channel_secret s
$$;

-- The schema dblink is installed in (NULL: not installed).
CREATE FUNCTION memgov.dblink_schema()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT e.extnamespace::regnamespace::text FROM pg_catalog.pg_extension e WHERE e.extname = 'dblink'
$$;

-- Whether this database can send reads to the primary: dblink is installed and the foreign
-- server memgov_primary exists (memgov.setup_standby_logger made both).
CREATE FUNCTION memgov.standby_logger_ready()
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'dblink')
       AND EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary')
$$;

-- On a standby: has the primary log a read (memgov.govern's arguments) and file it when it
-- is held or quarantined; returns the ids of what the primary wrote. The session keeps its
-- connection to the primary (named memgov_primary); a connection the primary dropped is
-- opened again once. The primary unreachable: MG503. (No SET clause: memgov.govern's
-- callers pin search_path.)
CREATE FUNCTION memgov.log_read_on_primary(
    p_operation    text,
    p_item         memgov.long_term_memory_items,
    p_actor        text,
    p_decision     memgov.decision,
    p_payload      jsonb,
    p_file         boolean,
    p_fingerprint  text,
    p_returned     integer,
    p_withheld     integer)
RETURNS memgov.write_outcome
LANGUAGE plpgsql
AS $$
DECLARE
    v_dblink   text := memgov.dblink_schema();
    v_read     jsonb;
    v_call     text;
    v_answer   jsonb;
    v_cached   boolean;
    v_error    text;
    v_outcome  memgov.write_outcome;
BEGIN
    v_read := jsonb_build_object(
        'operation', p_operation, 'org_id', p_item.org_id, 'memory_id', p_item.memory_id,
        'actor', p_actor, 'login', session_user::text, 'decision', to_jsonb(p_decision),
        'payload', p_payload, 'file', p_file, 'fingerprint', p_fingerprint,
        'returned', p_returned, 'withheld', p_withheld,
        'nonce', gen_random_uuid(), 'sent_at', clock_timestamp());
    v_call := format('SELECT memgov.log_standby_read(%L::jsonb)',
                     jsonb_build_object('read', v_read, 'seal', memgov.standby_read_seal(v_read)));
    LOOP
        BEGIN
            EXECUTE format('SELECT coalesce(%L = ANY (%I.dblink_get_connections()), false)', 'memgov_primary', v_dblink)
                INTO v_cached;
            IF NOT v_cached THEN
                EXECUTE format('SELECT %I.dblink_connect(%L, %L)', v_dblink, 'memgov_primary', 'memgov_primary');
            END IF;
            EXECUTE format('SELECT t.r FROM %I.dblink(%L, %L) AS t(r jsonb)', v_dblink, 'memgov_primary', v_call)
                INTO v_answer;
            EXIT;
        EXCEPTION WHEN connection_exception THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
            BEGIN
                EXECUTE format('SELECT %I.dblink_disconnect(%L)', v_dblink, 'memgov_primary');
            EXCEPTION WHEN OTHERS THEN
                NULL;  -- not open
            END;
            IF NOT v_cached THEN
                RAISE EXCEPTION 'memgov: % on a standby is logged on the primary, which cannot be reached: %',
                                p_operation, pg_catalog.rtrim(v_error, E'\n')
                    USING ERRCODE = 'MG503',
                          DETAIL = 'nothing was returned: a governed read is never returned unlogged',
                          HINT = 'start the primary or repair the connection to it (the foreign server memgov_primary; '
                                 'after a failover run memgov standby-logger setup on the new primary), or send the '
                                 'read to the primary (docs/operations.md, "Reads on a standby")';
            END IF;
            -- a connection the primary dropped since this session's last read: once more, anew
        END;
    END LOOP;
    v_outcome.decision_id := (v_answer ->> 'decision_id')::bigint;
    v_outcome.request_id := (v_answer ->> 'request_id')::uuid;
    v_outcome.quarantine_id := (v_answer ->> 'quarantine_id')::uuid;
    RETURN v_outcome;
END
$$;

-- On the primary: logs a read a standby sends (memgov.log_read_on_primary), after checking
-- that memgov on a standby of this database sealed it (memgov.standby_read_seal), that it
-- is fresh and new, and that its login may read as its role in its tenant; then it goes
-- through memgov.govern as a read on the primary does (a held or quarantined read is
-- filed). Returns the ids of what was written. Only memgov_standby_logger may call it.
CREATE FUNCTION memgov.log_standby_read(p_request jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_read       jsonb := p_request -> 'read';
    v_operation  text := v_read ->> 'operation';
    v_org_id     text := v_read ->> 'org_id';
    v_login      text := v_read ->> 'login';
    v_actor      text := v_read ->> 'actor';
    v_sent_at    timestamptz;
    v_decision   memgov.decision;
    v_item       memgov.long_term_memory_items;
    v_outcome    memgov.write_outcome;
BEGIN
    IF jsonb_typeof(v_read) IS DISTINCT FROM 'object'
       OR (p_request ->> 'seal') IS DISTINCT FROM memgov.standby_read_seal(v_read) THEN
        RAISE EXCEPTION 'memgov: not a read of a standby of this database: its seal does not match'
            USING ERRCODE = '42501',
                  HINT = 'only memgov.search and memgov.get on a standby send reads to log';
    END IF;
    -- sealed: memgov made it, on this database or a physical copy of it. Fresh and new:
    v_sent_at := (v_read ->> 'sent_at')::timestamptz;
    IF v_sent_at NOT BETWEEN clock_timestamp() - interval '5 minutes' AND clock_timestamp() + interval '5 minutes' THEN
        RAISE EXCEPTION 'memgov: a standby''s read sent at % is not logged: it is more than five minutes away', v_sent_at
            USING ERRCODE = '42501',
                  HINT = 'a read is logged within five minutes of being sent: check the clocks of primary and standby';
    END IF;
    DELETE FROM memgov.standby_reads r WHERE r.received_at < clock_timestamp() - interval '10 minutes';
    INSERT INTO memgov.standby_reads (nonce) VALUES ((v_read ->> 'nonce')::uuid) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memgov: this standby read (nonce %) is logged already', v_read ->> 'nonce'
            USING ERRCODE = '42501', HINT = 'each read is logged once';
    END IF;
    -- what a standby of a copy of this database could claim: a login and role of this cluster
    IF v_operation IS DISTINCT FROM 'search' AND v_operation IS DISTINCT FROM 'get'
       OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = v_login AND r.rolcanlogin)
       OR to_regrole(quote_ident(v_actor)) IS NULL
       OR NOT pg_catalog.pg_has_role(v_login, v_actor, 'MEMBER')
       OR NOT (pg_catalog.pg_has_role(v_actor, 'memgov_writer', 'MEMBER')
               OR pg_catalog.pg_has_role(v_actor, 'memgov_reviewer', 'MEMBER')
               OR pg_catalog.pg_has_role(v_actor, 'memgov_admin', 'MEMBER')) THEN
        RAISE EXCEPTION 'memgov: a standby''s % as % (login %) is not a read that role may make here',
                        v_operation, v_actor, v_login
            USING ERRCODE = '42501', HINT = 'the login must exist on the primary and be a member of the role';
    END IF;
    PERFORM memgov.check_tenant_id(v_org_id);
    IF memgov.binding_on() AND NOT pg_catalog.pg_has_role(v_actor, 'memgov_admin', 'MEMBER')
       AND NOT EXISTS (SELECT FROM memgov.tenant_grants g
                        WHERE g.org_id = v_org_id
                          AND coalesce(pg_catalog.pg_has_role(v_login, to_regrole(quote_ident(g.role_name)), 'MEMBER'),
                                       false)) THEN
        RAISE EXCEPTION 'memgov: login % is not bound to tenant %', v_login, v_org_id
            USING ERRCODE = '42501',
                  HINT = 'an administrator binds logins to tenants: memgov tenant grant ROLE ORG';
    END IF;
    v_decision := jsonb_populate_record(NULL::memgov.decision, v_read -> 'decision');
    v_item := memgov.item_from_json(jsonb_build_object('org_id', v_org_id, 'memory_id', v_read -> 'memory_id'));
    v_outcome := memgov.govern(v_operation, v_item, v_actor, v_decision, NULL::memgov.shadow_verdict,
                               p_payload => v_read -> 'payload',
                               p_file => coalesce((v_read ->> 'file')::boolean, true),
                               p_raise => false,
                               p_fingerprint => v_read ->> 'fingerprint',
                               p_returned => (v_read ->> 'returned')::integer,
                               p_withheld => (v_read ->> 'withheld')::integer,
                               p_login => v_login);
    RETURN jsonb_build_object('decision_id', v_outcome.decision_id, 'request_id', v_outcome.request_id,
                              'quarantine_id', v_outcome.quarantine_id);
END
$$;

-- Sets up the standby logger, on the primary, as a superuser (`memgov standby-logger
-- setup`): dblink (in the schema memgov_dblink, which only memgov_owner may use, unless it
-- is installed already where PUBLIC may not call it), the foreign server memgov_primary at
-- the primary's address as the standbys reach it, the login p_login (created, or its
-- password set: a member of memgov_standby_logger and of nothing else), and memgov_owner's
-- user mapping with that login's password. Run again to move it (a new primary, a new
-- password). The primary's pg_hba.conf must ask that login for a password (scram-sha-256):
-- dblink refuses a connection without one for memgov_owner.
CREATE FUNCTION memgov.setup_standby_logger(
    p_host text, p_port integer, p_dbname text, p_login text, p_password text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dblink  text := memgov.dblink_schema();
    v_other   text;
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) THEN
        RAISE EXCEPTION 'memgov: the standby logger is set up by a superuser'
            USING ERRCODE = '42501';
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'memgov: the standby logger is set up on the primary: this server is a standby'
            USING ERRCODE = '25006', HINT = 'run it on the primary; it replicates to every standby';
    END IF;
    IF coalesce(p_password, '') = '' OR p_host IS NULL OR p_dbname IS NULL OR p_login IS NULL THEN
        RAISE EXCEPTION 'memgov: the standby logger needs the primary''s host and database, a login and a password'
            USING ERRCODE = '22023';
    END IF;
    IF v_dblink IS NULL THEN
        CREATE SCHEMA memgov_dblink;
        REVOKE ALL ON SCHEMA memgov_dblink FROM PUBLIC;
        CREATE EXTENSION dblink SCHEMA memgov_dblink;
        REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA memgov_dblink FROM PUBLIC;
        v_dblink := 'memgov_dblink';
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace = v_dblink::regnamespace
                     AND (p.proacl IS NULL
                          OR EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0))) THEN
        -- a client that may call dblink could use the connection memgov keeps open in its session
        RAISE EXCEPTION 'memgov: dblink is installed in schema % and every role may call it', v_dblink
            USING ERRCODE = '42501',
                  HINT = pg_catalog.format('REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC (and grant it to '
                                           'the roles that need it), then run this again', v_dblink);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO memgov_owner', v_dblink);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO memgov_owner', v_dblink);

    -- the login: memgov_standby_logger's alone
    IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = p_login) THEN
        SELECT string_agg(g.rolname, ', ') INTO v_other
          FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
         WHERE m.member = to_regrole(quote_ident(p_login)) AND g.rolname <> 'memgov_standby_logger';
        IF v_other IS NOT NULL OR (SELECT r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls
                                     FROM pg_catalog.pg_roles r WHERE r.rolname = p_login) THEN
            RAISE EXCEPTION 'memgov: % may do more than log standby reads (%)', p_login,
                            coalesce('a member of ' || v_other, 'attributes')
                USING ERRCODE = '42501', HINT = 'give the standby logger a login of its own';
        END IF;
        EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', p_login, p_password);
    ELSE
        EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', p_login, p_password);
    END IF;
    EXECUTE format('GRANT memgov_standby_logger TO %I', p_login);

    -- the server and memgov_owner's way in (a new setup replaces the old one)
    DROP SERVER IF EXISTS memgov_primary CASCADE;
    EXECUTE format('CREATE SERVER memgov_primary FOREIGN DATA WRAPPER dblink_fdw OPTIONS (host %L, port %L, dbname %L)',
                   p_host, coalesce(p_port, 5432)::text, p_dbname);
    GRANT USAGE ON FOREIGN SERVER memgov_primary TO memgov_owner;
    EXECUTE format('CREATE USER MAPPING FOR memgov_owner SERVER memgov_primary OPTIONS (user %L, password %L)',
                   p_login, p_password);
    RETURN jsonb_build_object('server', 'memgov_primary', 'host', p_host, 'port', coalesce(p_port, 5432),
                              'dbname', p_dbname, 'login', p_login, 'dblink_schema', v_dblink);
END
$$;

-- Removes the standby logger's server and user mapping (the login and dblink stay):
-- standbys then refuse governed reads again (25006). Whether there was one.
CREATE FUNCTION memgov.remove_standby_logger()
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_found  boolean := EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary');
BEGIN
    DROP SERVER IF EXISTS memgov_primary CASCADE;
    RETURN v_found;
END
$$;

-- What `memgov doctor` asks of the standby logger: whether it is set up (the server
-- memgov_primary), where dblink is and whether PUBLIC may call it, whether memgov_owner has
-- its user mapping, and (set up) whether the primary answers as the logger's login and lets
-- it log reads: a connection of its own, closed at once, with the error when there is none.
-- SECURITY DEFINER: it connects as memgov_owner, whose user mapping it is (no password
-- or secret in what it returns); a superuser's and memgov_admin's.
CREATE FUNCTION memgov.standby_logger_status()
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dblink  text := memgov.dblink_schema();
    v_server  pg_catalog.pg_foreign_server;
    v_status  jsonb;
    v_may     boolean;
BEGIN
    SELECT * INTO v_server FROM pg_catalog.pg_foreign_server s WHERE s.srvname = 'memgov_primary';
    v_status := jsonb_build_object(
        'standby', pg_catalog.pg_is_in_recovery(),
        'configured', v_server.oid IS NOT NULL,
        'options', (SELECT jsonb_object_agg(o.option_name, o.option_value)
                      FROM pg_catalog.pg_options_to_table(v_server.srvoptions) AS o),
        'dblink_schema', v_dblink,
        'public_dblink', v_dblink IS NOT NULL AND EXISTS (
            SELECT FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = v_dblink::regnamespace
               AND (p.proacl IS NULL OR EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0))),
        'user_mapping', EXISTS (SELECT FROM pg_catalog.pg_user_mappings u
                                 WHERE u.srvname = 'memgov_primary' AND u.usename = 'memgov_owner'));
    IF v_server.oid IS NULL OR v_dblink IS NULL THEN
        RETURN v_status;
    END IF;
    BEGIN
        EXECUTE format('SELECT t.may FROM %I.dblink(%L, %L) AS t(may boolean)', v_dblink, 'memgov_primary',
                       'SELECT pg_catalog.has_function_privilege(''memgov.log_standby_read(jsonb)'', ''EXECUTE'')')
            INTO v_may;
        RETURN v_status || jsonb_build_object('reachable', true, 'may_log', v_may);
    EXCEPTION WHEN OTHERS THEN
        RETURN v_status || jsonb_build_object('reachable', false, 'error', pg_catalog.rtrim(SQLERRM, E'\n'));
    END;
END
$$;

-- Privileges: the standby logger's login calls memgov.log_standby_read, and nothing else;
-- memgov_admin may ask for the status (memgov doctor); the setup is a superuser's.
GRANT EXECUTE ON FUNCTION memgov.log_standby_read(jsonb) TO memgov_standby_logger;
GRANT USAGE ON SCHEMA memgov TO memgov_standby_logger;
GRANT EXECUTE ON FUNCTION memgov.standby_logger_status() TO memgov_admin;

RESET ROLE;
