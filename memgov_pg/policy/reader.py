"""Reading a policy: YAML text -> the typed model (a :class:`~memgov_pg.policy.model.Policy`),
every mistake reported with its line and code.

:func:`read_policy` reads the top level and the settings sections (``defaults``,
``risk_thresholds``, ``feedback``, ``sources``, ``retention``, ``search``,
``replay``) here; the rules and their conditions come from :mod:`.reader_rules`
and :mod:`.reader_conditions`, the generic shapes from :mod:`.reader_nodes`. The
checks of the rules together are passes over what it returns (memgov_pg.policy.api).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .model import (
    BATCH_SIZE_RANGE,
    FEEDBACK_BOUNDS,
    TEXT_CONFIG_RE,
    Feedback,
    Policy,
    Replay,
    Retention,
    RiskThresholds,
    Rule,
    Search,
    SourceGrants,
)
from .reader_nodes import Items, Reading, is_null, is_string, show
from .reader_rules import read_rules
from .vocabulary import (
    ACTION_ALIASES,
    DEFAULT_MODE,
    DEFAULT_ON_POLICY_MISS,
    MAX_ROLE,
    MODES,
    SOURCES,
    WRITE_ACTIONS,
)

#: The top-level keys of a policy file.
TOP_KEYS = (
    "version",
    "description",
    "mode",
    "defaults",
    "risk_thresholds",
    "feedback",
    "sources",
    "retention",
    "search",
    "replay",
    "rules",
)
#: The keys of ``retention:``.
RETENTION_KEYS = ("schedule", "batch_size", "confidence_floor", "confidence_grace", "approval_ttl")
#: The keys of ``search:``.
SEARCH_KEYS = ("text_config",)
#: The keys of ``replay:``.
REPLAY_KEYS = ("sample_rate", "keep")
#: The keys of ``risk_thresholds:``.
RISK_THRESHOLD_KEYS = ("low_max", "medium_max", "high_max")
SEMVER_RE: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_CRON_FIELD_RE: Final = re.compile(r"[0-9A-Za-z*,/\-]+")
_ZERO = Decimal(0)
_ONE = Decimal(1)


@dataclass(frozen=True)
class ReadPolicy:
    """What reading a policy gives the passes: the policy, and its rules on their own.

    ``policy`` is None when the reading found an error (in the :class:`Reading`), and its
    ``warnings`` are empty (memgov_pg.policy.api attaches every warning). ``rules`` are
    the rules read without error, in evaluation order, even when the policy as a whole
    has errors: the passes over the rules report on them in the same run.
    """

    policy: Policy | None
    rules: tuple[Rule, ...]


def read_policy(r: Reading, text: str, raw: bytes, path: Path | None) -> ReadPolicy:
    """The policy in ``text`` (``raw``: its bytes, for the sha256; ``path``: where it came from)."""
    root = compose(r, text)
    if root is None:
        return ReadPolicy(None, ())
    top = r.mapping(root, "-", "the policy", TOP_KEYS, required=("version",))
    if top is None:
        return ReadPolicy(None, ())

    version = None
    if "version" in top:
        version = read_version(r, top["version"][1])
    description = None
    if "description" in top:
        description = r.string(top["description"][1], "-", "description", allow_empty=True)
    mode: str | None = DEFAULT_MODE
    if "mode" in top:
        mode = r.choice(top["mode"][1], "-", "mode", MODES)
    on_miss = read_defaults(r, top.get("defaults"))
    thresholds = read_risk_thresholds(r, top.get("risk_thresholds"))
    feedback = read_feedback(r, top.get("feedback"))
    sources = read_sources(r, top.get("sources"))
    retention = read_retention(r, top.get("retention"))
    search = read_search(r, top.get("search"))
    replay = read_replay(r, top.get("replay"))
    rules = read_rules(r, top.get("rules"), root)

    if (
        r.errors
        or version is None
        or mode is None
        or on_miss is None
        or thresholds is None
        or feedback is None
        or sources is None
        or retention is None
        or search is None
        or replay is None
    ):
        return ReadPolicy(None, rules)
    policy = Policy(
        version=version,
        mode=mode,  # type: ignore[arg-type]
        on_policy_miss=on_miss,  # type: ignore[arg-type]
        risk_thresholds=thresholds,
        feedback=feedback,
        sources=sources,
        retention=retention,
        rules=rules,
        source_path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        warnings=(),
        description=description,
        source_text=text,
        search=search,
        replay=replay,
    )
    return ReadPolicy(policy, rules)


def compose(r: Reading, text: str) -> MappingNode | None:
    """The YAML document's top-level mapping, or None after reporting."""
    line = 1
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "cannot parse"
        if exc.context and exc.problem:
            problem = f"{exc.context}: {exc.problem}"
    except yaml.YAMLError as exc:
        problem = str(exc)
    else:
        if root is None:
            r.error(1, "-", "MGP004", "the policy file is empty")
            return None
        if not isinstance(root, MappingNode):
            r.error(root, "-", "MGP005", f"the top level of a policy must be a mapping, got {show(root)}")
            return None
        return root
    r.error(line, "-", "MGP003", f"invalid YAML: {problem}")
    return None


def read_version(r: Reading, node: Node) -> str | None:
    """``version:``: a quoted semver string, or None after reporting."""
    if not is_string(node):
        r.error(
            node,
            "-",
            "MGP201",
            f'version must be a quoted semver string like "1.2.0", got {show(node)}',
        )
        return None
    value: str = node.value
    if not SEMVER_RE.fullmatch(value):
        r.error(node, "-", "MGP202", f"version '{value}' is not a semver version (like 1.2.0)")
        return None
    return value


def optional_section(
    r: Reading, item: tuple[ScalarNode, Node] | None, what: str, allowed: Sequence[str]
) -> Items | None:
    """An optional mapping section; absent or null -> {} (all defaults)."""
    if item is None:
        return {}
    node = item[1]
    if is_null(node):
        return {}
    return r.mapping(node, "-", what, allowed)


def read_defaults(r: Reading, item: tuple[ScalarNode, Node] | None) -> str | None:
    """``defaults.on_policy_miss``, canonical (the default when absent), or None after reporting."""
    section = optional_section(r, item, "defaults", ("on_policy_miss",))
    if section is None:
        return None
    if "on_policy_miss" not in section:
        return DEFAULT_ON_POLICY_MISS
    node = section["on_policy_miss"][1]
    if is_string(node, "auto_delete"):
        r.error(node, "-", "MGP203", "on_policy_miss must be a write action, not auto_delete")
        return None
    choices = WRITE_ACTIONS + tuple(ACTION_ALIASES)
    value = r.choice(node, "-", "on_policy_miss action", choices)
    return None if value is None else ACTION_ALIASES.get(value, value)


def read_risk_thresholds(r: Reading, item: tuple[ScalarNode, Node] | None) -> RiskThresholds | None:
    """``risk_thresholds:`` (defaults where absent; must increase), or None after reporting."""
    section = optional_section(r, item, "risk_thresholds", RISK_THRESHOLD_KEYS)
    if section is None:
        return None
    default = RiskThresholds()
    values: dict[str, Decimal] = {}
    ok = True
    for name in RISK_THRESHOLD_KEYS:
        if name in section:
            v = r.number(section[name][1], "-", f"risk_thresholds.{name}", _ZERO, _ONE)
            if v is None:
                ok = False
                continue
            values[name] = v
    if not ok:
        return None
    result = dataclasses.replace(default, **values)
    if not result.low_max < result.medium_max < result.high_max:
        where = item[0] if item is not None else 1
        r.error(
            where,
            "-",
            "MGP204",
            "risk_thresholds must increase: low_max < medium_max < high_max"
            f" (got {result.low_max}, {result.medium_max}, {result.high_max})",
        )
        return None
    return result


def read_feedback(r: Reading, item: tuple[ScalarNode, Node] | None) -> Feedback | None:
    """``feedback:`` (None where not set), or None after reporting."""
    section = optional_section(r, item, "feedback", tuple(FEEDBACK_BOUNDS))
    if section is None:
        return None
    values: dict[str, Decimal] = {}
    ok = True
    for name, (lo, hi) in FEEDBACK_BOUNDS.items():
        if name in section:
            v = r.number(section[name][1], "-", f"feedback.{name}", lo, hi)
            if v is None:
                ok = False
            else:
                values[name] = v
    return dataclasses.replace(Feedback(), **values) if ok else None


def read_sources(r: Reading, item: tuple[ScalarNode, Node] | None) -> SourceGrants | None:
    """``sources:``: the roles that may claim each fact source (defaults where absent), or None after reporting."""
    section = optional_section(r, item, "sources", SOURCES)
    if section is None:
        return None
    values: dict[str, tuple[str, ...]] = {}
    ok = True
    for name in SOURCES:
        if name not in section:
            continue
        node = section[name][1]
        if not isinstance(node, SequenceNode):
            r.error(node, "-", "MGP205", f"sources.{name} must be a list of roles, got {show(node)}")
            ok = False
            continue
        roles: list[str] = []
        for role_node in node.value:
            role = r.label(role_node, "-", f"a role in sources.{name}", MAX_ROLE)
            if role is None:
                ok = False
            elif role not in roles:
                roles.append(role)
        values[name] = tuple(roles)
    return dataclasses.replace(SourceGrants(), **values) if ok else None


def read_retention(r: Reading, item: tuple[ScalarNode, Node] | None) -> Retention | None:
    """``retention:`` (None where not set), or None after reporting."""
    section = optional_section(r, item, "retention", RETENTION_KEYS)
    if section is None:
        return None
    values: dict[str, Any] = {}
    ok = True

    def put(name: str, value: Any) -> None:
        nonlocal ok
        if value is None:
            ok = False
        else:
            values[name] = value

    if "schedule" in section:
        put("schedule", read_cron(r, section["schedule"][1]))
    if "batch_size" in section:
        put(
            "batch_size",
            r.integer(section["batch_size"][1], "-", "retention.batch_size", *BATCH_SIZE_RANGE),
        )
    if "confidence_floor" in section:
        node = section["confidence_floor"][1]
        put(
            "confidence_floor",
            r.number(node, "-", "retention.confidence_floor", _ZERO, _ONE),
        )
    for name in ("confidence_grace", "approval_ttl"):
        if name in section:
            put(name, r.duration(section[name][1], "-", f"retention.{name}"))
    return dataclasses.replace(Retention(), **values) if ok else None


def read_search(r: Reading, item: tuple[ScalarNode, Node] | None) -> Search | None:
    """``search:`` (None where not set), or None after reporting."""
    section = optional_section(r, item, "search", SEARCH_KEYS)
    if section is None:
        return None
    if "text_config" not in section:
        return Search()
    node = section["text_config"][1]
    name = r.string(node, "-", "search.text_config")
    if name is None:
        return None
    if not TEXT_CONFIG_RE.fullmatch(name):
        r.error(
            node, "-", "MGP206", f"search.text_config '{name}' is not a text search configuration name"
            " (e.g. simple, english, pg_catalog.german)",
        )  # fmt: skip
        return None
    return Search(text_config=name)


def read_replay(r: Reading, item: tuple[ScalarNode, Node] | None) -> Replay | None:
    """``replay:`` (None where not set), or None after reporting."""
    section = optional_section(r, item, "replay", REPLAY_KEYS)
    if section is None:
        return None
    rate = keep = None
    if "sample_rate" in section:
        rate = r.number(section["sample_rate"][1], "-", "replay.sample_rate", _ZERO, _ONE)
    if "keep" in section:
        keep = r.duration(section["keep"][1], "-", "replay.keep")
    if ("sample_rate" in section and rate is None) or ("keep" in section and keep is None):
        return None
    return Replay(sample_rate=rate, keep=keep)


def read_cron(r: Reading, node: Node) -> str | None:
    """``retention.schedule``: five pg_cron fields, spaces normalised, or None after reporting."""
    text = r.string(node, "-", "retention.schedule")
    if text is None:
        return None
    value = " ".join(text.split())
    fields = value.split(" ")
    # pg_cron 1.4 takes five fields; its 'N seconds' schedules came with 1.5
    if len(fields) == 5 and all(_CRON_FIELD_RE.fullmatch(f) for f in fields):
        return value
    r.error(
        node,
        "-",
        "MGP207",
        f"retention.schedule '{text}' is not a pg_cron schedule: expected five cron fields"
        " (minute hour day-of-month month day-of-week, GMT)",
    )
    return None
