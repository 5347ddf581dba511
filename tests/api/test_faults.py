"""Faults, on PostgreSQL through a TCP proxy that the test cuts and restores: the database going away
gives 503 (not a hang) where a request needs it, computation goes on, and the service recovers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from service.main import create_app
from service.settings import Settings

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


@pytest.fixture
def proxied(db_url: str) -> Iterator[tuple[TestClient, Proxy]]:
    if not db_url.startswith("postgresql"):
        pytest.skip("the fault test cuts a TCP connection: PostgreSQL only")
    # migrate, load and calibrate directly first (bulk loading through the relay is slow), then serve
    # through the relay: that start finds everything in place
    with TestClient(create_app(Settings(database_url=db_url, calibration_cv="off"))):
        pass
    proxy = Proxy(UPSTREAM)
    proxy.start()
    url = make_url(db_url).set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    settings = Settings(database_url=url, calibration_cv="off", calibration_refresh_s=0)
    with TestClient(create_app(settings)) as client:
        yield client, proxy
    proxy.cut()


PREDICTION = {"model": "meta-llama/Llama-3.1-8B", "deployment": {"gpu": "l4"},
              "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}
RECOMMENDATION = {"model": "meta-llama/Llama-3.1-8B",
                  "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4},
                  "constraints": {"gpus": ["l4"], "max_gpus": 2}}


def test_database_outage_gives_503_then_recovers(proxied: tuple[TestClient, Proxy]) -> None:
    client, proxy = proxied
    assert client.get("/readyz").status_code == 200
    stored = client.post("/v1/recommendations", json=RECOMMENDATION)
    assert stored.status_code == 200

    proxy.cut()
    t0 = time.monotonic()
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.headers["content-type"] == "application/problem+json"
    # answers that must be stored (and read back) need the database: 503, not a hang or a 500
    assert client.post("/v1/recommendations", json=RECOMMENDATION).status_code == 503
    assert client.get(f"/v1/recommendations/{stored.json()['id']}").status_code == 503
    # computation does not: the calibration in hand keeps predicting
    assert client.post("/v1/predictions", json=PREDICTION).status_code == 200
    assert time.monotonic() - t0 < 30          # each failure is fast (connect timeout 5 s), never a hang

    proxy.start()                              # the database is back on the same address
    deadline = time.monotonic() + 20
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "did not recover"
        time.sleep(0.2)
    again = client.get(f"/v1/recommendations/{stored.json()['id']}")
    assert again.status_code == 200 and again.json() == stored.json()
