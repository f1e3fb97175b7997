"""Compiled policies vs. an interpreted evaluator, rule-count scaling, deploy time.

    python -m tests.bench.bench_policy [--dsn DSN] [--rows 100000] [--repeat 3]

(a) Bulk INSERT ... SELECT of --rows rows into a table whose BEFORE INSERT
    trigger asks for a decision: the compiled default policy (memgov.decide)
    vs. an interpreted evaluator that reads the same rules at run time from a
    table shaped like memory_policy_rules (category, condition JSONB such as
    {"confidence": {"gte": 0.7}}, action, priority) — the design a naive
    implementation would use. Both must decide every row alike (checked).
(b) The same INSERT ... SELECT through a 500-rule policy (100 categories) vs.
    a 20-rule policy, same rows.
(c) Deploy time (validate, compile, install) of the 500-rule policy.
"""

from __future__ import annotations

import json
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import deploy, pg_regex_checker
from memgov_pg.policy import Policy, load_policy
from tests.bench.common import bench_database, best_of, parser, table

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
CREATE SCHEMA bench;
CREATE TABLE bench.source (LIKE memgov.long_term_memory_items INCLUDING DEFAULTS);
CREATE TABLE bench.bare (LIKE memgov.long_term_memory_items INCLUDING DEFAULTS);
CREATE TABLE bench.compiled (LIKE memgov.long_term_memory_items INCLUDING DEFAULTS);
CREATE TABLE bench.interpreted (LIKE memgov.long_term_memory_items INCLUDING DEFAULTS);
-- status holds the decided action here ('allow', 'require_approval', ...), not a memory status
ALTER TABLE bench.compiled ALTER COLUMN status DROP DEFAULT, ALTER COLUMN status TYPE text;
ALTER TABLE bench.interpreted ALTER COLUMN status DROP DEFAULT, ALTER COLUMN status TYPE text;

-- The naive design: rules read from a table and walked as JSON on every row.
CREATE TABLE bench.rules (
    rule_id text, category text[], condition jsonb, action text, priority int, position int);

CREATE FUNCTION bench.interpreted_decide(p_item memgov.long_term_memory_items)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_doc     jsonb := to_jsonb(p_item);
    v_rule    record;
    v_cond    record;
    v_op      record;
    v_actual  jsonb;
    v_ok      boolean;
BEGIN
    FOR v_rule IN SELECT category, condition, action FROM bench.rules ORDER BY priority, position LOOP
        IF v_rule.category IS NOT NULL AND NOT (p_item.category = ANY (v_rule.category)) THEN
            CONTINUE;
        END IF;
        v_ok := true;
        FOR v_cond IN SELECT key, value FROM jsonb_each(v_rule.condition) LOOP
            v_actual := CASE v_cond.key
                WHEN 'content.contains_secret' THEN to_jsonb(memgov.contains_secret(p_item.fact_text))
                WHEN 'content.contains_pii' THEN to_jsonb(memgov.contains_pii(p_item.fact_text))
                WHEN 'operation_type' THEN to_jsonb('remember'::text)  -- both triggers decide remember
                ELSE v_doc -> v_cond.key END;
            FOR v_op IN SELECT key, value FROM jsonb_each(
                    CASE WHEN jsonb_typeof(v_cond.value) = 'object' THEN v_cond.value
                         ELSE jsonb_build_object('eq', v_cond.value) END) LOOP
                v_ok := coalesce(CASE v_op.key
                    WHEN 'eq'  THEN v_actual = v_op.value
                    WHEN 'neq' THEN v_actual <> v_op.value
                    WHEN 'in'  THEN v_op.value @> jsonb_build_array(v_actual)
                    WHEN 'gt'  THEN (v_actual #>> '{}')::numeric >  (v_op.value #>> '{}')::numeric
                    WHEN 'gte' THEN (v_actual #>> '{}')::numeric >= (v_op.value #>> '{}')::numeric
                    WHEN 'lt'  THEN (v_actual #>> '{}')::numeric <  (v_op.value #>> '{}')::numeric
                    WHEN 'lte' THEN (v_actual #>> '{}')::numeric <= (v_op.value #>> '{}')::numeric
                END, false);
                EXIT WHEN NOT v_ok;
            END LOOP;
            EXIT WHEN NOT v_ok;
        END LOOP;
        IF v_ok THEN
            RETURN v_rule.action;
        END IF;
    END LOOP;
    RETURN 'require_approval';
END
$$;

CREATE FUNCTION bench.compiled_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := (memgov.decide(ROW(NEW.*)::memgov.long_term_memory_items, 'remember', current_user)).action;
    RETURN NEW;
END
$$;
CREATE FUNCTION bench.interpreted_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := bench.interpreted_decide(ROW(NEW.*)::memgov.long_term_memory_items);
    RETURN NEW;
END
$$;
CREATE TRIGGER decide BEFORE INSERT ON bench.compiled FOR EACH ROW EXECUTE FUNCTION bench.compiled_trigger();
CREATE TRIGGER decide BEFORE INSERT ON bench.interpreted FOR EACH ROW EXECUTE FUNCTION bench.interpreted_trigger();
"""

TEXTS = [
    "Prefers dark mode in every editor",
    "The project Atlas moves billing to PostgreSQL",
    "Decided to ship on Tuesdays after standup",
    "Likes hiking and coffee without sugar",
    "Deployment runs on Kubernetes with three replicas",
    "Користувач любить короткі відповіді",
    "Has a standing meeting every Monday at 10:00",
    "Uses Python 3.11 and psycopg 3",
    "api_key=abc123def456ghi789jkl",
    "Reach me at olena.koval@example.com",
]
CATEGORIES = ["user_fact", "preference", "constraint", "project_fact", "rule", "decision", "assumption",
              "temporary_context", "execution_detail", "gossip"]  # fmt: skip
SOURCES = ["user_confirmed", "agent_extracted", "system_rule"]


def fill_source(conn: psycopg.Connection[Any], rows: int, categories: list[str]) -> None:
    rng = random.Random(42)
    conn.execute("TRUNCATE bench.source")
    with conn.cursor().copy(
        "COPY bench.source (org_id, project_id, category, fact_text, source, confidence, is_sensitive, "
        "context_source) FROM STDIN"
    ) as copy:
        for _ in range(rows):
            copy.write_row(
                (
                    "acme",
                    "p1",
                    rng.choice(categories),
                    rng.choice(TEXTS),
                    rng.choice(SOURCES),
                    Decimal(rng.randint(0, 1000)) / 1000,
                    rng.random() < 0.1,
                    "mcp",
                )
            )
    conn.execute("ANALYZE bench.source")


def interpreted_rules(policy: Policy) -> list[tuple[Any, ...]]:
    """The policy's write rules in the naive table's shape (dialect B maps)."""
    out = []
    for position, rule in enumerate(policy.write_rules):
        assert rule.match == "all", rule.id
        condition: dict[str, Any] = {}
        for c in rule.conditions:
            value = [_plain(v) for v in c.value] if isinstance(c.value, tuple) else _plain(c.value)
            condition.setdefault(c.field, {})[c.operator] = value
        category = list(rule.category_scope) if rule.category_scope is not None else None
        out.append((rule.id, category, json.dumps(condition), rule.action, rule.priority, position))
    return out


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


def insert_select(conn: psycopg.Connection[Any], target: str) -> None:
    conn.execute(f"INSERT INTO bench.{target} SELECT * FROM bench.source")


def truncate(conn: psycopg.Connection[Any], target: str) -> None:
    conn.execute(f"TRUNCATE bench.{target}")
    conn.execute("CHECKPOINT")


def timed_insert(conn: psycopg.Connection[Any], target: str, repeat: int) -> float:
    return best_of(repeat, lambda: insert_select(conn, target), lambda: truncate(conn, target))


def many_rules_policy(categories: int, rules_per_category: int, version: str) -> str:
    """A policy of categories x rules_per_category rules on confidence, source and sensitivity."""
    lines = [f'version: "{version}"', "defaults: {on_policy_miss: require_approval}", "rules:"]
    priority = 0
    for c in range(categories):
        for r in range(rules_per_category):
            priority += 1
            low = r / rules_per_category
            source = SOURCES[r % 3]
            lines.append(
                f"  - {{id: c{c:03d}-r{r}, priority: {priority}, category: cat{c:03d}, "
                f"condition: {{source: {source}, confidence: {{gte: {low:.2f}}}, is_sensitive: false}}, "
                f"action: {'allow' if r % 2 else 'require_approval'}}}"
            )
    return "\n".join(lines) + "\n"


def deploy_text(conn: psycopg.Connection[Any], text: str) -> None:
    policy = load_policy(text, filename="<bench>", regex_checker=pg_regex_checker(conn))
    conn.execute(compile_policy(policy).install_sql())


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    with bench_database(args.dsn, "memgov_bench_policy") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(SETUP)
        results: list[tuple[str, ...]] = []

        # (a) compiled vs interpreted, default policy
        deploy(dsn, ROOT / "policies" / "default.yaml")
        policy = load_policy((ROOT / "policies" / "default.yaml").read_bytes())
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO bench.rules VALUES (%s, %s, %s, %s, %s, %s)", interpreted_rules(policy))
        fill_source(conn, args.rows, CATEGORIES)
        bare = timed_insert(conn, "bare", args.repeat)
        compiled = timed_insert(conn, "compiled", args.repeat)
        interpreted = timed_insert(conn, "interpreted", args.repeat)
        differ = conn.execute(
            "SELECT count(*) FROM (SELECT status FROM bench.compiled EXCEPT ALL SELECT status FROM bench.interpreted) d"
        ).fetchone()[0]
        assert differ == 0, f"the interpreted evaluator disagrees on {differ} rows"
        n = args.rows
        results += [
            ("(a) bare INSERT...SELECT (no trigger)", f"{bare:.3f} s", f"{bare / n * 1e6:.2f} µs/row", "-"),
            ("(a) compiled default policy", f"{compiled:.3f} s", f"{compiled / n * 1e6:.2f} µs/row", "1.00"),
            ("(a) interpreted rules table", f"{interpreted:.3f} s", f"{interpreted / n * 1e6:.2f} µs/row",
             f"{interpreted / compiled:.2f}× slower than compiled"),
        ]  # fmt: skip

        # (a') the same without the secret detector, which both evaluators call
        #      (about half of the compiled time): what the rule logic costs alone
        no_detector = (
            (ROOT / "policies" / "default.yaml")
            .read_text()
            .replace("  - id: block-secrets\n", "  - id: block-secrets\n    enabled: false\n")
            .replace('version: "1.0.0"', 'version: "1.0.1-nodetector"')
        )
        assert "enabled: false" in no_detector
        deploy_text(conn, no_detector)
        conn.execute("TRUNCATE bench.rules")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO bench.rules VALUES (%s, %s, %s, %s, %s, %s)",
                            interpreted_rules(load_policy(no_detector)))  # fmt: skip
        compiled_nd = timed_insert(conn, "compiled", args.repeat)
        interpreted_nd = timed_insert(conn, "interpreted", args.repeat)
        results += [
            ("(a') compiled, no detector rule", f"{compiled_nd:.3f} s", f"{compiled_nd / n * 1e6:.2f} µs/row", "1.00"),
            ("(a') interpreted, no detector rule", f"{interpreted_nd:.3f} s",
             f"{interpreted_nd / n * 1e6:.2f} µs/row", f"{interpreted_nd / compiled_nd:.2f}× slower than compiled"),
        ]  # fmt: skip

        # (b) 500 rules over 100 categories vs 20 rules, same rows
        cats = [f"cat{c:03d}" for c in range(100)]
        fill_source(conn, args.rows, cats)
        deploy_text(conn, many_rules_policy(4, 5, "20.0.0"))
        small = timed_insert(conn, "compiled", args.repeat)
        big_text = many_rules_policy(100, 5, "500.0.0")
        start = time.perf_counter()
        deploy_text(conn, big_text)
        deploy_seconds = time.perf_counter() - start
        big = timed_insert(conn, "compiled", args.repeat)
        results += [
            ("(b) 20-rule policy (4 categories)", f"{small:.3f} s", f"{small / n * 1e6:.2f} µs/row", "1.00"),
            ("(b) 500-rule policy (100 categories)", f"{big:.3f} s", f"{big / n * 1e6:.2f} µs/row",
             f"{big / small:.2f}× the 20-rule time"),
        ]  # fmt: skip

        # (c) deploy time of the 500-rule policy (validate + compile + install + activate)
        start = time.perf_counter()
        compiled_500 = compile_policy(load_policy(big_text.replace("500.0.0", "500.0.1"), filename="<bench>"))
        compile_seconds = time.perf_counter() - start
        results += [
            ("(c) compile 500-rule policy (Python)", f"{compile_seconds * 1000:.0f} ms",
             f"{len(compiled_500.sql) // 1024} KiB SQL", "-"),
            ("(c) deploy 500-rule policy (end to end)", f"{deploy_seconds * 1000:.0f} ms", "-", "-"),
        ]  # fmt: skip
    print(f"rows: {args.rows}, best of {args.repeat}\n")
    print(table(results, ("measurement", "time", "per row", "ratio")))


if __name__ == "__main__":
    main()
