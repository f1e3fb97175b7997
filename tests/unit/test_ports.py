"""Which ports `memgov up` and the test harness take for free, with real sockets on 127.0.0.1."""

from __future__ import annotations

import socket

from memgov_pg.cluster import port_is_free
from tests.net_helpers import listener, plain_bind_fails


def test_a_port_whose_server_closed_its_connections_is_free():
    """A stopped server's port holds the connections it closed in TIME_WAIT: PostgreSQL binds it
    again (SO_REUSEADDR), so `memgov up` must keep it rather than move to another port."""
    with listener() as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first: its end goes to TIME_WAIT
            assert client.recv(1) == b""  # the server's FIN arrived
    # the connection lingers in TIME_WAIT on the port, and nothing listens there
    assert plain_bind_fails(port), "no TIME_WAIT socket on the port: the test reproduces nothing"
    assert port_is_free(port)


def test_a_port_a_server_listens_on_is_taken():
    with listener() as server:
        assert not port_is_free(server.getsockname()[1])


def test_a_port_bound_without_reuse_is_taken():
    """A socket bound there without SO_REUSEADDR keeps PostgreSQL from the port too."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        assert not port_is_free(holder.getsockname()[1])
