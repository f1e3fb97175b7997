"""``memgov approvals`` and ``memgov quarantine``: the review queues, as the connecting login
(docs/review.md). Reading goes through row level security (a reviewer sees the tenant of
``--tenant``, an admin every tenant); deciding goes through ``memgov.approve``, ``deny``,
``release_quarantine`` and ``purge_quarantine``, which refuse the login that made the write.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from ..errors import ExitCode
from .base import check_tenant, cli, dsn_option, emit, iso_timestamp, json_option
from .dsn import resolve_dsn

F = TypeVar("F", bound=Callable[..., Any])
_SUMMARY_WIDTH = 60


def _tenant_option(func: F) -> F:
    return click.option(
        "--tenant",
        metavar="ORG",
        callback=check_tenant,
        help="The tenant to review: required for a reviewer login; an admin sees every tenant without it.",
    )(func)


def _limit_option(func: F) -> F:
    return click.option(
        "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="At most this many, oldest first."
    )(func)


def _status_option(statuses: Sequence[str], default: str) -> Callable[[F], F]:
    return click.option(
        "--status",
        type=click.Choice([*statuses, "all"]),
        default=default,
        show_default=True,
        help="Only entries in this status.",
    )


_id_argument = click.argument("entry_id", metavar="ID", type=click.UUID)


# -- printing: every value from the database is escaped, so that a payload cannot rewrite the terminal


def printable(value: Any) -> str:
    """A value as one line of plain text: a string with every control or invisible character
    escaped (``\\n``, ``\\x1b``, ``\\u202e``) and its backslashes doubled (so that an escape
    cannot be forged), anything else as JSON (ASCII only)."""
    if isinstance(value, str):
        return "".join(
            c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii") for c in value
        )
    if isinstance(value, dt.datetime):
        return iso_timestamp(value)
    return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)


def _cut(text: str, width: int = _SUMMARY_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _summary(operation: str, payload: Mapping[str, Any], purged: bool = False) -> str:
    if purged:
        return "(payload purged)"
    if operation in ("search", "get"):
        return f"{operation} {printable(payload.get('query', payload.get('memory_id')))}"
    return f"{printable(payload.get('category'))}: {printable(payload.get('fact_text'))}"


def _rules(decision: Any, decision_id: int | None = None) -> str:
    if decision is None:
        return "(its decision is no longer in the log)"
    rules = ", ".join(decision.matched_rule_ids) or "on_policy_miss"
    codes = ", ".join(decision.reason_codes)
    logged = decision.decision_id or decision_id
    return printable(f"{rules} [{codes}] (policy {decision.policy_version}, decision {logged})")


def _table(header: Sequence[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    for row in [list(header), *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _print_payload(record: Any, verb: str) -> None:
    from ..review import WRITER_COLUMNS

    if getattr(record, "purged", False):
        click.echo("payload: erased (purged); the entry stays as a record")
        return
    payload = record.payload
    if record.operation in ("search", "get"):
        click.echo(f"asked: a {record.operation} the policy refused; it is never replayed (close it instead)")
        keys: Sequence[str] = sorted(payload)
    else:
        waiting = record.status in ("pending", "held")
        click.echo(
            f"payload: the {record.operation} as it was made" + (f"; {verb} applies exactly this" if waiting else "")
        )
        keys = [c for c in WRITER_COLUMNS if payload.get(c) is not None]
    for key in keys:
        click.echo(f"  {printable(key):<17} {printable(payload.get(key))}")
    changes = record.changes()
    if changes:
        click.echo(f"changes: what {verb} changes in the memory (now -> then)")
        for column, now, then in changes:
            click.echo(f"  {column:<17} {printable(now)} -> {printable(then)}")


def _when(value: dt.datetime) -> str:
    return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat(timespec="seconds")


def _who(login: str | None, role: str | None) -> str:
    """A login, and the role it acted as when that is another (SET ROLE)."""
    return printable(login) + ("" if role in (None, login) else f" (as {printable(role)})")


def _count(n: int, status: str, one: str, many: str, tenant: str | None) -> str:
    what = f"{'' if status == 'all' else status + ' '}{one if n == 1 else many}"
    return f"{n} {what} in {f'tenant {tenant}' if tenant else 'every tenant'}"


def _fields(pairs: Sequence[tuple[str, Any]]) -> None:
    for name, value in pairs:
        if value is not None:
            click.echo(f"  {name:<11} {value}")


# -- approvals ---------------------------------------------------------------------------------


@cli.group()
def approvals() -> None:
    """List, show, approve or deny the writes the policy held for a reviewer (memgov_reviewer)."""


def _approval(conn: Any, entry_id: uuid.UUID, tenant: str | None) -> Any:
    from ..resources import query
    from ..review import REQUEST_STATUSES, ApprovalRecord, list_params, not_found

    rows = _rows(conn, query("approvals_list"), list_params(REQUEST_STATUSES, None, 1, tenant, entry_id))
    if not rows:
        raise not_found("approval request", entry_id, tenant)
    return ApprovalRecord.from_row(rows[0])


def _rows(conn: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()  # type: ignore[no-any-return]


def _one(conn: Any, sql: str, params: dict[str, Any]) -> Mapping[str, Any]:
    row = conn.execute(sql, params).fetchone()
    return row[0] if row and isinstance(row[0], Mapping) else {}


@approvals.command(name="list")
@_tenant_option
@_status_option(("pending", "approved", "denied", "expired"), "pending")
@_limit_option
@dsn_option
@json_option
def approvals_list(tenant: str | None, status: str, limit: int, dsn: str | None, as_json: bool) -> None:
    """The approval requests the login may see, oldest first: id, tenant, operation, status,
    when and by which login, and what was written (category: text, cut)."""
    from ..resources import query
    from ..review import REQUEST_STATUSES, ApprovalRecord, list_params, reviewing

    params = list_params(REQUEST_STATUSES, None if status == "all" else status, limit, tenant, None)
    with reviewing(resolve_dsn(dsn), tenant) as conn:
        records = [ApprovalRecord.from_row(r) for r in _rows(conn, query("approvals_list"), params)]

    def text(_: Any) -> None:
        if records:
            _table(["REQUEST", "TENANT", "OPERATION", "STATUS", "REQUESTED", "LOGIN", "WHAT"], [
                [str(r.request_id), printable(r.org_id), r.operation, r.status, _when(r.requested_at),
                 printable(r.requested_login), _cut(_summary(r.operation, r.payload))]
                for r in records
            ])  # fmt: skip
        click.echo(_count(len(records), status, "request", "requests", tenant), err=True)

    emit([r.as_json() for r in records], as_json, text)


@approvals.command(name="show")
@_id_argument
@_tenant_option
@dsn_option
@json_option
def approvals_show(entry_id: uuid.UUID, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """One approval request, its payload whole: every column the writer set, the full text
    (never cut; control characters escaped), the rule that held it and, for an update, what
    approving it changes. --json: the payload as stored."""
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        record = _approval(conn, entry_id, tenant)

    def text(_: Any) -> None:
        click.echo(f"approval request {record.request_id}")
        decided = None
        if record.decided_at is not None:
            decided = f"{iso_timestamp(record.decided_at)} by {_who(record.decided_login, record.decided_by)}" + (
                f": {printable(record.note)}" if record.note else ""
            )
        _fields([
            ("tenant", printable(record.org_id)), ("status", record.status),
            ("operation", f"{record.operation}" + (f" of memory {record.memory_id}" if record.memory_id else "")),
            ("requested", f"{iso_timestamp(record.requested_at)} by "
                          f"{_who(record.requested_login, record.requested_by)}"),
            ("held by", _rules(record.decision)), ("decided", decided),
        ])  # fmt: skip
        _print_payload(record, "approving")

    emit(record.as_json(), as_json, text)


@approvals.command(name="approve")
@_id_argument
@_tenant_option
@click.option("--note", help="Why it is approved (kept in the request).")
@dsn_option
@json_option
def approvals_approve(
    entry_id: uuid.UUID, tenant: str | None, note: str | None, dsn: str | None, as_json: bool
) -> None:
    """Approve request ID: the active policy decides it again, then the write is applied as it
    was made. Never by the login that made the write (42501). Exit 1 when the policy now
    refuses it (the request is then denied)."""
    from ..decisions import ReviewResult
    from ..resources import query
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        record = _approval(conn, entry_id, tenant)
        result = ReviewResult.from_json(_one(conn, query("approve"), {"request_id": str(entry_id), "note": note}))
    decision = result.decision

    def text(_: Any) -> None:
        if result.status == "approved":
            click.echo(f"approved request {entry_id}: the {record.operation} is applied"
                       + (f" (memory {result.memory_id})" if result.memory_id else ""))  # fmt: skip

    emit(dict(result.raw), as_json, text)
    if result.status != "approved":
        click.echo(f"memgov: error: request {entry_id} is not approved: the active policy now refuses it, by "
                   f"{_rules(decision)}; the request is denied", err=True)  # fmt: skip
        sys.exit(ExitCode.FAILED)


@approvals.command(name="deny")
@_id_argument
@_tenant_option
@click.option("--reason", help="Why it is denied (kept in the request as its note).")
@dsn_option
@json_option
def approvals_deny(entry_id: uuid.UUID, tenant: str | None, reason: str | None, dsn: str | None, as_json: bool) -> None:
    """Deny request ID: nothing is applied (a held INSERT's pending row is removed). Never by
    the login that made the write (42501)."""
    from ..decisions import ReviewResult
    from ..resources import query
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        _approval(conn, entry_id, tenant)
        result = ReviewResult.from_json(_one(conn, query("deny"), {"request_id": str(entry_id), "note": reason}))
    emit(dict(result.raw), as_json, lambda _: click.echo(f"denied request {entry_id}"))


# -- quarantine --------------------------------------------------------------------------------


@cli.group()
def quarantine() -> None:
    """List, show, release or purge the writes the policy quarantined (memgov_reviewer)."""


def _entry(conn: Any, entry_id: uuid.UUID, tenant: str | None) -> Any:
    from ..resources import query
    from ..review import QUARANTINE_STATUSES, QuarantineRecord, list_params, not_found

    rows = _rows(conn, query("quarantine_list"), list_params(QUARANTINE_STATUSES, None, 1, tenant, entry_id))
    if not rows:
        raise not_found("quarantine entry", entry_id, tenant)
    return QuarantineRecord.from_row(rows[0])


@quarantine.command(name="list")
@_tenant_option
@_status_option(("held", "released", "purged"), "held")
@_limit_option
@dsn_option
@json_option
def quarantine_list(tenant: str | None, status: str, limit: int, dsn: str | None, as_json: bool) -> None:
    """The quarantine entries the login may see, oldest first: id, tenant, operation, status,
    when and by which login, the rule that diverted it and what was written (cut)."""
    from ..resources import query
    from ..review import QUARANTINE_STATUSES, QuarantineRecord, list_params, reviewing

    params = list_params(QUARANTINE_STATUSES, None if status == "all" else status, limit, tenant, None)
    with reviewing(resolve_dsn(dsn), tenant) as conn:
        records = [QuarantineRecord.from_row(r) for r in _rows(conn, query("quarantine_list"), params)]

    def text(_: Any) -> None:
        if records:
            _table(["ENTRY", "TENANT", "OPERATION", "STATUS", "QUARANTINED", "LOGIN", "RULE", "WHAT"], [
                [str(r.quarantine_id), printable(r.org_id), r.operation, r.status, _when(r.quarantined_at),
                 printable(r.quarantined_login), printable(",".join(r.decision.matched_rule_ids) or "-"),
                 _cut(_summary(r.operation, r.payload, r.purged))]
                for r in records
            ])  # fmt: skip
        click.echo(_count(len(records), status, "entry", "entries", tenant), err=True)

    emit([r.as_json() for r in records], as_json, text)


@quarantine.command(name="show")
@_id_argument
@_tenant_option
@dsn_option
@json_option
def quarantine_show(entry_id: uuid.UUID, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """One quarantine entry, its payload whole (as `approvals show`), and the decision that
    diverted it. --json: the payload as stored."""
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        record = _entry(conn, entry_id, tenant)

    def text(_: Any) -> None:
        click.echo(f"quarantine entry {record.quarantine_id}")
        resolved = None
        if record.resolved_at is not None:
            resolved = f"{iso_timestamp(record.resolved_at)} by {_who(record.resolved_login, record.resolved_by)}"
        _fields([
            ("tenant", printable(record.org_id)), ("status", record.status),
            ("operation", f"{record.operation}" + (f" of memory {record.memory_id}" if record.memory_id else "")),
            ("written", f"{iso_timestamp(record.quarantined_at)} by "
                        f"{_who(record.quarantined_login, record.quarantined_by)}"),
            ("diverted by", _rules(record.decision, record.decision_id)), ("resolved", resolved),
        ])  # fmt: skip
        _print_payload(record, "releasing")

    emit(record.as_json(), as_json, text)


@quarantine.command(name="release")
@_id_argument
@_tenant_option
@dsn_option
@json_option
def quarantine_release(entry_id: uuid.UUID, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Release entry ID: the write is applied as it was made, unless the active policy now
    denies it (MG403, exit 1). Never by the login that made the write (42501)."""
    from ..decisions import QuarantineResult
    from ..resources import query
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        record = _entry(conn, entry_id, tenant)
        result = QuarantineResult.from_json(_one(conn, query("release_quarantine"), {"quarantine_id": str(entry_id)}))
    emit(dict(result.raw), as_json, lambda _: click.echo(
        f"released quarantine entry {entry_id}: the {record.operation} is applied"
        + (f" (memory {result.memory_id})" if result.memory_id else "")
    ))  # fmt: skip


@quarantine.command(name="purge")
@_id_argument
@_tenant_option
@dsn_option
@json_option
def quarantine_purge(entry_id: uuid.UUID, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Purge entry ID: its payload is erased; the entry stays as a record."""
    from ..decisions import QuarantineResult
    from ..resources import query
    from ..review import reviewing

    with reviewing(resolve_dsn(dsn), tenant) as conn:
        _entry(conn, entry_id, tenant)
        result = QuarantineResult.from_json(_one(conn, query("purge_quarantine"), {"quarantine_id": str(entry_id)}))
    emit(dict(result.raw), as_json, lambda _: click.echo(f"purged quarantine entry {entry_id}: its payload is erased"))
