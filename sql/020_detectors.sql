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

RESET ROLE;
