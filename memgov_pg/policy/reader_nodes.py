"""Reading a policy, the first stage: PyYAML nodes (every node knows its line) and the
typed scalars read from them, each mistake reported with its line and code.

A :class:`Reading` is the state of one read: the file's name, the regex checker,
the findings so far. Its methods read the generic shapes (mappings with known keys,
strings, one-line labels, choices, booleans, bounded integers and numbers,
durations); the readers of conditions (:mod:`.reader_conditions`), rules
(:mod:`.reader_rules`) and the top level (:mod:`.reader`) are functions that take
it. The passes over the finished model (:mod:`.lints`, :mod:`.satisfiable`) come after.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Final

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .durations import Duration, parse_duration
from .findings import PolicyError, error, warning
from .regex_checks import RegexChecker
from .vocabulary import INT4_MAX, MAX_LABEL

STR: Final = "tag:yaml.org,2002:str"
INT: Final = "tag:yaml.org,2002:int"
FLOAT: Final = "tag:yaml.org,2002:float"
BOOL: Final = "tag:yaml.org,2002:bool"
NULL: Final = "tag:yaml.org,2002:null"
TIMESTAMP: Final = "tag:yaml.org,2002:timestamp"
MERGE: Final = "tag:yaml.org,2002:merge"

CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
#: What a read returns after reporting a mistake (None may be a valid value).
INVALID: Final = object()
#: A mapping's string-keyed items: key -> (key node, value node).
Items = dict[str, tuple[ScalarNode, Node]]


def peek_id(node: Node) -> str | None:
    """The rule's id as written (a string scalar), without validating it."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, ScalarNode)
                and key_node.tag == STR
                and key_node.value == "id"
                and isinstance(value_node, ScalarNode)
                and value_node.tag == STR
            ):
                value: str = value_node.value
                return value
    return None


def line_of(node: Node) -> int:
    """The 1-based line where ``node`` starts."""
    return node.start_mark.line + 1


def is_null(node: Node) -> bool:
    """Whether ``node`` is YAML's null."""
    return isinstance(node, ScalarNode) and node.tag == NULL


def is_string(node: Node, value: str | None = None) -> bool:
    """Whether ``node`` is a string scalar (equal to ``value`` when given)."""
    return isinstance(node, ScalarNode) and node.tag == STR and (value is None or node.value == value)


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        STR: "a string",
        INT: "an integer",
        FLOAT: "a number",
        BOOL: "a boolean",
        NULL: "null",
        TIMESTAMP: "a timestamp",
    }.get(node.tag, f"a value tagged {node.tag}")


def show(node: Node) -> str:
    """What a node is, for a message: a quoted string, or its kind (and value)."""
    if isinstance(node, ScalarNode):
        if node.tag == STR:
            return repr(node.value)
        return f"{_kind(node)} ({node.value})" if node.tag != NULL else "null"
    return _kind(node)


def hint(word: str, candidates: Iterable[str], extra: Mapping[str, str] | None = None) -> str:
    """`` (did you mean 'x'?)`` for a close candidate (``extra``: fixed hints), else empty."""
    if extra and word in extra:
        return f" (did you mean '{extra[word]}'?)"
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def one_of(values: Iterable[str]) -> str:
    """The values, comma-separated."""
    return ", ".join(values)


class Reading:
    """One read of a policy file: reports findings and reads the generic shapes."""

    def __init__(self, filename: str, regex_checker: RegexChecker) -> None:
        self.file = filename
        self.regex_checker = regex_checker
        self.errors: list[PolicyError] = []
        self.warnings: list[PolicyError] = []
        self.constructor = SafeConstructor()

    # -- reporting ----------------------------------------------------------

    def error(self, where: Node | int, rule_id: str, code: str, message: str) -> None:
        """Record error ``code`` at ``where`` (a node or a line) for rule ``rule_id``."""
        line = where if isinstance(where, int) else line_of(where)
        self.errors.append(error(self.file, line, rule_id, code, message))

    def warn(self, where: Node | int, rule_id: str, code: str, message: str) -> None:
        """Record warning ``code`` at ``where`` (a node or a line) for rule ``rule_id``."""
        line = where if isinstance(where, int) else line_of(where)
        self.warnings.append(warning(self.file, line, rule_id, code, message))

    # -- generic node helpers -----------------------------------------------

    def mapping(
        self,
        node: Node,
        rid: str,
        what: str,
        allowed: Sequence[str] | None,
        required: Sequence[str] = (),
    ) -> Items | None:
        """The string-keyed items of a mapping node; reports non-mappings, bad and
        duplicate keys, unknown keys (with a hint) and missing required keys."""
        if not isinstance(node, MappingNode):
            self.error(node, rid, "MGP101", f"{what} must be a mapping, got {show(node)}")
            return None
        items: Items = {}
        merged = False
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                self.error(key_node, rid, "MGP102", "YAML merge keys ('<<') are not supported")
                merged = True
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != STR:
                self.error(
                    key_node,
                    rid,
                    "MGP103",
                    f"keys of {what} must be strings, got {show(key_node)} (quote it)",
                )
                continue
            key = key_node.value
            if key in items:
                first = line_of(items[key][0])
                self.error(key_node, rid, "MGP104", f"duplicate key '{key}' in {what} (first at line {first})")
                continue
            if allowed is not None and key not in allowed:
                self.error(key_node, rid, "MGP105", f"unknown key '{key}' in {what}{hint(key, allowed)}")
                continue
            items[key] = (key_node, value_node)
        for key in required:
            if key not in items and not merged:
                self.error(node, rid, "MGP106", f"missing required key '{key}' in {what}")
        return items

    def string(self, node: Node, rid: str, what: str, *, allow_empty: bool = False) -> str | None:
        """A string scalar without NUL (and, unless ``allow_empty``, not empty), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != STR:
            self.error(node, rid, "MGP107", f"{what} must be a string, got {show(node)}")
            return None
        value: str = node.value
        if "\x00" in value:
            self.error(node, rid, "MGP108", f"{what} must not contain a NUL character")
            return None
        if not allow_empty and not value:
            self.error(node, rid, "MGP109", f"{what} must not be empty")
            return None
        return value

    def label(self, node: Node, rid: str, what: str, max_len: int = MAX_LABEL) -> str | None:
        """A one-line name (rule id, reason code, category, role): any printable
        text, quotes and SQL punctuation included, without surrounding spaces."""
        value = self.string(node, rid, what)
        if value is None:
            return None
        if CONTROL_RE.search(value):
            self.error(node, rid, "MGP110", f"{what} must not contain control characters or newlines")
            return None
        if value != value.strip():
            self.error(node, rid, "MGP111", f"{what} must not start or end with spaces")
            return None
        if len(value) > max_len:
            self.error(node, rid, "MGP112", f"{what} is longer than {max_len} characters")
            return None
        return value

    def choice(
        self,
        node: Node,
        rid: str,
        what: str,
        values: Sequence[str],
        hints: Mapping[str, str] | None = None,
    ) -> str | None:
        """A string that is one of ``values`` (unknown ones reported with a did-you-mean hint), or None."""
        if not isinstance(node, ScalarNode) or node.tag != STR:
            self.error(node, rid, "MGP113", f"{what} must be one of {one_of(values)}; got {show(node)}")
            return None
        value: str = node.value
        if value not in values:
            self.error(
                node,
                rid,
                "MGP114",
                f"unknown {what} '{value}'{hint(value, values, hints)}; expected one of {one_of(values)}",
            )
            return None
        return value

    def boolean(self, node: Node, rid: str, what: str) -> bool | None:
        """A YAML boolean, or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != BOOL:
            self.error(node, rid, "MGP115", f"{what} must be true or false, got {show(node)}")
            return None
        return bool(self.constructor.construct_yaml_bool(node))

    def integer(self, node: Node, rid: str, what: str, lo: int = -INT4_MAX - 1, hi: int = INT4_MAX) -> int | None:
        """A YAML integer within ``lo``..``hi`` (int4 by default), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != INT:
            self.error(node, rid, "MGP116", f"{what} must be an integer, got {show(node)}")
            return None
        value = int(self.constructor.construct_yaml_int(node))
        if not lo <= value <= hi:
            self.error(node, rid, "MGP117", f"{what} must be between {lo} and {hi}, got {value}")
            return None
        return value

    def number(self, node: Node, rid: str, what: str, lo: Decimal | None, hi: Decimal | None) -> Decimal | None:
        """A finite integer or float as a Decimal within ``lo``..``hi`` (None: unbounded), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag not in (INT, FLOAT):
            self.error(node, rid, "MGP118", f"{what} must be a number, got {show(node)}")
            return None
        if node.tag == INT:
            value = Decimal(int(self.constructor.construct_yaml_int(node)))
        else:
            try:
                value = Decimal(node.value.replace("_", ""))
            except InvalidOperation:
                value = Decimal("NaN")
            if not value.is_finite():
                self.error(node, rid, "MGP119", f"{what} must be a finite number, got {node.value}")
                return None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.error(node, rid, "MGP120", f"{what} must be between {lo} and {hi}, got {node.value}")
            return None
        return value

    def duration(self, node: Node, rid: str, what: str) -> Duration | None:
        """A duration string (``N minutes|hours|days|weeks``), or None after reporting."""
        text = self.string(node, rid, what)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError as exc:
            self.error(node, rid, "MGP121", f"{what}: {exc}")
            return None
