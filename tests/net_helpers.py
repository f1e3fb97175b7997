"""Real sockets on 127.0.0.1 for the tests: ports that refuse, listen, or linger."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refused_port() -> Iterator[int]:
    """A port that refuses connections while the block runs: bound here and never listening,
    so that no other server (a concurrent test run's cluster) can take it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


@contextmanager
def listener() -> Iterator[socket.socket]:
    """A listening socket on a port the OS picks, bound as PostgreSQL binds (SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


def plain_bind_fails(port: int) -> bool:
    """Whether a bind without SO_REUSEADDR is refused: something holds the port, such as a
    connection closed there that lingers in TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False
