"""Loopback ports for the tests that start a real server."""

from __future__ import annotations

import socket


def free_port(ports: range) -> int:
    """The first port of ``ports`` nothing on 127.0.0.1 listens on (several runs may share the machine)."""
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")
