-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

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

RESET ROLE;
-- generated routines: end

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
SET ROLE memgov_owner;

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

RESET ROLE;
-- generated routines: end
