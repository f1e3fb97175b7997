"""The package is clean under ``mypy --strict``, and so is a service's use of its public API
(tests/typing/user_script.py); every name ``memgov_pg`` exports is documented and every
MemgovError subclass of memgov_pg.errors is exported."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import memgov_pg
from memgov_pg import errors

ROOT = Path(__file__).resolve().parents[2]
USER_SCRIPT = ROOT / "tests" / "typing" / "user_script.py"


def _mypy(*targets: str) -> subprocess.CompletedProcess[str]:
    """``python -m mypy --strict`` at the repository root (its pyproject.toml configures mypy)."""
    pytest.importorskip("mypy", reason="mypy is a dev dependency: pip install -e '.[dev]'")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_package_is_clean_under_mypy_strict() -> None:
    result = _mypy("memgov_pg")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_a_service_using_the_public_api_type_checks() -> None:
    result = _mypy(str(USER_SCRIPT.relative_to(ROOT)))
    assert result.returncode == 0, result.stdout + result.stderr


def _documented_assignment(name: str) -> bool:
    """Whether ``name``, a constant or alias re-exported by memgov_pg, is documented where it is
    assigned: a ``#:`` comment on the line above, or a string right after it."""
    package = ast.parse((ROOT / "memgov_pg" / "__init__.py").read_text(encoding="utf-8"))
    module = next(
        node.module
        for node in package.body
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names)
    )
    path = ROOT / "memgov_pg" / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    body = ast.parse(source).body
    for index, node in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            comment_above = lines[node.lineno - 2].lstrip().startswith("#:")
            following = body[index + 1] if index + 1 < len(body) else None
            string_after = (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            return comment_above or string_after
    return False


@pytest.mark.parametrize("name", [n for n in memgov_pg.__all__ if not n.startswith("__")])
def test_every_exported_name_has_a_docstring(name: str) -> None:
    obj = getattr(memgov_pg, name)
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        # a dataclass without a docstring gets its signature as one: that is no documentation
        assert doc and doc.strip() and not doc.startswith(f"{name}("), f"memgov_pg.{name} has no docstring"
    else:
        assert _documented_assignment(name), f"memgov_pg.{name} is not documented where it is assigned"


def test_all_is_sorted() -> None:
    assert memgov_pg.__all__ == sorted(memgov_pg.__all__)


def test_every_memgov_error_is_exported() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, memgov_pg.MemgovError) and obj.__module__ == errors.__name__
    }
    assert defined - set(memgov_pg.__all__) == set()


@pytest.mark.slow
def test_importing_the_package_stays_light() -> None:
    code = (
        "import sys, memgov_pg; "
        "heavy = sorted(m for m in ('sqlalchemy', 'alembic', 'click', 'rich') if m in sys.modules); "
        "print(' '.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"import memgov_pg loads {result.stdout.strip()}"
