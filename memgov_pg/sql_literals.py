"""SQL literals: the only way a policy value reaches the SQL the compiler writes.

Strings, numbers, booleans, timestamps, text arrays, jsonb documents and
dollar-quoted bodies, each quoted so that its meaning does not depend on the
session's settings.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

_CONTROL = re.compile(r"[\x01-\x1f\x7f]")


def literal(value: Any) -> str:
    """An SQL literal for a policy value.

    Strings become ``E'...'`` literals with backslashes and quotes doubled, so
    their meaning does not depend on ``standard_conforming_strings``; NUL, which
    PostgreSQL text cannot hold, is refused. Control characters (line breaks
    included) are written as ``\\xhh`` escapes: a literal never spans lines, so
    no value can forge a line of the compiled code (such as the tenant routing
    marker that memgov.rebuild_dispatch looks for).
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"not a finite number: {value}")
        return format(value, "f")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text values cannot contain NUL characters")
        quoted = value.replace("'", "''")
        if "\\" in value or _CONTROL.search(value):
            # E'' keeps the meaning whatever standard_conforming_strings says
            escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", quoted.replace("\\", "\\\\"))
            return "E'" + escaped + "'"
        return "'" + quoted + "'"
    if isinstance(value, dt.datetime):
        return f"{literal(value.isoformat())}::timestamptz"
    raise TypeError(f"no SQL literal for {value!r}")


def text_array(values: Iterable[str]) -> str:
    """A ``text[]`` literal of ``values`` (each quoted by :func:`literal`)."""
    items = [literal(v) for v in values]
    return f"ARRAY[{', '.join(items)}]::text[]" if items else "ARRAY[]::text[]"


def jsonb_literal(doc: Any) -> str:
    """A ``jsonb`` literal of ``doc`` (compact JSON, keys sorted, quoted by :func:`literal`)."""
    return f"{literal(json.dumps(doc, sort_keys=True, separators=(',', ':')))}::jsonb"


def dollar_quote(body: str, tag: str) -> str:
    """``$tag$body$tag$`` with a tag that does not occur in ``body``."""
    candidate, n = tag, 0
    while f"${candidate}$" in body:
        n += 1
        candidate = f"{tag}{n}"
    return f"${candidate}${body}${candidate}$"
