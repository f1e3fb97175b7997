#!/usr/bin/env python3
"""Write the populated database of a release, for the upgrade test of the next one.

    .venv/bin/python scripts/release_fixture.py REVISION > tests/fixtures/populated_REVISION.sql

Run once, when a revision is released, by that release's code: the SQL it prints
installs the shipped policies as that release's compiler compiled them, starts a
shadow, and plays a story of writes, reviews, feedback, sweeps and seals as real
logins. tests/db/test_upgrade.py plays it on a database at that revision and
upgrades it to head. A fixture is never rewritten: it is what that release left.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memgov_pg.compiler import compile_policy  # noqa: E402
from memgov_pg.policy import load_policy  # noqa: E402

STORY = (REPO / "tests" / "fixtures" / "release_story.sql").read_text(encoding="utf-8")


def compiled(path: str, org_id: str, stage: bool = False) -> str:
    policy = load_policy(REPO / "policies" / path)
    out = compile_policy(policy, org_id)
    return (out.stage_sql() if stage else out.install_sql()).rstrip().rstrip(";") + ";\n"


def main() -> None:
    (revision,) = sys.argv[1:]  # the revision being released
    parts = [
        f"-- The populated database of release {revision}: written by scripts/release_fixture.py\n"
        "-- with that release's compiler, and never rewritten (tests/db/test_upgrade.py plays it).\n",
        "-- the global policy, a tenant override with read rules, and a global shadow's candidate\n",
        compiled("default.yaml", "*"),
        compiled("examples/memproof.yaml", "globex"),
        compiled("examples/tenant-acme-override.yaml", "*", stage=True),
        "SELECT memgov.start_shadow('*', '1.1.0-acme');\n",
        STORY,
    ]
    sys.stdout.write("\n".join(parts))


if __name__ == "__main__":
    main()
