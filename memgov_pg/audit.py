"""The sealed decision log: ``memgov verify-log``.

The log and its hash chain are SQL (sql/080_audit.sql): ``memgov.run_maintenance()``
seals new rows, ``memgov.verify_decision_log()`` recomputes the chain. This
module only asks for the verification and says what it found, with a note on the
policy code that took the decisions: any deployed function that is not what its
deploy recorded (``memgov.policy_drift()``, as ``memgov doctor`` reports it).

An anchor (``SEAL_ID:HASH``) is a seal's hash kept outside the database: the
chain proves that nothing changed since it was sealed only against those who
cannot rewrite it; a superuser or memgov_owner can, and only a hash kept
elsewhere shows that they did.

A logical copy of the database (pg_dump / pg_restore) carries the rows' transaction ids
into a cluster whose counter starts lower: the first new decisions would sort before the
sealed ones and break the chain. ``memgov_pg.probes.counter_behind`` finds that case (before any new
write, or after) and ``counter_fix`` says what to do: ``pg_resetwal --epoch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .db import connect
from .errors import ExitCode, MemgovError
from .probes import SchemaMissing, counter_behind, counter_fix, policy_drift, require_schema
from .resources import query

_ANCHOR = re.compile(r"([1-9][0-9]{0,17}):([0-9a-fA-F]{64})")


class InvalidAnchor(MemgovError):
    """An --anchor that is not SEAL_ID:HASH: a usage error (exit 2, like click's)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Anchor:
    """A seal's hash as recorded outside the database."""

    seal_id: int
    hash: str

    def __str__(self) -> str:
        return f"{self.seal_id}:{self.hash}"


def parse_anchor(value: str) -> Anchor:
    """``SEAL_ID:HASH`` (the 64 hex digits `memgov verify-log` prints) as an Anchor."""
    match = _ANCHOR.fullmatch(value.strip())
    if match is None:
        raise InvalidAnchor(f"--anchor {value[:80]!r} is not SEAL_ID:HASH (a seal number and 64 hex digits)")
    return Anchor(int(match.group(1)), match.group(2).lower())


def verify(dsn: str, anchor: Anchor | None = None) -> dict[str, Any]:
    """``memgov.verify_decision_log()``: the chain recomputed (memgov_admin or a superuser)."""
    with connect(dsn, autocommit=True) as conn:
        require_schema(conn)
        installed = conn.execute(query("audit_installed")).fetchone()
        if not (installed and installed[0]):
            raise SchemaMissing(
                f"database {conn.info.dbname} has no sealed decision log yet: run `memgov migrate` first"
            )
        row = conn.execute(
            query("verify_decision_log"),
            {"anchor_seal_id": anchor.seal_id if anchor else None, "anchor_hash": anchor.hash if anchor else None},
        ).fetchone()
        drift = policy_drift(conn)
        behind = counter_behind(conn)
    assert row is not None
    report: dict[str, Any] = row[0]
    # a restored copy whose transaction counter is behind the chain (None: it is not)
    report["counter_behind"] = behind
    # the chain says nothing of the code that decided: code that is not what its deploy
    # recorded is noted beside it (None: a schema older than the comparison)
    report["policy_drift"] = drift
    return report


def describe_break(found: dict[str, Any]) -> str:
    """The first break as one line: where, what, and what it means."""
    where = []
    if found.get("seal_id") is not None:
        where.append(f"seal {found['seal_id']}")
    if found.get("decision_id") is not None:
        where.append(f"decision_id {found['decision_id']}")
    if found.get("change_id") is not None:  # a settings change the seal covers
        where.append(f"settings change {found['change_id']}")
    place = ", ".join(where) or "the log"
    return f"{place}: {found['problem']} ({found.get('detail') or 'differs from what was sealed'})"


def _scope(drift: dict[str, Any]) -> str:
    scope = "global" if drift["org_id"] == "*" else f"tenant {drift['org_id']}"
    return f"{scope}, version {drift['version']}" if drift.get("version") else scope


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def archive_line(run: dict[str, Any]) -> str:
    """One archive run: what it removed, up to when, who ran it, and a cut younger than the floor."""
    line = (
        f"archive {run['archive_id']} at {run['archived_at']} by {run['login']}: "
        f"{_count(run['rows'], 'row')} decided before {run['decided_before']}"
    )
    if run.get("below_floor"):
        line += " -- YOUNGER than the archive_min_age floor: recent decisions were removed"
    return line


def report_lines(report: dict[str, Any]) -> list[str]:
    """What `memgov verify-log` prints."""
    lines = []
    if report.get("counter_behind"):
        lines.append(f"transaction counter BEHIND: {counter_fix(report['counter_behind'])}")
    archived = report.get("archived") or {}
    seals, rows = _count(report["seals"], "seal"), _count(report["rows"], "row")
    settings = report.get("settings_changes") or {}
    if report["ok"]:
        lines.append(f"decision log intact: {seals} over {rows} verified")
    elif report.get("first_break") is None:
        lines.append(f"decision log intact: {seals} over {rows} verified; the record of settings changes is not")
    else:
        lines.append(f"decision log BROKEN at {describe_break(report['first_break'])}")
        lines.append(f"  verified before the break: {seals}, {rows}")
    if archived.get("archives"):
        lines.append(
            f"  archived: {_count(archived['rows'], 'row')} in {_count(archived['seals'], 'seal')} "
            f"({_count(archived['archives'], 'archive run')}); the chain goes on from the last one"
        )
        lines += [f"    {archive_line(run)}" for run in archived.get("runs") or ()]
    lines.append(
        f"  not yet sealed: {_count(report['unsealed_rows'], 'row')} (the next `memgov retention run` seals them)"
    )
    if settings.get("first_break"):
        found = settings["first_break"]
        lines.append(
            f"  settings changes BROKEN at change {found['change_id']}: {found['problem']} ({found['detail']})"
        )
    elif settings:
        last = f", the last {settings['last_change_id']}: {settings['last_hash']}" if settings.get("last_hash") else ""
        lines.append(f"  settings changes: {_count(settings['changes'], 'change')} recorded, chain intact{last}")
    if report.get("last_seal_id") is not None:
        lines.append(
            f"  last seal {report['last_seal_id']}: {report['last_hash']} "
            "(keep it outside the database; check it later with --anchor "
            f"{report['last_seal_id']}:{report['last_hash']})"
        )
    else:
        lines.append("  no seal yet: `memgov retention run` (or the pg_cron job) seals the log")
    drift = report.get("policy_drift")
    if drift:
        names = ", ".join(f"{d['function_name']} ({_scope(d)})" for d in drift[:3])
        more = f" and {len(drift) - 3} more" if len(drift) > 3 else ""
        lines.append(
            f"  policy code CHANGED since its deploy: {names}{more}: it decides with code that no deploy "
            "recorded (`memgov doctor` says what differs and how to restore it)"
        )
    elif drift is not None:
        lines.append("  policy code: every deployed function is the code its deploy recorded")
    if report.get("anchor") == "archived":
        lines.append("  anchor: that seal was archived with its rows; its hash can no longer be checked")
    elif report.get("anchor") == "matched":
        lines.append("  anchor: matched")
    return lines
