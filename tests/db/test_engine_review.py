"""The review queues through MemoryPolicyEngine and SyncMemoryPolicyEngine, as real logins:
list and show read what row level security lets the login see, release and purge resolve
quarantine entries, and four eyes hold (the login that made a write cannot release it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from memgov_pg import (
    ApprovalRecord,
    MemoryPolicyEngine,
    NotFoundError,
    NotPermittedError,
    PolicyDeniedError,
    QuarantineRecord,
    SyncMemoryPolicyEngine,
)
from tests.attack_helpers import (
    OTHER,
    POLICY,
    Login,
    Logins,
    deploy_policy,
    insert,
    item,
    login_dsn,
    memory,
    quarantine_of,
    request_of,
    unchanged,
)


def engine_of(memgov_dsn: str, role: str, org: str = "acme") -> SyncMemoryPolicyEngine:
    return SyncMemoryPolicyEngine.connect(login_dsn(memgov_dsn, role), org_id=org, max_size=1)


def quarantined_by(
    conn: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any
) -> tuple[uuid.UUID, uuid.UUID]:
    memory_id = uuid.uuid4()
    assert insert(conn, item("quarantined", memory_id=memory_id, **extra)).rowcount == 0
    return memory_id, quarantine_of(su, memory_id)


def test_list_and_show_the_tenants_requests(su, writer, login: Login, logins: Logins, memgov_dsn):
    memory_id = insert(writer, item("held", fact_text="likes tea, strong")).fetchone()[0]
    request_id = request_of(su, memory_id)
    theirs = request_of(su, insert(login(logins.gwriter, OTHER), item("held", org=OTHER)).fetchone()[0])
    with engine_of(memgov_dsn, logins.reviewer) as app:
        (listed,) = app.list_approvals()
        shown = app.show_approval(request_id)
        assert app.list_approvals("approved") == () and len(app.list_approvals(None)) == 1
        with pytest.raises(NotFoundError) as missing:  # another tenant's id looks missing
            app.show_approval(theirs)
        with pytest.raises(ValueError, match="status is one of pending, approved, denied, expired"):
            app.list_approvals("held")
        with pytest.raises(ValueError, match="limit is 1 to 1000"):
            app.list_approvals(limit=0)
    assert isinstance(listed, ApprovalRecord) and listed == shown
    assert (shown.request_id, shown.memory_id, shown.org_id, shown.status) == (request_id, memory_id, "acme", "pending")
    assert shown.payload["fact_text"] == "likes tea, strong" and shown.requested_login == logins.writer
    assert shown.decision is not None and shown.decision.matched_rule_ids == ("hold-uncertain-preferences",)
    assert shown.as_json()["decision"]["action"] == "require_approval"
    assert missing.value.sqlstate == "MG404"

    async def scenario() -> tuple[ApprovalRecord, ...]:
        async with await MemoryPolicyEngine.connect(login_dsn(memgov_dsn, logins.reviewer), org_id="acme") as app:
            assert (await app.show_approval(request_id)).request_id == request_id
            return await app.list_approvals()

    assert [r.request_id for r in asyncio.run(scenario())] == [request_id]


def test_a_writer_may_not_read_the_queues(su, writer, logins: Logins, memgov_dsn):
    quarantined_by(writer, su)
    with engine_of(memgov_dsn, logins.writer) as agent:
        with pytest.raises(NotPermittedError):
            agent.list_quarantine()
        with pytest.raises(NotPermittedError):
            agent.list_approvals()


def test_release_and_purge(su, writer, login: Login, logins: Logins, memgov_dsn):
    released_memory, to_release = quarantined_by(writer, su)
    _, to_purge = quarantined_by(writer, su, fact_text="mail me at x@example.com")
    _, own = quarantined_by(login(logins.both), su, fact_text="call me at olena@example.org")
    with engine_of(memgov_dsn, logins.reviewer) as app:
        listed = app.list_quarantine()
        assert [e.quarantine_id for e in listed] == [to_release, to_purge, own]
        assert all(isinstance(e, QuarantineRecord) for e in listed)
        assert listed[0].decision.matched_rule_ids == ("quarantine-untrusted-pii",)
        released = app.release_quarantine(to_release)
        assert (released.status, released.memory_id) == ("released", released_memory)
        assert app.purge_quarantine(to_purge).status == "purged"
        purged = app.show_quarantine(to_purge)
        assert (purged.status, purged.purged, purged.payload) == ("purged", True, {"purged": True})
        assert [e.quarantine_id for e in app.list_quarantine()] == [own]
    assert memory(su, released_memory)["status"] == "active"

    # four eyes: the login that made the write may neither release nor purge it
    with engine_of(memgov_dsn, logins.both) as both, unchanged(su, "a release or purge by its own writer"):
        with pytest.raises(NotPermittedError) as info:
            both.release_quarantine(own)
        assert "cannot decide its own write" in str(info.value)
        with pytest.raises(NotPermittedError) as info:
            both.purge_quarantine(own)
        assert "cannot decide its own write" in str(info.value)

    async def scenario() -> str:
        async with await MemoryPolicyEngine.connect(login_dsn(memgov_dsn, logins.reviewer2), org_id="acme") as app:
            return (await app.purge_quarantine(own)).status

    assert asyncio.run(scenario()) == "purged"


def test_a_release_the_policy_now_denies_raises_and_changes_nothing(su, writer, logins: Logins, memgov_dsn):
    _, entry = quarantined_by(writer, su)
    deploy_policy(su, "1.2.0", POLICY.replace("    action: quarantine", "    action: deny"))

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(login_dsn(memgov_dsn, logins.reviewer), org_id="acme") as app:
            await app.release_quarantine(entry)

    with unchanged(su, "a release the policy denies"), pytest.raises(PolicyDeniedError) as info:
        asyncio.run(scenario())
    assert info.value.rule_ids == ["quarantine-untrusted-pii"]
