"""The base of the policy reader: PyYAML nodes (every node knows its line) and
the typed scalars read from them, each mistake reported with its line.

:class:`NodeReader` collects findings as :class:`~memgov_pg.policy.model.PolicyError`
and reads the generic shapes (mappings with known keys, strings, one-line
labels, choices, booleans, bounded integers and numbers, durations); the
readers of conditions, rules and the top level build on it.
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
from .model import PolicyError
from .regex_checks import RegexChecker
from .vocabulary import INT4_MAX, MAX_LABEL

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"

_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
#: What a read returns after reporting a mistake (None may be a valid value).
_INVALID: Final = object()


def _one_line(text: str) -> str:
    """Messages quote user text: keep each finding on one line."""
    return _CONTROL_RE.sub(lambda m: repr(m.group())[1:-1], text)


def _peek_id(node: Node) -> str | None:
    """The rule's id as written (a string scalar), without validating it."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, ScalarNode)
                and key_node.tag == _STR
                and key_node.value == "id"
                and isinstance(value_node, ScalarNode)
                and value_node.tag == _STR
            ):
                value: str = value_node.value
                return value
    return None


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        _STR: "a string",
        _INT: "an integer",
        _FLOAT: "a number",
        _BOOL: "a boolean",
        _NULL: "null",
        _TIMESTAMP: "a timestamp",
    }.get(node.tag, f"a value tagged {node.tag}")


def _show(node: Node) -> str:
    if isinstance(node, ScalarNode):
        if node.tag == _STR:
            return repr(node.value)
        return f"{_kind(node)} ({node.value})" if node.tag != _NULL else "null"
    return _kind(node)


def _hint(word: str, candidates: Iterable[str], extra: Mapping[str, str] | None = None) -> str:
    if extra and word in extra:
        return f" (did you mean '{extra[word]}'?)"
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _one_of(values: Iterable[str]) -> str:
    return ", ".join(values)


class NodeReader:
    """Reports findings and reads the generic shapes of a policy file."""

    def __init__(self, filename: str, regex_checker: RegexChecker) -> None:
        self.file = filename
        self.regex_checker = regex_checker
        self.errors: list[PolicyError] = []
        self.warnings: list[PolicyError] = []
        self._constructor = SafeConstructor()

    # -- reporting ----------------------------------------------------------

    def error(self, where: Node | int, rule_id: str, message: str) -> None:
        """Record an error at ``where`` (a node or a line) for rule ``rule_id``; the text is kept on one line."""
        line = where if isinstance(where, int) else _line(where)
        self.errors.append(PolicyError(self.file, line, _one_line(rule_id), _one_line(message)))

    def warn(self, where: Node | int, rule_id: str, message: str) -> None:
        """Record a warning at ``where`` (a node or a line) for rule ``rule_id``; the text is kept on one line."""
        line = where if isinstance(where, int) else _line(where)
        self.warnings.append(PolicyError(self.file, line, _one_line(rule_id), _one_line(message), "warning"))

    # -- generic node helpers -----------------------------------------------

    def mapping(
        self,
        node: Node,
        rid: str,
        what: str,
        allowed: Sequence[str] | None,
        required: Sequence[str] = (),
    ) -> dict[str, tuple[ScalarNode, Node]] | None:
        """The string-keyed items of a mapping node; reports non-mappings, bad and
        duplicate keys, unknown keys (with a hint) and missing required keys."""
        if not isinstance(node, MappingNode):
            self.error(node, rid, f"{what} must be a mapping, got {_show(node)}")
            return None
        items: dict[str, tuple[ScalarNode, Node]] = {}
        merged = False
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self.error(key_node, rid, "YAML merge keys ('<<') are not supported")
                merged = True
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != _STR:
                self.error(
                    key_node,
                    rid,
                    f"keys of {what} must be strings, got {_show(key_node)} (quote it)",
                )
                continue
            key = key_node.value
            if key in items:
                first = _line(items[key][0])
                self.error(key_node, rid, f"duplicate key '{key}' in {what} (first at line {first})")
                continue
            if allowed is not None and key not in allowed:
                self.error(key_node, rid, f"unknown key '{key}' in {what}{_hint(key, allowed)}")
                continue
            items[key] = (key_node, value_node)
        for key in required:
            if key not in items and not merged:
                self.error(node, rid, f"missing required key '{key}' in {what}")
        return items

    def string(self, node: Node, rid: str, what: str, *, allow_empty: bool = False) -> str | None:
        """A string scalar without NUL (and, unless ``allow_empty``, not empty), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"{what} must be a string, got {_show(node)}")
            return None
        value: str = node.value
        if "\x00" in value:
            self.error(node, rid, f"{what} must not contain a NUL character")
            return None
        if not allow_empty and not value:
            self.error(node, rid, f"{what} must not be empty")
            return None
        return value

    def label(self, node: Node, rid: str, what: str, max_len: int = MAX_LABEL) -> str | None:
        """A one-line name (rule id, reason code, category, role): any printable
        text, quotes and SQL punctuation included, without surrounding spaces."""
        value = self.string(node, rid, what)
        if value is None:
            return None
        if _CONTROL_RE.search(value):
            self.error(node, rid, f"{what} must not contain control characters or newlines")
            return None
        if value != value.strip():
            self.error(node, rid, f"{what} must not start or end with spaces")
            return None
        if len(value) > max_len:
            self.error(node, rid, f"{what} is longer than {max_len} characters")
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
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"{what} must be one of {_one_of(values)}; got {_show(node)}")
            return None
        value: str = node.value
        if value not in values:
            self.error(
                node,
                rid,
                f"unknown {what} '{value}'{_hint(value, values, hints)}; expected one of {_one_of(values)}",
            )
            return None
        return value

    def boolean(self, node: Node, rid: str, what: str) -> bool | None:
        """A YAML boolean, or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != _BOOL:
            self.error(node, rid, f"{what} must be true or false, got {_show(node)}")
            return None
        return bool(self._constructor.construct_yaml_bool(node))

    def integer(self, node: Node, rid: str, what: str, lo: int = -INT4_MAX - 1, hi: int = INT4_MAX) -> int | None:
        """A YAML integer within ``lo``..``hi`` (int4 by default), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != _INT:
            self.error(node, rid, f"{what} must be an integer, got {_show(node)}")
            return None
        value = int(self._constructor.construct_yaml_int(node))
        if not lo <= value <= hi:
            self.error(node, rid, f"{what} must be between {lo} and {hi}, got {value}")
            return None
        return value

    def number(self, node: Node, rid: str, what: str, lo: Decimal | None, hi: Decimal | None) -> Decimal | None:
        """A finite integer or float as a Decimal within ``lo``..``hi`` (None: unbounded), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag not in (_INT, _FLOAT):
            self.error(node, rid, f"{what} must be a number, got {_show(node)}")
            return None
        if node.tag == _INT:
            value = Decimal(int(self._constructor.construct_yaml_int(node)))
        else:
            try:
                value = Decimal(node.value.replace("_", ""))
            except InvalidOperation:
                value = Decimal("NaN")
            if not value.is_finite():
                self.error(node, rid, f"{what} must be a finite number, got {node.value}")
                return None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.error(node, rid, f"{what} must be between {lo} and {hi}, got {node.value}")
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
            self.error(node, rid, f"{what}: {exc}")
            return None
