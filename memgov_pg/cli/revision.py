"""``memgov revision``: a policy as a new revision of the host project's Alembic history.

The revision goes on the host's own branch: its ``down_revision`` is the host's
current head, never a revision of memgov's branch (``memgov``) even when memgov's
revisions are in the host's ``version_locations``. It then declares
``depends_on`` memgov's head (as it is when the revision is written), so that
``alembic upgrade heads`` creates memgov's schema first. When memgov's revisions
are not in the host's history (memgov is migrated by ``memgov migrate``), the
revision has no ``depends_on`` and the operation checks at run time that the
schema is there.
"""

from __future__ import annotations

import ast
import contextlib
import datetime as dt
import io
import json
from pathlib import Path

import click
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError, rev_id

from ..errors import MemgovError
from ..policy import load_policy
from ..tenants import scope_text
from .base import cli, tenant_option

TEMPLATE = '''"""{message}

Revision ID: {revision}
Revises: {down_text}
Create Date: {date}

Deploys memgov policy {version} ({scope}), embedded below exactly as
`memgov revision --policy {policy_name}` read it: the revision is reviewable
and runs without the policy file. The downgrade re-activates the version that
was active before this deploy, or none.

Policy source sha256: {sha256}
"""

from __future__ import annotations

import memgov_pg.alembic_ops  # noqa: F401  registers op.deploy_memory_policy, op.undeploy_memory_policy

from alembic import op

revision = {revision_py}
down_revision = {down_revision_py}
branch_labels = None
depends_on = {depends_on_py}

POLICY_VERSION = {version_py}
TENANT = {tenant_py}
POLICY = {policy_literal}


def upgrade() -> None:
    op.deploy_memory_policy(POLICY, tenant=TENANT)


def downgrade() -> None:
    op.undeploy_memory_policy(POLICY_VERSION, tenant=TENANT)
'''


def policy_literal(text: str) -> str:
    """A Python literal of ``text``: a raw triple-quoted string when it reads back identical, else repr()."""
    for quote in ('"""', "'''"):
        candidate = f"r{quote}{text}{quote}"
        try:
            if quote not in text and "\r" not in text and ast.literal_eval(candidate) == text:
                return candidate
        except (SyntaxError, ValueError):
            pass
    return repr(text)


def docstring_text(text: str) -> str:
    """``text`` as it may stand inside the revision's docstring (no escape, no closing quotes)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _py(value: str | None) -> str:
    """A Python literal, double-quoted as ruff format writes it."""
    return "None" if value is None else json.dumps(value)


def _memgov_revisions() -> tuple[set[str], str]:
    from ..migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    assert head is not None
    return {rev.revision for rev in script.walk_revisions()}, head


def _version_paths(script: ScriptDirectory) -> list[Path]:
    return [Path(p).resolve() for p in script._version_locations]


def plan(config_path: Path) -> tuple[ScriptDirectory, str | None, str | None, Path]:
    """The host's script directory, the new revision's down_revision and depends_on, and its directory."""
    if not config_path.is_file():
        raise MemgovError(f"no Alembic configuration at {config_path} (pass --config)")
    config = Config(str(config_path))
    try:
        script = ScriptDirectory.from_config(config)
        heads = script.get_heads()
    except CommandError as exc:
        raise MemgovError(f"alembic: {exc}") from None
    memgov_ids, memgov_head = _memgov_revisions()
    in_host = _known(script, memgov_head)
    host_heads = sorted(h for h in heads if h not in memgov_ids)
    if len(host_heads) > 1:
        raise MemgovError(
            f"the project at {config_path} has {len(host_heads)} heads of its own ({', '.join(host_heads)}): "
            "merge them first (alembic merge heads)"
        )
    memgov_dir = Path(_memgov_version_location()).resolve()
    own = [p for p in _version_paths(script) if p != memgov_dir]
    if not own:
        raise MemgovError(f"the project at {config_path} has no version location of its own")
    down = host_heads[0] if host_heads else None
    if down is not None:
        rev = script.get_revision(down)
        assert rev is not None
        directory = Path(rev.path).resolve().parent
    else:
        directory = own[0]
    return script, down, (memgov_head if in_host else None), directory


def _known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except CommandError:
        return False


def _memgov_version_location() -> str:
    from ..alembic_ops import version_location

    return version_location()


@cli.command()
@click.option("--policy", "policy_path", required=True, type=click.Path(dir_okay=False), help="The policy file.")
@click.option("-m", "--message", default=None, help="The revision's message (default: deploy memgov policy VERSION).")
@click.option(
    "--config",
    "config_path",
    default="alembic.ini",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The host project's Alembic configuration.",
)
@tenant_option("Deploy as the override policy of one tenant (org_id).")
def revision(policy_path: str, message: str | None, config_path: str, tenant: str | None) -> None:
    """Write a new Alembic revision into the host project that deploys POLICY.

    The YAML is embedded in the revision; its downgrade undeploys the policy.
    """
    from ..deploy import read_policy, scope_of

    raw = read_policy(policy_path)
    policy = load_policy(raw, filename=policy_path)  # PolicyValidationError: one line per error, exit 1
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MemgovError(f"{policy_path} is not UTF-8 text") from None
    script, down, depends_on, directory = plan(Path(config_path))
    revision_id = rev_id()
    message = message or f"deploy memgov policy {policy.version}"
    content = TEMPLATE.format(
        message=docstring_text(message),
        revision=revision_id,
        down_text=down or "",
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S+00:00"),
        scope=scope_text(scope_of(tenant)),
        policy_name=docstring_text(Path(policy_path).name),
        version=docstring_text(policy.version),
        sha256=policy.sha256,
        policy_literal=policy_literal(text),
        revision_py=_py(revision_id),
        down_revision_py=_py(down),
        depends_on_py=_py(depends_on),
        version_py=_py(policy.version),
        tenant_py=_py(tenant),
    )
    check = ast.parse(content)  # the template is ours: a failure here is a bug, not a user mistake
    assert any(isinstance(node, ast.Assign) for node in check.body)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Alembic's "Generating ... done": we print the path
            generated = script.generate_revision(
                revision_id, message, head=down or "base", depends_on=depends_on, version_path=str(directory)
            )
    except CommandError as exc:
        raise MemgovError(f"alembic: {exc}") from None
    assert generated is not None
    path = Path(generated.path)
    path.write_text(content, encoding="utf-8")
    click.echo(str(path))
