"""A governed search on a hot standby (logged on the primary) against the same search on the primary.

    python -m tests.bench.bench_standby [--searches 200] [--repeat 5]

Builds its own primary and streaming standby on this machine with the standby logger set up
(tests/standby_pair.py: the attack policy with read rules, so reads are governed). One writer
login, one connection to each server, one search per transaction (autocommit), the same query
({"text": "tea"}: one row returned): the p50 of --searches searches, best of --repeat runs, on
each side, and their ratio; and the round trip alone (an empty query through dblink from the
standby to the primary). The standby's search makes one round trip to the primary and one
commit there (memgov.log_standby_read), over a connection the session keeps; the primary's
commits its log row locally. Both servers share this machine's cores: on separate hosts add
the network's round trip.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg

from tests.bench.common import parser, table
from tests.db.test_restore import as_login
from tests.standby_pair import standby_pair

QUERY = '{"text": "tea"}'


SEARCH = "SELECT * FROM memgov.search(%s)"
ROUND_TRIP = "SELECT * FROM memgov_dblink.dblink('bench', 'SELECT 1') AS t(x integer)"


def p50(conn: psycopg.Connection[Any], searches: int, statement: str = SEARCH) -> float:
    args = (QUERY,) if statement == SEARCH else ()
    conn.execute(statement, args).fetchall()  # warm: plans, the primary's connection
    times = []
    for _ in range(searches):
        start = time.perf_counter()
        conn.execute(statement, args).fetchall()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--searches", type=int, default=200)
    args = p.parse_args()
    with standby_pair() as pair:
        with as_login(pair.primary_dsn, "writer") as on_primary, as_login(pair.standby_dsn, "writer") as on_standby:
            primary = min(p50(on_primary, args.searches) for _ in range(args.repeat))
            standby = min(p50(on_standby, args.searches) for _ in range(args.repeat))
        # the round trip alone: an empty query over memgov_owner's connection to the primary
        with psycopg.connect(pair.standby_dsn, autocommit=True) as su:
            su.execute("SET ROLE memgov_owner")
            su.execute("SELECT memgov_dblink.dblink_connect('bench', 'memgov_primary')")
            trip = min(p50(su, args.searches, ROUND_TRIP) for _ in range(args.repeat))
    rows = [
        ("primary", f"{primary * 1000:.2f} ms", "1.00"),
        ("standby (logged on the primary)", f"{standby * 1000:.2f} ms", f"{standby / primary:.2f}"),
        ("dblink round trip, empty query", f"{trip * 1000:.2f} ms", f"{trip / primary:.2f}"),
    ]
    print(table(rows, ("search of one row", "p50 (best of runs)", "ratio")))


if __name__ == "__main__":
    main()
