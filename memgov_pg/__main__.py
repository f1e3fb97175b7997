"""``python -m memgov_pg``: the ``memgov`` command line."""

from .cli import main

main()
