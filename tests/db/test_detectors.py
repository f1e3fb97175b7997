"""Content detectors and risk scoring (sql/020_detectors.sql, sql/021_risk.sql) against real PostgreSQL.

The labelled corpus lives in tests/cases/detectors/*.yaml. Each detector is
evaluated over the whole corpus in one query; precision and recall are
printed (``pytest -s``) and must reach THRESHOLD per detector family.
"""

from __future__ import annotations

import collections
import dataclasses
import decimal
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests import yaml_text
from tests.detector_scoring import Score

CASES_DIR = pathlib.Path(__file__).resolve().parents[1] / "cases" / "detectors"

THRESHOLD = 0.95  # precision and recall per detector family (pii, secret)
KIND_THRESHOLD = 0.90  # per kind: fewer lines each, so one line weighs more
MIN_POSITIVES_PER_KIND = 3

PII_KINDS = frozenset({"email", "phone", "ssn", "card"})
SECRET_KINDS = frozenset(
    {
        "assignment",
        "bearer",
        "private_key",
        "sk_key",
        "aws_key",
        "jwt",
        "github_token",
        "slack_token",
        "url_credentials",
        "google_api_key",
        "npm_token",
        "sendgrid_key",
        "twilio_key",
        "gitlab_token",
        "slack_webhook",
        "curl_user",
    }
)
CASE_KEYS = frozenset({"text", "pii", "secret", "kind", "note", "iban", "ip_address"})
# Fields outside contains_pii / contains_secret (opt-in): key in the corpus -> function.
OPT_IN_FIELDS = {"iban": "memgov.contains_iban", "ip_address": "memgov.contains_ip_address"}

D = decimal.Decimal


# --------------------------------------------------------------------------- corpus


@dataclasses.dataclass(frozen=True)
class Case:
    where: str  # file:index, for messages
    text: str
    pii: bool
    secret: bool
    kinds: frozenset[str]
    note: str | None
    opt_in: frozenset[str] = frozenset()  # the OPT_IN_FIELDS that hold for this text


def load_corpus() -> list[Case]:
    """Read and check every tests/cases/detectors/*.yaml entry."""
    cases: list[Case] = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        entries = yaml_text.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(entries, list), f"{path.name}: expected a list of cases"
        for index, entry in enumerate(entries, start=1):
            where = f"{path.name}#{index}"
            assert isinstance(entry, dict), f"{where}: expected a mapping"
            assert set(entry) <= CASE_KEYS, f"{where}: unknown keys {set(entry) - CASE_KEYS}"
            assert isinstance(entry.get("text"), str), f"{where}: text must be a string"
            assert isinstance(entry.get("pii"), bool), f"{where}: pii must be true/false"
            assert isinstance(entry.get("secret"), bool), f"{where}: secret must be true/false"
            raw_kind = entry.get("kind", [])
            kinds = frozenset([raw_kind] if isinstance(raw_kind, str) else raw_kind)
            assert kinds <= PII_KINDS | SECRET_KINDS, f"{where}: unknown kind {kinds}"
            # Per-kind metrics need complete labels: a positive names its kinds,
            # a negative names none of its family.
            assert entry["pii"] == bool(kinds & PII_KINDS), f"{where}: pii label and kind disagree"
            assert entry["secret"] == bool(kinds & SECRET_KINDS), f"{where}: secret label and kind disagree"
            for field in OPT_IN_FIELDS:
                assert isinstance(entry.get(field, False), bool), f"{where}: {field} must be true/false"
            opt_in = frozenset(field for field in OPT_IN_FIELDS if entry.get(field, False))
            cases.append(Case(where, entry["text"], entry["pii"], entry["secret"], kinds, entry.get("note"), opt_in))
    return cases


CORPUS = load_corpus()
TEXTS = [case.text for case in CORPUS]


def evaluate(conn: psycopg.Connection[Any], expression: str, texts: Sequence[str] = TEXTS) -> list[Any]:
    """Evaluate `expression` (over column `c.t`) for every text in one query, in order."""
    rows = conn.execute(
        f"SELECT {expression} FROM unnest(%s::text[]) WITH ORDINALITY AS c(t, n) ORDER BY c.n",
        [list(texts)],
    ).fetchall()
    assert len(rows) == len(texts)
    return [row[0] for row in rows]


# --------------------------------------------------------------------------- metrics


def print_table(title: str, scores: dict[str, Score]) -> None:
    print(f"\n{title}")
    print(f"  {'detector':<16}{'TP':>5}{'FP':>5}{'FN':>5}{'TN':>5}{'precision':>11}{'recall':>8}")
    for name, s in scores.items():
        print(f"  {name:<16}{s.tp:>5}{s.fp:>5}{s.fn:>5}{s.tn:>5}{s.precision:>11.3f}{s.recall:>8.3f}")


def misses(cases: Iterable[Case], expected: Sequence[bool], actual: Sequence[bool]) -> str:
    lines = [
        f"  {'FN' if e else 'FP'} {case.where}: {case.text!r}" + (f"  ({case.note})" if case.note else "")
        for case, e, a in zip(cases, expected, actual, strict=True)
        if e != a
    ]
    return "\n".join(lines) or "  none"


# --------------------------------------------------------------------------- corpus tests


def test_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CORPUS) >= 150
    positives = collections.Counter(kind for case in CORPUS for kind in case.kinds)
    for kind in sorted(PII_KINDS | SECRET_KINDS):
        assert positives[kind] >= MIN_POSITIVES_PER_KIND, f"too few positives for {kind}"
    assert sum(not c.pii for c in CORPUS) >= 50
    assert sum(not c.secret for c in CORPUS) >= 50
    assert len(set(TEXTS)) == len(TEXTS), "duplicate texts in the corpus"


@pytest.mark.parametrize(
    ("family", "function"),
    [("pii", "memgov.contains_pii"), ("secret", "memgov.contains_secret")],
)
def test_detector_precision_and_recall(db_conn: psycopg.Connection[Any], family: str, function: str) -> None:
    actual = evaluate(db_conn, f"{function}(c.t)")
    expected = [getattr(case, family) for case in CORPUS]
    score = Score()
    for e, a in zip(expected, actual, strict=True):
        assert a is not None
        score.add(e, a)
    print_table(f"{function} over {len(CORPUS)} labelled texts", {family: score})
    print(misses(CORPUS, expected, actual))
    assert score.precision >= THRESHOLD and score.recall >= THRESHOLD, (
        f"{family}: precision {score.precision:.3f}, recall {score.recall:.3f} "
        f"(need {THRESHOLD})\n{misses(CORPUS, expected, actual)}"
    )


@pytest.mark.parametrize("field", sorted(OPT_IN_FIELDS))
def test_opt_in_field_precision_and_recall(db_conn: psycopg.Connection[Any], field: str) -> None:
    """IBAN and IP addresses are fields of their own; every corpus line is labelled for them."""
    actual = evaluate(db_conn, f"{OPT_IN_FIELDS[field]}(c.t)")
    expected = [field in case.opt_in for case in CORPUS]
    score = Score()
    for e, a in zip(expected, actual, strict=True):
        assert a is not None
        score.add(e, a)
    print_table(f"{OPT_IN_FIELDS[field]} over {len(CORPUS)} labelled texts", {field: score})
    print(misses(CORPUS, expected, actual))
    assert score.tp >= 8, f"too few positives for {field}"
    assert score.precision >= THRESHOLD and score.recall >= THRESHOLD, misses(CORPUS, expected, actual)
    wrong = [
        case.text
        for case, e, a in zip(CORPUS, expected, actual, strict=True)
        if e != a and not (case.note or "").startswith("known false")
    ]
    assert not wrong


@pytest.mark.parametrize(
    ("iban", "valid"),
    [
        ("DE89 3704 0044 0532 0130 00", True),
        ("GB82WEST12345698765432", True),
        ("gb82 west 1234 5698 7654 32", True),  # case and spaces do not matter
        ("DE89 3704 0044 0532 0130 01", False),  # one digit off
        ("GB28WEST12345698765432", False),  # check digits of another account
        ("NO938601111794", False),  # too short
        ("DE89-3704-0044-0532-0130-00", False),  # not an IBAN's separator
    ],
)
def test_iban_valid(db_conn: psycopg.Connection[Any], iban: str, valid: bool) -> None:
    row = db_conn.execute("SELECT memgov.iban_valid(%s)", [iban]).fetchone()
    assert row == (valid,)


def test_every_line_not_marked_as_a_known_limit_is_right(db_conn: psycopg.Connection[Any]) -> None:
    """Thresholds hide a single regression; lines whose note does not start "known false" must all pass."""
    pii = evaluate(db_conn, "memgov.contains_pii(c.t)")
    secret = evaluate(db_conn, "memgov.contains_secret(c.t)")
    wrong = [
        f"  {case.where}: {case.text!r} want pii={case.pii} secret={case.secret}, got {p} {s}"
        for case, p, s in zip(CORPUS, pii, secret, strict=True)
        if not (case.note or "").startswith("known false") and (p, s) != (case.pii, case.secret)
    ]
    assert not wrong, "\n" + "\n".join(wrong)
    known = [case for case in CORPUS if (case.note or "").startswith("known false")]
    assert len(known) <= len(CORPUS) // 20, "known limits must stay few"


def test_detect_content_kinds_precision_and_recall(db_conn: psycopg.Connection[Any]) -> None:
    reports = evaluate(db_conn, "memgov.detect_content(c.t)")
    scores = {kind: Score() for kind in [*sorted(PII_KINDS), *sorted(SECRET_KINDS)]}
    wrong: list[str] = []
    for case, report in zip(CORPUS, reports, strict=True):
        assert set(report) == {"pii", "secret"}
        assert report["pii"] == sorted(set(report["pii"])), "kinds must be sorted and distinct"
        assert report["secret"] == sorted(set(report["secret"]))
        found = set(report["pii"]) | set(report["secret"])
        for kind, score in scores.items():
            score.add(kind in case.kinds, kind in found)
        if found != case.kinds:
            wrong.append(f"  {case.where}: {case.text!r} want {sorted(case.kinds)} got {sorted(found)}")
    print_table("memgov.detect_content, per kind", scores)
    print("\n".join(wrong) or "  none")
    failing = {
        kind: (round(s.precision, 3), round(s.recall, 3))
        for kind, s in scores.items()
        if s.precision < KIND_THRESHOLD or s.recall < KIND_THRESHOLD
    }
    assert not failing, f"kinds below {KIND_THRESHOLD}: {failing}\n" + "\n".join(wrong)


def test_detect_content_agrees_with_the_boolean_detectors(db_conn: psycopg.Connection[Any]) -> None:
    rows = evaluate(
        db_conn,
        "(memgov.contains_pii(c.t) = (jsonb_array_length(memgov.detect_content(c.t) -> 'pii') > 0))"
        " AND (memgov.contains_secret(c.t)"
        "      = (jsonb_array_length(memgov.detect_content(c.t) -> 'secret') > 0))",
    )
    disagree = [case.text for case, ok in zip(CORPUS, rows, strict=True) if not ok]
    assert not disagree


@pytest.mark.parametrize(
    ("precise", "candidate"),
    [
        ("memgov.pii_pattern()", "memgov.pii_candidate_pattern()"),
        ("memgov.card_pattern()", "memgov.pii_candidate_pattern()"),
        ("memgov.secret_token_pattern()", "memgov.secret_token_candidate_pattern()"),
        ("memgov.secret_assignment_pattern()", "memgov.secret_assignment_candidate_pattern()"),
    ],
)
def test_candidate_patterns_admit_every_precise_match(
    db_conn: psycopg.Connection[Any], precise: str, candidate: str
) -> None:
    """The detectors skip a precise pattern when its cheap candidate fails: that must never hide a match."""
    texts = [
        variant for text in TEXTS for variant in (text, text.upper(), text.lower(), f"({text})", f"x {text}. Next")
    ]
    hidden = [
        text
        for text, bad in zip(
            texts,
            evaluate(
                db_conn,
                f'(c.t COLLATE "C") ~ {precise} AND (c.t COLLATE "C") !~ {candidate}',
                texts,
            ),
            strict=True,
        )
        if bad
    ]
    assert not hidden


# --------------------------------------------------------------------------- detect_content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nothing to see here", {"pii": [], "secret": []}),
        (
            "mail olena@example.com or call +380 44 123 45 67, card 4111 1111 1111 1111",
            {"pii": ["card", "email", "phone"], "secret": []},
        ),
        ("SSN 123-45-6789, SSN 219-09-9999", {"pii": ["ssn"], "secret": []}),
        (
            "GITHUB_TOKEN=ghp_FAKEmrcXgGCJbW56eCuNGMGmSrCEXAMPLE01",
            {"pii": [], "secret": ["assignment", "github_token"]},
        ),
        (
            "AKIAIOSFODNN7EXAMPLE and -----BEGIN PRIVATE KEY-----",
            {"pii": [], "secret": ["aws_key", "private_key"]},
        ),
        ("order 4111 1111 1111 1112", {"pii": [], "secret": []}),
    ],
)
def test_detect_content_reports_kinds(
    db_conn: psycopg.Connection[Any], text: str, expected: dict[str, list[str]]
) -> None:
    got = db_conn.execute("SELECT memgov.detect_content(%s)", [text]).fetchone()
    assert got is not None and got[0] == expected


def test_detectors_pass_null_through(db_conn: psycopg.Connection[Any]) -> None:
    row = db_conn.execute(
        "SELECT memgov.contains_pii(NULL), memgov.contains_secret(NULL), memgov.detect_content(NULL),"
        "       memgov.contains_iban(NULL), memgov.contains_ip_address(NULL)"
    ).fetchone()
    assert row == (None, None, None, None, None)


@pytest.mark.parametrize(
    ("digits", "valid"),
    [
        ("4111111111111111", True),
        ("79927398713", True),
        ("4111111111111112", False),
        ("0000000000000000", False),  # checksum 0, but not a number anyone issues
        ("4111-1111", False),  # non-digits are never valid
    ],
)
def test_luhn_valid(db_conn: psycopg.Connection[Any], digits: str, valid: bool) -> None:
    row = db_conn.execute("SELECT memgov.luhn_valid(%s)", [digits]).fetchone()
    assert row == (valid,)


# --------------------------------------------------------------------------- risk score

CLEAN = "The user prefers dark mode."
PII = "Reach me at olena@example.com"
SECRET = "api_key=abc123def456ghi789"
BOTH = "olena@example.com, password: Adm1n!2024"


@pytest.mark.parametrize(
    ("operation", "text", "source", "org", "project", "score", "level", "factors"),
    [
        # max(mean(.30, .05) = .175, .8 * .30 = .24)
        ("remember", CLEAN, "langgraph", "acme", "atlas", "0.240", "low",
         {"operation": 0.30, "trusted_source": 0.05}),
        # max(.05, .04)
        ("get", CLEAN, "mcp", "acme", "atlas", "0.050", "low",
         {"operation": 0.05, "trusted_source": 0.05}),
        # max(.225, .32): 'custom' is untrusted
        ("search", CLEAN, "custom", "acme", "atlas", "0.320", "medium",
         {"operation": 0.05, "untrusted_source": 0.40}),
        # max(.45, .40): NULL source is untrusted; the mean wins
        ("forget", CLEAN, None, "acme", "atlas", "0.450", "medium",
         {"operation": 0.50, "untrusted_source": 0.40}),
        # max(1.05 / 3 = .35, .48)
        ("update", PII, "openai_sessions", "acme", "atlas", "0.480", "medium",
         {"operation": 0.40, "contains_pii": 0.60, "trusted_source": 0.05}),
        # max(1.40 / 3 = .4667, .56)
        ("remember", SECRET, "custom", "acme", "atlas", "0.560", "medium",
         {"operation": 0.30, "contains_secret": 0.70, "untrusted_source": 0.40}),
        # max(1.5 / 3 = .5, .48): the mean wins
        ("forget", PII, "custom", "acme", "atlas", "0.500", "medium",
         {"operation": 0.50, "contains_pii": 0.60, "untrusted_source": 0.40}),
        # every factor: max(2.9 / 5 = .58, .56), the highest score the baseline can give
        ("forget", BOTH, "custom", None, "atlas", "0.580", "medium",
         {"operation": 0.50, "contains_pii": 0.60, "contains_secret": 0.70,
          "untrusted_source": 0.40, "missing_scope": 0.70}),
        # missing project (empty string): max(1.05 / 3 = .35, .56)
        ("remember", CLEAN, "mcp", "acme", "", "0.560", "medium",
         {"operation": 0.30, "trusted_source": 0.05, "missing_scope": 0.70}),
        # missing org (blank counts as missing): max(.80 / 3 = .267, .56)
        ("get", CLEAN, "mcp", "   ", "atlas", "0.560", "medium",
         {"operation": 0.05, "trusted_source": 0.05, "missing_scope": 0.70}),
        # update + secret + trusted: max(1.15 / 3 = .3833, .56)
        ("update", SECRET, "langgraph", "acme", "atlas", "0.560", "medium",
         {"operation": 0.40, "contains_secret": 0.70, "trusted_source": 0.05}),
    ],
)  # fmt: skip
def test_risk_assessment_formula(
    db_conn: psycopg.Connection[Any],
    operation: str,
    text: str,
    source: str | None,
    org: str | None,
    project: str | None,
    score: str,
    level: str,
    factors: dict[str, float],
) -> None:
    row = db_conn.execute(
        "SELECT score, level, factors FROM memgov.risk_assessment(%s, %s, %s, %s, %s, NULL)",
        [operation, text, source, org, project],
    ).fetchone()
    assert row is not None
    got_score, got_level, got_factors = row
    assert got_score == D(score) and str(got_score) == score  # exact, 3 decimals
    assert got_level == level
    assert got_factors == factors


@pytest.mark.parametrize(
    ("thresholds", "level"),
    [
        # the 0.240 of a trusted 'remember' against the boundaries
        ({"low_max": 0.24}, "low"),  # <= low_max is low
        ({"low_max": 0.239}, "medium"),
        ({"low_max": 0.1, "medium_max": 0.24}, "medium"),  # <= medium_max
        ({"low_max": 0.1, "medium_max": 0.2}, "high"),
        ({"low_max": 0.1, "medium_max": 0.2, "high_max": 0.24}, "high"),  # <= high_max
        ({"low_max": 0.1, "medium_max": 0.2, "high_max": 0.239}, "critical"),
        ({"medium_max": 0.9}, "low"),  # missing keys take the defaults
        ({}, "low"),
        (None, "low"),
    ],
)
def test_risk_level_thresholds(
    db_conn: psycopg.Connection[Any], thresholds: dict[str, float] | None, level: str
) -> None:
    row = db_conn.execute(
        "SELECT score, level FROM memgov.risk_assessment('remember', %s, 'langgraph', 'acme', 'atlas', %s)",
        [CLEAN, Jsonb(thresholds) if thresholds is not None else None],
    ).fetchone()
    assert row == (D("0.240"), level)


def test_risk_level_default_boundaries(db_conn: psycopg.Connection[Any]) -> None:
    row = db_conn.execute(
        "SELECT memgov.risk_level(0.30), memgov.risk_level(0.301), memgov.risk_level(0.60),"
        "       memgov.risk_level(0.601), memgov.risk_level(0.80), memgov.risk_level(0.801),"
        "       memgov.risk_level(NULL)"
    ).fetchone()
    assert row == ("low", "medium", "medium", "high", "high", "critical", None)


@pytest.mark.parametrize(
    ("trusted", "source", "factor"),
    [
        (["custom"], "custom", {"trusted_source": 0.05}),
        (["custom"], "langgraph", {"untrusted_source": 0.40}),  # the list replaces the default
        ([], "mcp", {"untrusted_source": 0.40}),
        (None, "mcp", {"trusted_source": 0.05}),  # key absent: default list
    ],
)
def test_trusted_sources_override(
    db_conn: psycopg.Connection[Any], trusted: list[str] | None, source: str, factor: dict[str, float]
) -> None:
    thresholds = {"low_max": 0.3} if trusted is None else {"trusted_sources": trusted}
    row = db_conn.execute(
        "SELECT factors FROM memgov.risk_assessment('remember', %s, %s, 'acme', 'atlas', %s)",
        [CLEAN, source, Jsonb(thresholds)],
    ).fetchone()
    assert row == ({"operation": 0.30, **factor},)


def test_flag_form_matches_text_form(db_conn: psycopg.Connection[Any]) -> None:
    row = db_conn.execute(
        """
        SELECT (SELECT to_jsonb(r) FROM memgov.risk_assessment('update', %(text)s, 'custom', 'acme', NULL, NULL) r),
               (SELECT to_jsonb(r) FROM memgov.risk_assessment('update', true, true, 'custom', 'acme', NULL, NULL) r)
        """,
        {"text": BOTH},
    ).fetchone()
    assert row is not None and row[0] == row[1]


def test_null_text_has_no_content_factors(db_conn: psycopg.Connection[Any]) -> None:
    row = db_conn.execute(
        "SELECT factors FROM memgov.risk_assessment('remember', NULL, 'mcp', 'acme', 'atlas')"
    ).fetchone()
    assert row == ({"operation": 0.30, "trusted_source": 0.05},)


@pytest.mark.parametrize("operation", ["delete", "REMEMBER", "", None])
def test_unknown_operation_is_rejected(db_conn: psycopg.Connection[Any], operation: str | None) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown operation"):
        db_conn.execute("SELECT * FROM memgov.risk_assessment(%s, 'x', 'mcp', 'acme', 'atlas')", [operation])


def test_trusted_sources_must_be_an_array(db_conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="trusted_sources"):
        db_conn.execute(
            "SELECT * FROM memgov.risk_assessment('get', 'x', 'mcp', 'acme', 'atlas', %s)",
            [Jsonb({"trusted_sources": "mcp"})],
        )


# --------------------------------------------------------------------------- function properties

DETECTOR_FUNCTIONS = [
    "memgov.pii_pattern()",
    "memgov.card_pattern()",
    "memgov.secret_token_pattern()",
    "memgov.secret_assignment_pattern()",
    "memgov.luhn_valid(text)",
    "memgov.contains_card(text)",
    "memgov.contains_pii(text)",
    "memgov.contains_secret(text)",
    "memgov.detect_content(text)",
    "memgov.ip_address_pattern()",
    "memgov.contains_ip_address(text)",
    "memgov.iban_pattern()",
    "memgov.iban_valid(text)",
    "memgov.contains_iban(text)",
    "memgov.risk_level(numeric,jsonb)",
    "memgov.risk_assessment(text,boolean,boolean,text,text,text,jsonb)",
    "memgov.risk_assessment(text,text,text,text,text,jsonb)",
]


@pytest.mark.parametrize("signature", DETECTOR_FUNCTIONS)
def test_functions_are_immutable_and_parallel_safe(db_conn: psycopg.Connection[Any], signature: str) -> None:
    row = db_conn.execute(
        "SELECT provolatile, proparallel FROM pg_catalog.pg_proc WHERE oid = %s::regprocedure",
        [signature],
    ).fetchone()
    assert row == ("i", "s"), f"{signature}: provolatile/proparallel = {row}"


def test_hot_path_detectors_are_inlined(db_conn: psycopg.Connection[Any]) -> None:
    """contains_pii / contains_secret must become plain regex tests in the caller's plan."""
    plan = "\n".join(
        row[0]
        for row in db_conn.execute(
            "EXPLAIN (VERBOSE, COSTS OFF) SELECT memgov.contains_pii(relname::text),"
            " memgov.contains_secret(relname::text) FROM pg_catalog.pg_class"
        )
    )
    assert "contains_pii" not in plan and "contains_secret" not in plan, plan
    assert "_pattern()" not in plan, "patterns must be folded to constants\n" + plan
    assert "~" in plan
