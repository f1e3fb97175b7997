"""``python -m memgov_pg.cli``."""

from . import main

main()
