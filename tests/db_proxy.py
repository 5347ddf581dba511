"""A TCP relay to the suite's PostgreSQL, for tests of what a process does when the database is away."""

from __future__ import annotations

import contextlib
import socket
import threading

UPSTREAM = ("127.0.0.1", 5432)        # the PostgreSQL the suite runs against (conftest's TEST_POSTGRES_URL)


class Proxy:
    """A TCP relay to PostgreSQL that can be cut (every connection dropped, new ones refused) and restored."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.socks: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(64)
        self.port = ls.getsockname()[1]
        self.listener = ls
        threading.Thread(target=self._accept, args=(ls,), daemon=True).start()

    def _accept(self, ls: socket.socket) -> None:
        while True:
            try:
                client, _ = ls.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        assert self.listener is not None
        with contextlib.suppress(OSError):              # shutdown wakes the accepting thread; close alone does not
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.socks.clear()
