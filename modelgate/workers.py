"""Several uvicorn workers, each listening on its own socket of one SO_REUSEPORT group.

uvicorn's own multi-worker mode has every worker accept from one shared socket: the kernel
wakes whichever worker is waiting, and under keep-alive load some workers take most
connections while others get none (bench/agent.py measured one of eight idle with 64
connections). With one listening socket per worker in a SO_REUSEPORT group, the kernel
spreads new connections evenly across the workers by a hash of their addresses.

The supervisor (`serve`) starts `python -m modelgate.workers` N times, forwards SIGTERM and
SIGINT to them (each drains for up to `server.drain_seconds`), and starts a worker again if one dies.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from types import FrameType

import uvicorn
from uvicorn.server import STARTUP_FAILURE

from modelgate.config import Settings, load_settings
from modelgate.logs import configure_logging

log = logging.getLogger("modelgate.workers")

PORT_ENV = "MODELGATE_WORKER_PORT"  # the port actually bound, when the settings ask for port 0
RESTART_DELAY_SECONDS = 1.0


def reuseport_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def uvicorn_options(settings: Settings) -> dict:
    return dict(
        factory=True,
        loop="uvloop",
        http="httptools",
        ws="none",  # the gateway serves no websockets: their protocol code stays out of every worker
        lifespan="on",
        access_log=False,
        proxy_headers=False,  # X-Forwarded-For is honoured by the gateway itself, when configured
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=settings.server.drain_seconds,
    )


class NoticeServer(uvicorn.Server):
    """uvicorn, except that SIGTERM first marks the process draining (/readyz answers 503) and keeps
    accepting for `notice_seconds`, so a load balancer stops sending before the listener closes."""

    def __init__(self, config: uvicorn.Config, notice_seconds: float) -> None:
        super().__init__(config)
        self.notice_seconds = notice_seconds
        self._noticed = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        from modelgate.gateway.runtime import begin_drain

        begin_drain()
        if sig != signal.SIGTERM or self._noticed or self.notice_seconds <= 0:
            return super().handle_exit(sig, frame)
        self._noticed = True
        log.info("draining: /readyz answers 503; closing the listener in %gs", self.notice_seconds)
        timer = threading.Timer(self.notice_seconds, super().handle_exit, (sig, frame))
        timer.daemon = True
        timer.start()


def serve_one(settings: Settings, sockets: list[socket.socket] | None = None) -> None:
    """One uvicorn server in this process, with the readiness notice on SIGTERM."""
    options = uvicorn_options(settings)
    if sockets is None:
        options.update(host=settings.server.host, port=settings.server.port)
    config = uvicorn.Config("modelgate.gateway.app:create_app", **options)
    server = NoticeServer(config, settings.server.drain_notice_seconds)
    server.run(sockets=sockets)
    if not server.started:  # as uvicorn.run: stopped before it started is a failed start
        raise SystemExit(STARTUP_FAILURE)


def run_worker() -> None:
    """One worker: its own socket in the group, then uvicorn serving on it."""
    settings = load_settings()
    configure_logging(settings.log_level)
    port = int(os.environ.get(PORT_ENV) or settings.server.port)
    serve_one(settings, [reuseport_socket(settings.server.host, port)])


def serve(settings: Settings) -> None:
    """Start `settings.server.workers` workers and keep them running until SIGTERM or SIGINT."""
    server = settings.server
    # Holds the port (a chosen one when the settings say 0) for the workers; it never listens,
    # so the kernel hands it no connection.
    probe = reuseport_socket(server.host, server.port)
    env = {**os.environ, PORT_ENV: str(probe.getsockname()[1])}
    argv = [sys.executable, "-m", "modelgate.workers"]
    children = [subprocess.Popen(argv, env=env) for _ in range(server.workers)]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            time.sleep(0.5)
            for i, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    log.error("worker %s exited with %s; starting it again", child.pid, child.returncode)
                    time.sleep(RESTART_DELAY_SECONDS)
                    children[i] = subprocess.Popen(argv, env=env)
        for child in children:
            child.wait()
    finally:
        probe.close()


if __name__ == "__main__":
    run_worker()
