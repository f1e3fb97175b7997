"""A policy's read class: the part of its ``get`` decision that depends on the row only.

Row level security asks a ``get`` decision for every row a writer or reviewer selects
(``memgov.readable``, sql/060_recall.sql). Most of that decision is a function of the row
alone: its category, columns, metadata, detectors and risk score. Only ``context.actor``
depends on who reads. So the compiler writes a fourth function,
``memgov.policy_<h>_read(p_item, p_actor) -> integer``:

* ``p_actor`` NULL (the write trigger, once per written row): the row's *read class*, a
  mask of 4 bits, bit ``r`` set when the policy lets a reader of class ``r`` read the row;
* ``p_actor`` given (once per statement, for the querying role): that reader's class
  ``r``, 0..3: bit 0 the truth of the first ``context.actor`` condition the read rules
  test, bit 1 of the second.

The decision is the compiled decide function's, for operation ``get``: the rules that can
apply to a read, in the same order, first match wins, ``on_policy_miss`` (strict mode: deny)
when none matches, strict mode's NULL check first, and monitor mode allowing everything.
Each ``context.actor`` condition is replaced by the bit of the reader class being tried.

A policy whose read rules cannot be decided ahead gets no read function (``None``), and
every read of it is decided row by row as before: a rule that compares a time with
``now()`` (its truth changes while the row stays), or more than two distinct
``context.actor`` conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .condition_sql import condition_sql, field_sql
from .policy.durations import RelativeTime
from .policy.model import Condition, Policy
from .policy.vocabulary import FieldOrigin, lookup_field
from .sql_literals import literal

#: The most ``context.actor`` conditions a precomputed read class distinguishes (4 classes).
MAX_ACTOR_CONDITIONS = 2
#: A row's mask when every reader class may read it (monitor mode, an allow for all).
ALL_READERS = (1 << (1 << MAX_ACTOR_CONDITIONS)) - 1


def _values(cond: Condition) -> Iterable[object]:
    return cond.value if isinstance(cond.value, tuple | list) else (cond.value,)


def _time_dependent(cond: Condition) -> bool:
    return any(isinstance(v, RelativeTime) for v in _values(cond))


def _is_actor(cond: Condition) -> bool:
    spec = lookup_field(cond.field)
    return spec is not None and spec.origin is FieldOrigin.ACTOR


def read_source(
    policy: Policy,
    rules: Sequence[tuple[str, str, str | None, Sequence[Condition], str]],
    declarations: Sequence[str],
    prologue: Sequence[str],
) -> str | None:
    """The body of ``memgov.policy_<h>_read``, or None when the policy's reads cannot be
    decided ahead (see the module's docstring).

    ``rules``: the rules that can apply to operation ``get``, in evaluation order, each as
    (id, action, its category test or None, its remaining conditions, match); ``declarations``
    and ``prologue``: the variables and statements of the computed values the rules read.
    """
    if not policy.governs_reads:
        return None
    actors: list[str] = []
    for _, _, _, conditions, _ in rules:
        for cond in conditions:
            if _time_dependent(cond):
                return None
            if _is_actor(cond) and condition_sql(cond) not in actors:
                actors.append(condition_sql(cond))
    if len(actors) > MAX_ACTOR_CONDITIONS:
        return None

    if policy.mode == "monitor":
        # nothing is enforced: every reader reads every row
        return f"\nBEGIN\n    RETURN CASE WHEN p_actor IS NULL THEN {ALL_READERS} ELSE 0 END;\nEND\n"

    def test(cond: Condition) -> str:
        sql = condition_sql(cond)
        return f"v_reader_{actors.index(sql)}" if _is_actor(cond) else sql

    whens = []
    for rule_id, action, category_test, conditions, match in rules:
        parts = [test(c) for c in conditions]
        joined = (" AND " if match == "all" else " OR ").join(f"({p})" for p in parts) if parts else "true"
        if category_test is not None:
            joined = f"{category_test} AND ({joined})"
        whens.append(f"                 -- {rule_id}".replace("\n", " "))
        whens.append(f"                 WHEN {joined} THEN {literal(action == 'allow')}")
    # no rule matched: on_policy_miss (strict mode denies)
    miss = "deny" if policy.mode == "strict" else policy.on_policy_miss
    missed = literal(miss == "allow")

    reader = " + ".join(f"CASE WHEN {sql} THEN {1 << i} ELSE 0 END" for i, sql in enumerate(actors)) or "0"
    lines = [
        "DECLARE",
        "    p_operation constant text := 'get';  -- what the rules' operation tests and the risk score read",
        *declarations,
        *(f"    v_reader_{i} boolean;" for i in range(len(actors))),
        "    v_allowed boolean;",
        "    v_mask integer := 0;",
        "BEGIN",
        "    IF p_actor IS NOT NULL THEN",
        "        -- the reader's class: which of the read rules' context.actor conditions it meets",
        f"        RETURN {reader};",
        "    END IF;",
        *_strict_check(policy),
        *prologue,
        f"    FOR v_class IN 0..{ALL_READERS.bit_length() - 1} LOOP",
        *(f"        v_reader_{i} := (v_class & {1 << i}) <> 0;" for i in range(len(actors))),
        *(
            ["        v_allowed := CASE", *whens, f"                 ELSE {missed}", "                 END;"]
            if whens
            else [f"        v_allowed := {missed};"]
        ),
        "        IF v_allowed THEN",
        "            v_mask := v_mask | (1 << v_class);",
        "        END IF;",
        "    END LOOP;",
        "    RETURN v_mask;",
        "END",
    ]
    return "\n" + "\n".join(lines) + "\n"


def _strict_check(policy: Policy) -> list[str]:
    """Strict mode denies every operation, reads included, when a value the rules read is
    NULL (as the decide function's strict check)."""
    if policy.mode != "strict":
        return []
    read: dict[str, str] = {}
    for field in sorted(policy.fields_read):
        spec = lookup_field(field)
        if spec is not None and spec.strict_input is not None:
            read.setdefault(spec.strict_input, field_sql(spec.strict_input))
    if not read:
        return []
    cond = "\n       OR ".join(f"{expr} IS NULL" for expr in dict.fromkeys(read.values()))
    return [f"    IF {cond} THEN", "        RETURN 0;  -- strict mode: denied to every reader", "    END IF;"]
