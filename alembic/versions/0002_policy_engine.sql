-- Detectors, risk scoring and the policy engine: compiled policies, dispatchers, deploy.
-- Frozen copy of sql/020_detectors.sql and sql/030_policy.sql as of this revision.

-- migrate:upgrade
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


-- Cheap necessary condition for PII: an '@' or a '+' before a digit, or 9+ digits joined by phone separators.
CREATE OR REPLACE FUNCTION memgov.pii_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Every match of memgov.pii_pattern() and memgov.card_pattern() also
-- matches this (tests/db/test_detectors.py checks it on the corpus). Few
-- character classes keep its DFA small: ordinary prose and ISO dates fail
-- it in well under a microsecond.
RETURN $re$(?x) @ | \+[0-9] | [0-9] (?:[ ().-]{0,2}[0-9]){8} $re$;


-- Regex for e-mail addresses, phone numbers and US SSNs; capture groups 1-3 name the kind.
CREATE OR REPLACE FUNCTION memgov.pii_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- "(?:^|[^0-9A-Za-z_.+-])" consumes the character before a number instead
-- of a lookbehind: PostgreSQL would test a leading lookbehind at every
-- position of the text. Validity checks sit at the end of each alternative,
-- where they run once per candidate.
RETURN $re$(?x)
  # 1 email: x@domain.tld -- not an SSH remote (git@github.com:...), the user
  #   info of a URL (https://user:token@host) nor a retina asset (logo@2x.png)
  ( [A-Za-z0-9._%+-] @ (?<!(?:^|[^A-Za-z0-9._%+-])git@) (?<!//[^ \t\n/@]*@) (?![0-9]+x\.)
    [A-Za-z0-9-]+ (?:\.[A-Za-z0-9-]+)* \.[A-Za-z]{2,} )
  # 2 phone
| ( # international: "+", country code, 8-15 digits in all, separated by
    # spaces, dots, dashes or parentheses: +1 (555) 123-4567,
    # +44 20 7946 0958, +380 50 123 45 67, +380501234567
    (?:^|[^0-9A-Za-z_+]) \+[1-9] (?:[ ().-]{0,2}[0-9]){7,14} (?![0-9]|[ ().-]{1,2}[0-9])
    # North American: (555) 123-4567, 555-123-4567, 555.123.4567, 1-800-555-0199
  | (?:^|[^0-9A-Za-z_.+-]) (?:1[ .-]?)? (?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[ .-])
    [0-9]{3} [ .-] [0-9]{4} (?![0-9A-Za-z_]|[.-][0-9])
    # national, trunk prefix 0 and a 3-5 digit area code (UK, Ukraine,
    # Germany ...), 9+ digits: 020 7946 0958, 07700 900123, 0161 496 0000,
    # (044) 123-45-67, 050-123-45-67, 030 12345678
  | (?:^|[^0-9A-Za-z_.+-]) (?:\(0[1-9][0-9]{1,3}\)[ ]?|0[1-9][0-9]{1,3}[ -])
    (?:[0-9]{6,8} | [0-9]{3,4}[ -][0-9]{3,4} | [0-9]{2,3}[ -][0-9]{2}[ -][0-9]{2})
    (?![0-9A-Za-z_]|[ .-][0-9]) )
  # 3 ssn: US social security number NNN-NN-NNNN; the never-issued areas
  #   000, 666 and 9xx, group 00 and serial 0000 are not SSNs
| ( (?:^|[^0-9A-Za-z_.+-]) [0-9]{3}-[0-9]{2}-[0-9]{4} (?![0-9A-Za-z_]|-[0-9])
    (?<!(?:000|666|9[0-9]{2})-[0-9]{2}-[0-9]{4}|-00-[0-9]{4}|-0000) )
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


-- Cheap necessary condition for memgov.secret_token_pattern(): one of its literal anchors.
CREATE OR REPLACE FUNCTION memgov.secret_token_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN $re$(?x)
  ----- | sk- | k_live_ | k_test_ | A[KS]IA | eyJ | gh[pousr]_ | github_pat_ | xox[abprs]-
| [Bb]earer | BEARER | ://
$re$;


-- Regex for fixed-format credentials (case-sensitive); capture groups 1-8 name the kind.
CREATE OR REPLACE FUNCTION memgov.secret_token_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Each alternative is a literal anchor from
-- memgov.secret_token_candidate_pattern(), then a lookbehind that the
-- anchor starts a word and a lookahead for the rest of the token. A match
-- covers the anchor only, so a token inside another ("Bearer eyJ...") is
-- still found by regexp_matches(..., 'g').
RETURN $re$(?x)
  # 1 private_key: PEM private key header (RSA, EC, OPENSSH, ENCRYPTED, PGP ...)
  ( -----BEGIN[ ] (?= (?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?----- ) )
  # 2 sk_key: OpenAI / Anthropic secret keys (sk-, sk-proj-, sk-ant-api03-)
  #   and Stripe secret / restricted keys (sk_live_, rk_test_ ...): 20+
  #   more characters, at least one of them a digit
| ( (?:sk-|[rs]k_live_|[rs]k_test_) (?<! [A-Za-z0-9_-](?:sk-|[rs]k_live_|[rs]k_test_) )
    (?= [A-Za-z0-9_-]{20} ) (?= [A-Za-z0-9_-]*[0-9] ) )
  # 3 aws_key: AWS access key id (long-term AKIA, temporary ASIA) + 16
| ( A[KS]IA (?<! [A-Za-z0-9]A[KS]IA ) (?= [A-Z0-9]{16}(?![A-Za-z0-9]) ) )
  # 4 jwt: three base64url segments, the header starting eyJ ('{"')
| ( eyJ (?<! [A-Za-z0-9_-]eyJ ) (?= [A-Za-z0-9_-]{10,} \. [A-Za-z0-9_-]{10,} \. ) )
  # 5 github_token: ghp_ gho_ ghu_ ghs_ ghr_ + 36, fine-grained github_pat_
| ( gh[pousr]_ (?<! [A-Za-z0-9_]gh[pousr]_ ) (?= [A-Za-z0-9]{36} )
  | github_pat_ (?<! [A-Za-z0-9_]github_pat_ ) (?= [A-Za-z0-9_]{22} ) )
  # 6 slack_token: xoxb- xoxp- xoxa- xoxr- xoxs-
| ( xox[abprs]- (?<! [A-Za-z0-9_-]xox[abprs]- ) (?= [A-Za-z0-9-]{10} ) )
  # 7 bearer: "Bearer <token>" (in an Authorization header or not)
| ( (?:[Bb]earer|BEARER) (?= [ \t]+ (?![Yy][Oo][Uu][Rr]) [A-Za-z0-9._~+/-]{16} ) )
  # 8 url_credentials: a password in a URL's user info
  #   (postgres://app:S3cret-Pa55@db:5432/app, redis://:p4ssw0rd@cache),
  #   not a placeholder (user:password@, :****@, :${DB_PASSWORD}@, :<pass>@)
| ( :// (?<= [A-Za-z0-9]:// )
    (?= [^][ \t\n/?#@:]* :
        (?! (?:password|passwd|pass|secret|changeme|x+|\*+)@ | [$<{*] )
        [^][ \t\n/?#@]{3,} @ ) )
$re$;


-- Cheap necessary condition for memgov.secret_assignment_pattern(): a separator followed by a credential-like value.
CREATE OR REPLACE FUNCTION memgov.secret_assignment_candidate_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN $re$(?x)
  (?: [:=] | [ \t](?:[Ii][Ss]|[Ww][Aa][Ss])[ \t] )
  (?= [=>]? [ \t]*
      (?: ["'`]? (?=[A-Za-z0-9!#$%&*+./=?@^_~-]*[0-9!#$%&*+/=?@^_~])
                 [A-Za-z0-9][A-Za-z0-9!#$%&*+./=?@^_~-]{5}
        | ["'`]? [A-Za-z]{16}
        | [A-Za-z]+ [ \t]+ [A-Za-z0-9._~+/-]{16} ) )
$re$;


-- Regex for a credential given as a key/value pair (case-insensitive): password: ..., api_key=..., "client_secret": "...".
CREATE OR REPLACE FUNCTION memgov.secret_assignment_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Anchored on the separator (= : => := "is" "was"), which is rare, rather
-- than on the key names, which are many. The lookahead wants a value that
-- looks like a credential: 6+ characters with a digit or symbol, or a 16+
-- letter passphrase, not a placeholder (YOUR_API_KEY, <token>,
-- ${DB_PASSWORD}, ********, xxxx, example ...), or an HTTP auth scheme and
-- its token ("Basic dXNl...", "token 0123..."). Only then the lookbehind
-- checks the key: a credential name (password, DB_PASSWORD, api_key,
-- x-api-key, client_secret, access_token, Authorization, пароль ...) that
-- ends its identifier, optionally qualified ("password for the guest wifi").
RETURN $re$(?xi)
  (?: [:=] | [ \t](?:is|was)[ \t] )
  (?= [=>]? [ \t]*
      (?: ["'`]? (?!your|xxx|example|placeholder|redacted|changeme)
          (?: (?=[A-Za-z0-9!#$%&*+./=?@^_~-]*[0-9!#$%&*+/=?@^_~])
              [A-Za-z0-9][A-Za-z0-9!#$%&*+./=?@^_~-]{5}
            | [A-Za-z]{16} )
        | (?:basic|token) [ \t]+ (?!your) [A-Za-z0-9._~+/-]{16} ) )
  (?<= (?:pass(?:word|wd|phrase)|pwd|secret|token|authorization
         |(?:api|access|secret|private|signing|encryption|master|client)[ _-]?key|apikey
         |[Пп]ароль|[Тт]окен)
       (?:[ \t]+(?:for|of|to|від|до|для)[ \t][^:=\n]{1,30})?
       ["']? [ \t]* (?:[:=]|[ \t](?:is|was)[ \t]) )
$re$;


-- True when p_digits (digits only) passes the Luhn checksum and is not all zeros.
CREATE OR REPLACE FUNCTION memgov.luhn_valid(p_digits text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
DECLARE
    v_sum    integer := 0;
    v_digit  integer;
    v_double boolean := false;
BEGIN
    FOR v_i IN REVERSE length(p_digits)..1 LOOP
        v_digit := ascii(substr(p_digits, v_i, 1)) - 48;   -- 48 = '0'
        IF v_digit NOT BETWEEN 0 AND 9 THEN
            RETURN false;
        END IF;
        IF v_double THEN
            v_digit := v_digit * 2;
            IF v_digit > 9 THEN
                v_digit := v_digit - 9;
            END IF;
        END IF;
        v_sum := v_sum + v_digit;
        v_double := NOT v_double;
    END LOOP;
    RETURN v_sum > 0 AND v_sum % 10 = 0;
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
                   unnest(m.groups, ARRAY['email', 'phone', 'ssn']) AS g(hit, kind)
             WHERE g.hit IS NOT NULL
            UNION
            SELECT 'card' WHERE memgov.contains_card(p_text)
             ORDER BY 1)),
        'secret', to_jsonb(ARRAY(
            SELECT g.kind
              FROM regexp_matches(p_text COLLATE "C", memgov.secret_token_pattern(), 'g') AS m(groups),
                   unnest(m.groups, ARRAY['private_key', 'sk_key', 'aws_key', 'jwt',
                                          'github_token', 'slack_token', 'bearer',
                                          'url_credentials']) AS g(hit, kind)
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
CREATE FUNCTION memgov.decision_json(p_decision memgov.decision)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
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

-- Regenerates the dispatchers from the active policy versions: decide,
-- explain_decision, retention_rule, and policy_settings (the feedback and
-- retention settings of a tenant's active version, as constants).
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
    v_body       text;
    v_at         integer;
    v_version    record;
BEGIN
    FOR v_version IN
        SELECT org_id, function_name, settings
          FROM memgov.policy_versions
         WHERE active
         ORDER BY org_id COLLATE "C"
    LOOP
        IF v_version.org_id = '*' THEN
            v_global := v_version.function_name;
            v_global_settings := v_version.settings;
            CONTINUE;
        END IF;
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
            E'    IF p_item.org_id = %L THEN\n        RETURN memgov.%I(p_item);\n    END IF;\n',
            v_version.org_id, v_version.function_name || '_retention');
    END LOOP;

    -- memgov.decide carries the global policy's own body (one PL/pgSQL call per
    -- row, not two), preceded by the tenant overrides' routing
    IF v_global IS NULL THEN
        v_body := E'\nBEGIN\n' || v_decide || E'    RETURN memgov.no_policy_decision();\nEND\n';
    ELSE
        SELECT p.prosrc INTO STRICT v_body FROM pg_catalog.pg_proc p
         WHERE p.oid = format('memgov.%I(memgov.long_term_memory_items, text, text)', v_global)::regprocedure;
        -- the compiled body is DECLARE <variables> BEGIN ...: no value precedes its first
        -- BEGIN line; the routing goes right after it (plain string surgery: no pattern
        -- or replacement syntax that a tenant id could reach)
        v_at := strpos(v_body, E'\nBEGIN\n') + length(E'\nBEGIN\n');
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

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION memgov.retention_rule(p_item memgov.long_term_memory_items)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
%s    RETURN %s;
END
$body$$f$,
        v_retention,
        CASE WHEN v_global IS NULL THEN 'NULL'
             ELSE format('memgov.%I(p_item)', v_global || '_retention') END);

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
END
$rebuild$;

-- Until the first deploy every tenant is routed to memgov.no_policy_decision().
SELECT memgov.rebuild_dispatch();
-- the sweep (run_maintenance runs as its caller) reads the retention settings
GRANT EXECUTE ON FUNCTION memgov.policy_settings(text) TO memgov_admin;

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
BEGIN
    PERFORM memgov.lock_deploys();
    IF NOT EXISTS (SELECT FROM memgov.policy_versions
                    WHERE org_id = p_org_id AND version = p_version) THEN
        RAISE EXCEPTION 'policy version % is not deployed for %', p_version,
                        CASE WHEN p_org_id = '*' THEN 'the global policy' ELSE 'tenant ' || p_org_id END
            USING ERRCODE = 'MG404',
                  HINT = 'list the deployed versions: SELECT org_id, version FROM memgov.policy_versions';
    END IF;
    UPDATE memgov.policy_versions SET active = false
     WHERE org_id = p_org_id AND active AND version <> p_version;
    UPDATE memgov.policy_versions SET active = true
     WHERE org_id = p_org_id AND version = p_version AND NOT active;
    PERFORM memgov.rebuild_dispatch();
    RETURN p_version;
END
$$;

-- Installs a compiled policy (what `memgov compile` prints) and activates it, atomically.
-- The three bodies become memgov.<p_function_name>, _explain and _retention, with the
-- signatures written here; PostgreSQL, not our compiler, has the last word on each body.
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
DECLARE
    v_existing   memgov.policy_versions;
    v_function   record;
    v_compiled   text := '';
BEGIN
    -- one deploy at a time; concurrent writers keep using the old dispatchers until commit
    PERFORM memgov.lock_deploys();

    IF p_org_id IS DISTINCT FROM '*' AND NOT memgov.is_tenant_id(p_org_id) THEN
        RAISE EXCEPTION 'memgov: % is not a tenant id', coalesce(quote_literal(p_org_id), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'a tenant id is a letter or digit followed by up to 62 letters, digits, ".", "_", ":" or "-"';
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
        RETURN memgov.activate_policy(p_org_id, p_version);
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

    RETURN memgov.activate_policy(p_org_id, p_version);
END
$$;

-- Re-activates an earlier version (default: the one deployed before the active one).
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

-- Dry run: the decision the active policy takes on an item of the caller's tenant,
-- for the caller's role, writing nothing.
CREATE FUNCTION memgov.evaluate(item jsonb, operation text DEFAULT 'remember')
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item  memgov.long_term_memory_items := memgov.item_from_json(item);
BEGIN
    IF v_item.org_id IS NOT NULL THEN  -- without one, the global policy decides: every tenant sees it
        PERFORM memgov.check_tenant(v_item.org_id);
    END IF;
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
    v_item  memgov.long_term_memory_items := memgov.item_from_json(item);
BEGIN
    IF v_item.org_id IS NOT NULL THEN  -- without one, the global policy decides: every tenant sees it
        PERFORM memgov.check_tenant(v_item.org_id);
    END IF;
    RETURN memgov.decision_json(memgov.decide(v_item, memgov.check_operation(operation), memgov.invoker_role()))
           || jsonb_build_object('rules',
                  memgov.explain_decision(v_item, memgov.check_operation(operation), memgov.invoker_role()));
END
$$;

-- Privileges: deploying is memgov_admin's; the dry runs are every memgov role's, for its
-- own tenant (admins: any). Everything else here is the engine's.
GRANT EXECUTE ON FUNCTION
    memgov.activate_policy(text, text),
    memgov.install_policy(text, text, text, text, text, text, text, text, text, jsonb, jsonb),
    memgov.rollback_policy(text, text)
    TO memgov_admin;
GRANT EXECUTE ON FUNCTION memgov.evaluate(jsonb, text), memgov.explain(jsonb, text)
    TO memgov_writer, memgov_reviewer, memgov_admin;
-- the compiled policies run as memgov_policy and call what it may execute
GRANT EXECUTE ON FUNCTION memgov.no_policy_decision(), memgov.decision_json(memgov.decision)
    TO memgov_policy;

RESET ROLE;

-- migrate:downgrade
-- Compiled policies go with the engine that compiled them.
DELETE FROM memgov.policy_versions;
DO $drop$
DECLARE
    v_function oid;
BEGIN
    FOR v_function IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           -- the foundation's own functions stay with it
           AND p.proname <> ALL (ARRAY['is_tenant_id', 'invoker_role', 'is_admin', 'login_is_bound',
                                       'session_tenant', 'check_tenant', 'grant_tenant', 'revoke_tenant'])
    LOOP
        -- CASCADE: SQL-standard function bodies depend on each other
        IF EXISTS (SELECT FROM pg_catalog.pg_proc WHERE oid = v_function) THEN
            EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', v_function::regprocedure);
        END IF;
    END LOOP;
END
$drop$;
DROP TYPE memgov.decision;
