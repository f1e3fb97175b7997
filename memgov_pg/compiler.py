"""Policy model -> static PL/pgSQL.

A policy version compiles into three functions, named after a hash of the
tenant and the policy file (callers never use these names: the dispatchers of
``sql/031_dispatch.sql`` route to them):

* ``memgov.policy_<h>(item, operation, actor) -> memgov.decision`` — the write
  decision. Rules are indexed: the body branches on ``operation_type`` (when a
  rule scopes by it) and on ``category`` (a binary search over the categories
  the policy names), and each branch holds only the rules that can apply to
  it, in priority order, wildcard rules included. First match wins.
* ``memgov.policy_<h>_explain(item, operation, actor) -> jsonb`` — every write
  rule, whether it is in scope, whether it matched, the first failing condition.
* ``memgov.policy_<h>_retention(item) -> text`` — the first ``auto_delete`` rule
  that matches the row (its id), or NULL: the retention sweep's predicate.

Nothing is interpreted at run time: no EXECUTE, no JSON rules. Values from the
policy reach SQL only through :func:`literal`; identifiers and field
expressions only from the fixed field table of :mod:`memgov_pg.policy.vocabulary`,
which also says what each field needs computed first (a detector, the risk score).

The decide function of a global policy also serves as the body of
``memgov.decide``: ``memgov.rebuild_dispatch`` puts the routing to the tenants'
policies at the line :data:`TENANT_ROUTING_MARKER`, which the compiler emits
right after ``BEGIN``, before anything else of the body.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .condition_sql import condition_sql, conditions_sql, field_sql
from .policy.model import Condition, Policy, Rule, settings_json
from .policy.vocabulary import COMPUTED, DECISION_RISK, SOURCES, Computed, computed_for, lookup_field
from .read_compiler import read_source
from .sql_literals import dollar_quote, jsonb_literal, literal, text_array
from .tenants import check_tenant_id, scope_text

# 2: the sources: check decides writes only (remember, update, forget), never a read
COMPILER_VERSION = "2"
#: The line of a compiled decide body where memgov.decide_definition (sql/031_dispatch.sql)
#: puts the routing to the tenants' policies when the body serves as memgov.decide.
TENANT_ROUTING_MARKER = "    -- memgov:tenant-routing"

#: The operations that claim the source of their row: the only ones the ``sources:`` check
#: decides. A read (search, get) claims nothing.
CLAIMING_OPERATIONS = ("remember", "update", "forget")
#: The first two lines of the ``sources:`` check, right after the routing marker. Revision
#: 0002_second_release rewrites the check of bodies compiled by compiler 1 (which tested every
#: operation, reads included) from ``IF p_item.source IN (`` into this: keep them in step.
SOURCE_CHECK_COMMENT = "    -- sources: which roles may claim which fact source (writes only: a read claims none)"
SOURCE_CHECK_TEST = f"    IF p_operation IN ({', '.join(map(literal, CLAIMING_OPERATIONS))}) AND p_item.source IN ("

# Dispatch on category by binary search once a branch list is longer than this.
_LINEAR_DISPATCH_MAX = 4

# ---------------------------------------------------------------------------
# Rule indexing
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexedRule:
    """A rule with its static scope split off: what dispatch decides is not re-tested."""

    rule: Rule
    operations: frozenset[str] | None  # None: every operation
    categories: frozenset[str] | None  # None: every category
    conditions: tuple[Condition, ...]  # what remains to test at run time


def index_rule(rule: Rule) -> IndexedRule:
    """Split a rule's static scope off: its category scope, and its ``operation_type`` eq / in
    conditions (``match: all``, or a single condition), become what dispatch branches on.
    """
    operations: frozenset[str] | None = None
    remaining = list(rule.conditions)
    if rule.match == "all" or len(remaining) == 1:
        for cond in list(remaining):
            if cond.field == "operation_type" and cond.operator in ("eq", "in") and cond.value is not None:
                values = frozenset(cond.value) if cond.operator == "in" else frozenset([cond.value])
                if None in values:
                    continue
                operations = values if operations is None else operations & values
                remaining.remove(cond)
    categories = frozenset(rule.category_scope) if rule.category_scope is not None else None
    return IndexedRule(rule, operations, categories, tuple(remaining))


# ---------------------------------------------------------------------------
# The compiled policy
# ---------------------------------------------------------------------------


def function_name(org_id: str, sha256: str) -> str:
    """The compiled functions' base name: a hash of the compiler version, the tenant and the policy's sha256."""
    digest = hashlib.sha256(f"{COMPILER_VERSION}\0{org_id}\0{sha256}".encode()).hexdigest()
    return f"policy_{digest[:16]}"


@dataclass(frozen=True)
class CompiledPolicy:
    """A policy compiled for one scope (``'*'`` or a tenant): the function name, the SQL for
    review and the decide / explain / retention bodies that ``memgov.install_policy`` receives.
    """

    policy: Policy
    org_id: str
    function_name: str
    sql: str  # the three functions as memgov.install_policy creates them: a review aid
    bodies: tuple[str, str, str]  # what install_policy receives: decide, explain, retention
    read_body: str | None = None  # the read class (memgov_pg.read_compiler); None: reads decided row by row

    def settings(self) -> dict[str, Any]:
        """``memgov.policy_settings(org)``: feedback and retention hold only what the
        policy sets; SQL applies its defaults to the rest. ``reads``: whether the policy
        decides reads (:attr:`Policy.governs_reads`); ``search.text_config``: the tenant's
        text search configuration, when the policy names one."""
        p = self.policy
        return {
            "version": p.version,
            "mode": p.mode,
            "on_policy_miss": p.on_policy_miss,
            "risk_thresholds": _thresholds(p),
            "feedback": settings_json(p.feedback),
            "sources": {k: list(v) for k, v in vars(p.sources).items()},
            "retention": settings_json(p.retention),
            "search": settings_json(p.search),
            "replay": settings_json(p.replay),
            "reads": p.governs_reads,
        }

    def rule_rows(self) -> list[dict[str, Any]]:
        """Rows of ``memgov.memory_policy_rules`` (enabled rules, evaluation order)."""
        rows = []
        for position, rule in enumerate(r for r in self.policy.rules if r.enabled):
            rows.append(
                {
                    "rule_id": rule.id,
                    "rule_key": rule.key,
                    "position": position,
                    "category": list(rule.category_scope) if rule.category_scope is not None else None,
                    "condition": rule.condition_json(),
                    "action": rule.action,
                    "priority": rule.priority,
                    "reason_codes": list(rule.reason_codes),
                    "description": rule.description,
                }
            )
        return rows

    def install_sql(self) -> str:
        """The statement `memgov deploy` runs: install and activate this version."""
        return self._call("install_policy")

    def stage_sql(self) -> str:
        """Install this version without activating it (a shadow's or a replay's candidate)."""
        return self._call("stage_policy")

    def revision_sql(self) -> str:
        """What a policy revision's upgrade runs: install this version and activate it as a
        deploy of its own, recorded even when the version is active already, so that the
        revision's downgrade (``memgov.undeploy_policy``) restores exactly the version that
        was active before it."""
        scope, version = literal(self.org_id), literal(self.policy.version)
        # a database whose memgov is older than revision 0002_second_release (a host's
        # revision may run before it) has no p_revision: the plain activation there
        activate = (
            "\nBEGIN\n"
            "    IF to_regprocedure('memgov.activate_policy(text, text, boolean)') IS NULL THEN\n"
            f"        PERFORM memgov.activate_policy({scope}, {version});\n"
            "    ELSE\n"
            f"        PERFORM memgov.activate_policy({scope}, {version}, p_revision => true);\n"
            "    END IF;\n"
            "END\n"
        )
        return self._revision_stage() + f"DO {dollar_quote(activate, 'activate')};\n"

    def _revision_stage(self) -> str:
        """The stage of a revision's deploy: a database whose memgov is older than read classes
        (revision 0002_second_release) stages the version without its read class function."""
        if self.read_body is None:
            return self.stage_sql()
        older = dataclasses.replace(self, read_body=None).stage_sql()
        stage = (
            "\nBEGIN\n"
            f"    IF to_regprocedure('memgov.stage_policy({', '.join(['text'] * 9 + ['jsonb'] * 2 + ['text'])})')"
            " IS NULL THEN\n"
            f"        PERFORM {older.removeprefix('SELECT ')}"
            "    ELSE\n"
            f"        PERFORM {self.stage_sql().removeprefix('SELECT ')}"
            "    END IF;\n"
            "END\n"
        )
        return f"DO {dollar_quote(stage, 'stage')};\n"

    def _call(self, function: str) -> str:
        p = self.policy
        args = [
            ("p_org_id", literal(self.org_id)),
            ("p_version", literal(p.version)),
            ("p_sha256", literal(p.sha256)),
            ("p_mode", literal(p.mode)),
            ("p_function_name", literal(self.function_name)),
            ("p_source_yaml", dollar_quote(p.source_text, "policy")),
            ("p_decide_body", dollar_quote(self.bodies[0], "decide")),
            ("p_explain_body", dollar_quote(self.bodies[1], "explain")),
            ("p_retention_body", dollar_quote(self.bodies[2], "retention")),
            *([("p_read_body", dollar_quote(self.read_body, "read"))] if self.read_body is not None else []),
            ("p_settings", jsonb_literal(self.settings())),
            ("p_rules", jsonb_literal(self.rule_rows())),
        ]
        body = ",\n    ".join(f"{name} => {value}" for name, value in args)
        return f"SELECT memgov.{function}(\n    {body});\n"

    def script(self) -> str:
        """What `memgov compile` prints: a psql script that deploys this version."""
        p = self.policy
        return (
            f"-- memgov policy {p.version} for {scope_text(self.org_id)}\n"
            f"-- source sha256 {p.sha256}, compiler {COMPILER_VERSION}\n"
            f"-- Run with psql as a member of memgov_admin; `memgov deploy` runs the same statement.\n"
            "BEGIN;\n" + self.install_sql() + "COMMIT;\n"
        )


def _thresholds(policy: Policy) -> dict[str, str]:
    t = policy.risk_thresholds
    return {"low_max": str(t.low_max), "medium_max": str(t.medium_max), "high_max": str(t.high_max)}


class _Emitter:
    def __init__(self, policy: Policy, org_id: str, name: str) -> None:
        self.policy = policy
        self.org_id = org_id
        self.name = name
        self.enforced = policy.mode != "monitor"

    # -- decisions ------------------------------------------------------------
    def decision(self, action: str, reason_codes: Sequence[str], rule_ids: Sequence[str]) -> str:
        """A decision carries the risk score and level: NULL unless the rules read them."""
        p = self.policy
        risk = ", ".join(name for name, _ in COMPUTED[DECISION_RISK].variables)
        return (
            f"ROW({literal(action)}, {text_array(reason_codes)}, {text_array(rule_ids)}, "
            f"{literal(p.version)}, {literal(p.mode)}, {literal(self.enforced)}, "
            f"{risk})::memgov.decision"
        )

    def miss(self) -> str:
        action = "deny" if self.policy.mode == "strict" else self.policy.on_policy_miss
        return self.decision(action, ["DEFAULT_POLICY"], [])

    def rule_decision(self, rule: Rule) -> str:
        return self.decision(rule.action, rule.reason_codes, [rule.id])

    # -- prologue: detectors, risk, strict completeness -------------------------
    def declarations(self, fields: frozenset[str], *, decision: bool) -> list[str]:
        """The variables of what the rules need computed (and, in a function that
        returns decisions, of the risk score every decision carries)."""
        computed = list(computed_for(fields))
        if decision and COMPUTED[DECISION_RISK] not in computed:
            computed.append(COMPUTED[DECISION_RISK])
        return [f"    {name} {type_};" for c in computed for name, type_ in c.variables]

    def prologue(self, fields: frozenset[str]) -> list[str]:
        """Compute each detector (and the risk score) at most once, and only when the rules read it."""
        return [self.computation(c) for c in computed_for(fields)]

    def computation(self, computed: Computed) -> str:
        thresholds = jsonb_literal(_thresholds(self.policy))
        # str.replace, not str.format: the thresholds are a literal, the statement fixed
        statement = computed.statement.replace("{risk_thresholds}", thresholds)
        return "    " + statement.replace("\n", "\n    ")

    def source_check(self) -> list[str]:
        """Only the roles of the policy's ``sources:`` map may claim a fact source.

        A write claims the source of its row: ``remember`` and ``update`` the new row's,
        ``forget`` the stored row's (removing a memory of a source is reserved to those who
        may claim it: a writer may not forget a ``system_rule`` memory). A read claims
        nothing: ``search`` and ``get`` are decided by the rules alone
        (:data:`CLAIMING_OPERATIONS`).

        PL/pgSQL prepares each expression it evaluates once per transaction, and a
        single-row write is a transaction: a write of an unrestricted source evaluates
        one small test, and only a restricted one the role tests (their function calls
        and permission checks), in one IF for all restricted sources.
        """
        restricted, refused = [], []
        for source in SOURCES:
            roles = self.policy.sources.roles_for(source)
            if "*" in roles:
                continue
            # pg_has_role per role, guarded by to_regrole: a role dropped since deploy grants nothing
            may = " OR ".join(
                f"coalesce(pg_has_role(p_actor, to_regrole({literal(role)}), 'MEMBER'), false)" for role in roles
            )
            restricted.append(literal(source))
            refused.append(f"(p_item.source = {literal(source)} AND NOT ({may or 'false'}))")
        if not refused:
            return []
        return [
            SOURCE_CHECK_COMMENT,
            f"{SOURCE_CHECK_TEST}{', '.join(restricted)}) THEN",
            "        IF " + "\n           OR ".join(refused) + " THEN",
            f"            RETURN {self.decision('deny', ['SOURCE_NOT_PERMITTED'], [])};",
            "        END IF;",
            "    END IF;",
        ]

    def strict_check(self, fields: frozenset[str]) -> list[str]:
        """Strict mode: deny a write when a value the rules read is NULL.

        Columns count whether the table declares them nullable or not (an
        evaluated JSON item may lack any); the detectors and content.length
        read fact_text; the operation, the actor and the risk score are never
        missing (the risk score counts a missing tenant or project itself).
        """
        if self.policy.mode != "strict":
            return []
        read: dict[str, str] = {}
        for field in sorted(fields):
            spec = lookup_field(field)
            if spec is not None and spec.strict_input is not None:
                read.setdefault(spec.strict_input, field_sql(spec.strict_input))
        if not read:
            return []
        cond = "\n       OR ".join(f"{expr} IS NULL" for expr in dict.fromkeys(read.values()))
        return [
            f"    -- strict mode: the policy reads {', '.join(read)}",
            f"    IF {cond} THEN",
            f"        RETURN {self.decision('deny', ['STRICT_INCOMPLETE'], [])};",
            "    END IF;",
        ]

    # -- the rule tree --------------------------------------------------------
    def rules_block(self, rules: Sequence[IndexedRule], indent: int) -> list[str]:
        pad = " " * indent
        out: list[str] = []
        for r in rules:
            cond = conditions_sql(r.conditions, r.rule.match)
            out.append(f"{pad}-- {r.rule.id} (priority {r.rule.priority})".replace("\n", " "))
            if cond == "true":
                out.append(f"{pad}RETURN {self.rule_decision(r.rule)};")
                return out  # later rules in this branch are unreachable
            cond = cond.replace("\n", "\n" + pad)
            out.append(f"{pad}IF {cond} THEN")
            out.append(f"{pad}    RETURN {self.rule_decision(r.rule)};")
            out.append(f"{pad}END IF;")
        return out

    def category_tree(self, rules: Sequence[IndexedRule], indent: int) -> list[str]:
        """Rules of one operation branch, dispatched on category.

        A category that some rule names gets a branch with its own rules and
        the wildcard ones, in priority order, ending in the miss decision; any
        other category falls through to the wildcard rules alone.
        """
        categories = sorted({c for r in rules if r.categories for c in r.categories})
        wildcard = [r for r in rules if r.categories is None]
        if not categories:
            return self.rules_block(wildcard, indent)

        def branch(cat: str, depth: int) -> list[str]:
            body = self.rules_block([r for r in rules if r.categories is None or cat in r.categories], depth)
            if not body or not body[-1].lstrip().startswith("RETURN"):
                body.append(f"{' ' * depth}RETURN {self.miss()};")
            return body

        def tree(cats: Sequence[str], depth: int) -> list[str]:
            p = " " * depth
            if len(cats) <= _LINEAR_DISPATCH_MAX:
                lines = []
                for i, cat in enumerate(cats):
                    lines.append(f"{p}{'IF' if i == 0 else 'ELSIF'} p_item.category = {literal(cat)} THEN")
                    lines.extend(branch(cat, depth + 4))
                lines.append(f"{p}END IF;")
                return lines
            mid = len(cats) // 2
            return [
                f'{p}IF p_item.category COLLATE "C" < {literal(cats[mid])} THEN',
                *tree(cats[:mid], depth + 4),
                f"{p}ELSE",
                *tree(cats[mid:], depth + 4),
                f"{p}END IF;",
            ]

        out = [f"{' ' * indent}-- dispatch on category ({len(categories)} named by rules)"]
        out.extend(tree(categories, indent))
        out.extend(self.rules_block(wildcard, indent))
        return out

    def decide_body(self, indexed: Sequence[IndexedRule]) -> list[str]:
        # contradictory operation_type tests leave a rule no operation: it never applies
        indexed = [r for r in indexed if r.operations is None or r.operations]
        operations = sorted({o for r in indexed if r.operations for o in r.operations})
        if not operations:
            return self.category_tree(indexed, 4)
        out = [f"    -- dispatch on operation_type ({', '.join(operations)} named by rules)"]
        for i, op in enumerate(operations):
            out.append(f"    {'IF' if i == 0 else 'ELSIF'} p_operation = {literal(op)} THEN")
            body = self.category_tree([r for r in indexed if r.operations is None or op in r.operations], 8)
            if not body or not body[-1].lstrip().startswith("RETURN"):
                body.append(f"        RETURN {self.miss()};")
            out.extend(body)
        out.append("    END IF;")
        out.extend(self.category_tree([r for r in indexed if r.operations is None], 4))
        return out

    # -- functions ------------------------------------------------------------
    def header(self, what: str) -> str:
        scope = scope_text(self.org_id)
        text = f"{what}: memgov policy {self.policy.version} for {scope} (sha256 {self.policy.sha256[:12]})"
        return "-- " + text.replace("\n", " ")

    def comment(self) -> str:
        """COMMENT ON the decide function: version, tenant (checked again), source hash."""
        org_id = check_tenant_id(self.org_id, allow_global=True)
        return f"memgov policy {self.policy.version} ({org_id}), sha256 {self.policy.sha256}"

    def function_sql(self, suffix: str, what: str, args: str, returns: str, source: str) -> str:
        """One function as memgov.install_policy creates it (a review aid)."""
        return "\n".join(
            [
                self.header(what),
                f"CREATE OR REPLACE FUNCTION memgov.{self.name}{suffix}({args})",
                f"RETURNS {returns}",
                "LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER",
                "AS " + dollar_quote(source, "body") + ";",
            ]
        )

    def review_sql(self) -> str:
        """The three functions and the decide function's comment (what `memgov compile` shows)."""
        write_args = "p_item memgov.long_term_memory_items, p_operation text, p_actor text"
        return "\n\n".join(
            [
                self.function_sql("", "Decides a write", write_args, "memgov.decision", self.decide_source())
                + f"\nCOMMENT ON FUNCTION memgov.{self.name}(memgov.long_term_memory_items, text, text) IS "
                f"{literal(self.comment())};",
                self.function_sql(
                    "_explain", "Explains a write decision rule by rule", write_args, "jsonb", self.explain_source()
                ),
                self.function_sql(
                    "_retention",
                    "Names the auto_delete rule that makes a row due",
                    "p_item memgov.long_term_memory_items",
                    "text",
                    self.retention_source(),
                ),
            ]
        )

    def decide_source(self) -> str:
        rules = self.policy.write_rules
        fields = self.policy.fields_read
        indexed = [index_rule(r) for r in rules]
        body = [
            TENANT_ROUTING_MARKER,  # first: no policy value may precede it
            *self.source_check(),
            *self.strict_check(fields),
            *self.prologue(fields),
            *self.decide_body(indexed),
            "    -- no rule matched",
            f"    RETURN {self.miss()};",
        ]
        return _body(["DECLARE", *self.declarations(fields, decision=True), "BEGIN", *body, "END"])

    def read_source(self) -> str | None:
        """The read class function's body (:mod:`memgov_pg.read_compiler`): the rules a ``get``
        can meet, as the decide function orders them, each with its category scope as a test."""
        rules = []
        fields: frozenset[str] = frozenset()  # what a read's rules read: its detectors run, no others
        for ir in (index_rule(r) for r in self.policy.write_rules):
            if ir.operations is not None and "get" not in ir.operations:
                continue
            fields |= ir.rule.fields_read
            category = (
                None
                if ir.categories is None
                else f"p_item.category IN ({', '.join(literal(c) for c in sorted(ir.categories))})"
            )
            rules.append((ir.rule.id, ir.rule.action, category, ir.conditions, ir.rule.match))
        return read_source(self.policy, rules, self.declarations(fields, decision=False), self.prologue(fields))

    def explain_source(self) -> str:
        rules = self.policy.write_rules
        fields = self.policy.fields_read
        entries = []
        for rule in rules:
            ir = index_rule(rule)
            scope_tests = []
            if ir.operations is not None:
                # contradictory operation tests leave no operation: the rule never applies
                operations = ", ".join(literal(o) for o in sorted(ir.operations))
                scope_tests.append(f"p_operation IN ({operations})" if operations else "false")
            if ir.categories is not None:
                scope_tests.append(f"p_item.category IN ({', '.join(literal(c) for c in sorted(ir.categories))})")
            in_scope = " AND ".join(scope_tests) or "true"
            conds = list(ir.conditions)
            if conds:
                whens = " ".join(
                    f"WHEN ({condition_sql(c)}) IS NOT TRUE THEN {jsonb_literal(c.to_json())}" for c in conds
                )
                first_failed = (
                    f"CASE {whens} END"
                    if rule.match == "all"
                    else (
                        f"CASE WHEN ({conditions_sql(conds, 'any')}) IS NOT TRUE"
                        f" THEN {jsonb_literal(conds[0].to_json())} END"
                    )
                )
            else:
                first_failed = "NULL::jsonb"
            matched = f"(({in_scope}) AND ({conditions_sql(conds, rule.match)})) IS TRUE"
            entries.append(
                "    v_rules := v_rules || jsonb_build_object(\n"
                f"        'rule_id', {literal(rule.id)}, 'priority', {rule.priority}, "
                f"'action', {literal(rule.action)},\n"
                f"        'in_scope', ({in_scope}) IS TRUE,\n"
                f"        'matched', {matched},\n"
                f"        'first_failed_condition', CASE WHEN ({in_scope}) THEN {first_failed} END);"
            )
        return _body(
            [
                "DECLARE",
                *self.declarations(fields, decision=True),
                "    v_rules jsonb := '[]'::jsonb;",
                "BEGIN",
                *self.prologue(fields),
                *entries,
                "    RETURN v_rules;",
                "END",
            ]
        )

    def retention_source(self) -> str:
        rules = self.policy.retention_rules
        fields = self.policy.retention_fields_read
        body = [
            "DECLARE",
            *self.declarations(fields, decision=False),
            "BEGIN",
            "    -- permanent_until_revoked rows are never deleted by an automatic process",
            "    IF p_item.retention_policy = 'permanent_until_revoked' THEN",
            "        RETURN NULL;",
            "    END IF;",
            *self.prologue(fields),
        ]
        for rule in rules:
            ir = index_rule(rule)
            tests = []
            if ir.categories is not None:
                tests.append(f"p_item.category IN ({', '.join(literal(c) for c in sorted(ir.categories))})")
            cond = conditions_sql(ir.conditions, rule.match)
            if cond != "true":
                tests.append(cond)
            test = " AND ".join(tests) or "true"
            body.append(f"    -- {rule.id} (priority {rule.priority})".replace("\n", " "))
            body.append(f"    IF {test} THEN")
            body.append(f"        RETURN {literal(rule.id)};")
            body.append("    END IF;")
        body += ["    RETURN NULL;", "END"]
        return _body(body)


def _body(lines: Sequence[str]) -> str:
    """A function body: memgov.install_policy wraps it in its fixed signature."""
    return "\n" + "\n".join(lines) + "\n"


def compile_policy(policy: Policy, org_id: str = "*") -> CompiledPolicy:
    """Compile a validated policy for the global scope (``'*'``) or one tenant.

    Anything but ``'*'`` and a valid tenant id raises InvalidTenantId (a MemgovError).
    """
    org_id = check_tenant_id(org_id, allow_global=True)
    name = function_name(org_id, policy.sha256)
    emitter = _Emitter(policy, org_id, name)
    sql = emitter.review_sql()
    bodies = (emitter.decide_source(), emitter.explain_source(), emitter.retention_source())
    return CompiledPolicy(policy, org_id, name, sql + "\n", bodies, emitter.read_source())
