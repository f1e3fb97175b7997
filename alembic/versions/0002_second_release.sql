-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- memgov_settings_reader: owns memgov.cron_settings() alone, and reads pg_cron's
-- superuser-only settings for it (sql/000_roles.sql, sql/070_retention.sql)
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'memgov_settings_reader') THEN
        CREATE ROLE memgov_settings_reader NOLOGIN;
    END IF;
EXCEPTION
    -- a concurrent migration of another database created it first
    WHEN duplicate_object THEN NULL;
END
$roles$;
GRANT pg_read_all_settings TO memgov_settings_reader;

-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

GRANT EXECUTE ON FUNCTION memgov.retention_interval(text,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.activate_policy(p_org_id text, p_version text, p_revision boolean DEFAULT false)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    -- the history memgov.undeploy_policy reads: a change of the active version, and every
    -- deploy of a policy revision (one of the version active already undoes to that version)
    IF v_previous IS DISTINCT FROM p_version OR p_revision THEN
        INSERT INTO memgov.policy_activations (org_id, version, previous_version)
        VALUES (p_org_id, p_version, v_previous);
    END IF;
    PERFORM memgov.rebuild_dispatch();
    RETURN p_version;
END
$function$;
GRANT EXECUTE ON FUNCTION memgov.activate_policy(text,text,boolean) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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

    INSERT INTO memgov.policy_activations (org_id, version, previous_version, undoes)
    VALUES (p_org_id, v_target, p_version, v_activation.activation_id);
    -- undoing a deploy of the version that was active already changes nothing else
    IF v_target IS DISTINCT FROM p_version THEN
        UPDATE memgov.policy_versions SET active = false WHERE org_id = p_org_id AND active;
        UPDATE memgov.policy_versions SET active = true WHERE org_id = p_org_id AND version = v_target;
        PERFORM memgov.rebuild_dispatch();
    END IF;
    RETURN v_target;
END
$function$;

CREATE OR REPLACE FUNCTION memgov.enforce_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
        -- changing the policy, never by changing the memory); and an update claims the stored
        -- row's source as well as the new row's (the sources: refusal of its forget): a writer
        -- cannot rewrite a system_rule memory by calling it agent_extracted
        v_forget := memgov.decide(OLD, 'forget', v_actor);
        IF memgov.shortens_life(OLD, NEW) OR (memgov.denied_by_rule(v_forget) AND NOT memgov.retention_held(NEW))
           OR (v_forget.reason_codes = ARRAY['SOURCE_NOT_PERMITTED'] AND cardinality(v_forget.matched_rule_ids) = 0) THEN
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
$function$;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_actor     text := memgov.check_reviewer(p_request.requested_login, p_request.requested_by);
    v_item      memgov.long_term_memory_items :=
                    jsonb_populate_record(NULL::memgov.long_term_memory_items, p_request.payload);
    v_row       memgov.long_term_memory_items;
    v_decision  memgov.decision;
    v_shadow    memgov.shadow_verdict;
    v_id        bigint;
    v_status    text;
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
        v_status := 'denied';
        PERFORM memgov.close_request(p_request, v_status, v_actor,
            format('refused on approval by policy %s: %s', v_decision.policy_version,
                   array_to_string(v_decision.reason_codes, ', ')));
    ELSE
        v_status := 'approved';
        PERFORM memgov.apply_write(p_request.operation, v_item, v_decision.policy_version, v_id, true);
        PERFORM memgov.close_request(p_request, v_status, v_actor, p_note);
    END IF;
    RETURN jsonb_build_object('request_id', p_request.request_id, 'status', v_status,
                              'memory_id', v_item.memory_id,
                              'decision', memgov.decision_json(v_decision) || jsonb_build_object(
                                  'action', CASE v_status WHEN 'approved' THEN 'allow' ELSE 'deny' END,
                                  'policy_action', v_decision.action, 'decision_id', v_id,
                                  'memory_id', v_item.memory_id, 'request_id', p_request.request_id));
END
$function$;

CREATE OR REPLACE FUNCTION memgov.search(query jsonb DEFAULT '{}'::jsonb)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    -- a word, or a min_confidence, per probe): only a role that reads the log is told, and
    -- everyone where reads are not governed (nothing is withheld: the count is always 0)
    PERFORM memgov.note_recall(memgov.decision_json(v_decision)
        || jsonb_build_object('decision_id', v_id, 'returned', v_returned,
                              'withheld', CASE WHEN NOT v_governed
                                                    OR pg_catalog.has_table_privilege(v_actor, 'memgov.decision_log', 'SELECT')
                                               THEN v_withheld END));
END
$function$;

GRANT EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) TO memgov_admin;

RESET ROLE;
CREATE OR REPLACE FUNCTION memgov.cron_settings(OUT cron_database text, OUT log_run text, OUT readable boolean)
 RETURNS record
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    -- a config file may still set cron.* after pg_cron left shared_preload_libraries: such a
    -- placeholder has context 'user'; pg_cron's own settings are 'postmaster' ones
    SELECT (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.database_name' AND s.context = 'postmaster'),
           (SELECT s.setting FROM pg_catalog.pg_settings s
             WHERE s.name = 'cron.log_run' AND s.context = 'postmaster'),
           pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')
$function$;
ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader;
REVOKE ALL ON FUNCTION memgov.cron_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO memgov_admin;
SET ROLE memgov_owner;

DROP FUNCTION memgov.activate_policy(text,text);

RESET ROLE;
-- generated routines: end

-- policy_activations also records a policy revision's deploy of the version active already
COMMENT ON TABLE memgov.policy_activations IS
    'Every change of the active policy version of an org_id (''*'' = global), and every deploy '
    'of a policy revision, in activation_id order';

-- A read claims no source: the sources: check of a decide function compiled by compiler 1
-- tested every operation, reads included. It is rewritten here into the check compiler 2
-- writes (memgov_pg/compiler.py SOURCE_CHECK_COMMENT, SOURCE_CHECK_TEST: remember, update and
-- forget only), in every deployed version and its compiled_sql, and memgov.decide, which
-- carries the global body, is generated anew. The check follows the routing marker, which a
-- body holds once, and no policy value spans lines: the two lines are found nowhere else.
SET ROLE memgov_owner;
DO $sources$
DECLARE
    v_old      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source\n'
                                 || '    IF p_item.source IN (';
    v_new      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source (writes only: a read claims none)\n'
                                 || '    IF p_operation IN (''remember'', ''update'', ''forget'') AND p_item.source IN (';
    v_version  record;
    v_body     text;
    v_changed  boolean := false;
BEGIN
    FOR v_version IN SELECT org_id, version, function_name FROM memgov.policy_versions ORDER BY org_id, version LOOP
        SELECT p.prosrc INTO v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = pg_catalog.to_regprocedure(
                   pg_catalog.format('memgov.%I(memgov.long_term_memory_items, text, text)', v_version.function_name));
        IF v_body IS NULL OR pg_catalog.strpos(v_body, v_old) = 0 THEN
            CONTINUE;
        END IF;
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION memgov.%I(p_item memgov.long_term_memory_items, '
                                  'p_operation text, p_actor text) RETURNS memgov.decision '
                                  'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                                  v_version.function_name, pg_catalog.replace(v_body, v_old, v_new));
        UPDATE memgov.policy_versions SET compiled_sql = pg_catalog.replace(compiled_sql, v_old, v_new)
         WHERE org_id = v_version.org_id AND version = v_version.version;
        v_changed := true;
    END LOOP;
    IF v_changed THEN
        PERFORM memgov.rebuild_dispatch();
    END IF;
END
$sources$;
RESET ROLE;

-- the schema says which revision it is at (0001_initial said none)
COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents (schema revision 0002_second_release)';

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

REVOKE EXECUTE ON FUNCTION memgov.retention_interval(text,text) FROM memgov_admin;

CREATE OR REPLACE FUNCTION memgov.activate_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
GRANT EXECUTE ON FUNCTION memgov.activate_policy(text,text) TO memgov_admin;

CREATE OR REPLACE FUNCTION memgov.undeploy_policy(p_org_id text, p_version text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.enforce_write()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.approve_request(p_request memgov.approval_requests, p_note text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION memgov.search(query jsonb DEFAULT '{}'::jsonb)
 RETURNS SETOF memgov.recalled
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

REVOKE EXECUTE ON FUNCTION memgov.approval_expired(memgov.approval_requests) FROM memgov_admin;

RESET ROLE;
DROP FUNCTION memgov.cron_settings();
SET ROLE memgov_owner;

DROP FUNCTION memgov.activate_policy(text,text,boolean);

RESET ROLE;
-- generated routines: end
-- memgov_settings_reader is kept: roles are cluster-wide and may serve other databases

COMMENT ON TABLE memgov.policy_activations IS
    'Every change of the active policy version of an org_id (''*'' = global), in activation_id order';

-- compiler 1's sources: check again, which tests reads too (the inverse of the upgrade's)
SET ROLE memgov_owner;
DO $sources$
DECLARE
    v_old      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source (writes only: a read claims none)\n'
                                 || '    IF p_operation IN (''remember'', ''update'', ''forget'') AND p_item.source IN (';
    v_new      constant text := E'\n    -- memgov:tenant-routing\n'
                                 || E'    -- sources: which roles may claim which fact source\n'
                                 || '    IF p_item.source IN (';
    v_version  record;
    v_body     text;
    v_changed  boolean := false;
BEGIN
    FOR v_version IN SELECT org_id, version, function_name FROM memgov.policy_versions ORDER BY org_id, version LOOP
        SELECT p.prosrc INTO v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = pg_catalog.to_regprocedure(
                   pg_catalog.format('memgov.%I(memgov.long_term_memory_items, text, text)', v_version.function_name));
        IF v_body IS NULL OR pg_catalog.strpos(v_body, v_old) = 0 THEN
            CONTINUE;
        END IF;
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION memgov.%I(p_item memgov.long_term_memory_items, '
                                  'p_operation text, p_actor text) RETURNS memgov.decision '
                                  'LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS %L',
                                  v_version.function_name, pg_catalog.replace(v_body, v_old, v_new));
        UPDATE memgov.policy_versions SET compiled_sql = pg_catalog.replace(compiled_sql, v_old, v_new)
         WHERE org_id = v_version.org_id AND version = v_version.version;
        v_changed := true;
    END LOOP;
    IF v_changed THEN
        PERFORM memgov.rebuild_dispatch();
    END IF;
END
$sources$;
RESET ROLE;

COMMENT ON SCHEMA memgov IS 'memgov-pg: governed long-term memory of AI agents';
