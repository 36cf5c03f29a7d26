"""Process start-up: prepare storage once, then serve with the chosen ASGI server."""

from __future__ import annotations

import asyncio
import logging
import math
import subprocess
import os
import shutil
import sys
from pathlib import Path

from modelgate.auth.crypto import ConfigError, SecretBox, load_encryption_key
from modelgate.config import Settings, load_settings
from modelgate.logs import configure_logging
from modelgate.services import Services
from modelgate.storage.db import Database
from modelgate.storage.sealed import require_decryptable, sealed_count

log = logging.getLogger("modelgate.server")


async def prepare(settings: Settings) -> str | None:
    """Migrate the schema and create the first admin; returns that admin's password once.

    Runs in the parent before workers start, so workers never race on migrations.
    """
    # Migrations may rewrite big tables: no statement deadline here.
    db = Database.from_settings(settings, statement_deadline=False)
    try:
        await db.migrate()
        box = SecretBox(load_encryption_key(settings, may_generate=not await sealed_count(db)))
        await require_decryptable(db, box)
        return await Services(db, box, settings).users.ensure_initial_admin()
    finally:
        await db.dispose()


def prepare_main() -> None:
    """`python -m modelgate.server`: the start-up preparation, run before the server starts."""
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    try:
        password = asyncio.run(prepare(settings))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None
    if password:
        print(
            f"\nCreated the first console user: admin / {password}\n"
            "This password is shown once; change it after logging in.\n",
            flush=True,
        )


def shared_state_warning(settings: Settings) -> str | None:
    workers = settings.server.workers
    if workers <= 1 or settings.redis_url:
        return None
    return (f"{workers} workers without REDIS_URL: rate limits, circuit breakers, failover cooldowns, model "
            f"lifecycle counters and login throttles are per worker (a key gets up to {workers} times its rate); "
            "set REDIS_URL to share them")


def run(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    # In a child process, so Alembic and the migration code never occupy the server's memory.
    # It reads the same environment (and MODELGATE_CONFIG) as this process.
    prepared = subprocess.run([sys.executable, "-m", "modelgate.server"], check=False)
    if prepared.returncode != 0:
        raise SystemExit(prepared.returncode)
    server = settings.server
    warning = shared_state_warning(settings)
    if warning:
        log.warning("%s", warning)
    if server.workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # Workers share metrics through files; stale files of an earlier run would be counted again.
        metrics_dir = Path(settings.data_dir) / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    # Not modelgate.api.console: that loads the management API (~13 MB) into this process, which is
    # the worker itself with one worker; the worker builds the management API on first use.
    from modelgate.console import DIST

    if not (DIST / "index.html").is_file():
        log.warning("the web console is not built (%s is missing): serving without /console; "
                    "build it with `make console` (needs Node.js and npm)", DIST)
    log.info("modelgate listening on %s:%s (%s, %s worker(s))", server.host, server.port,
             server.implementation, server.workers)
    if server.implementation == "granian":
        from granian import Granian
        from granian.constants import Interfaces, Loops

        Granian(
            "modelgate.gateway.app:create_app",
            address=server.host,
            port=server.port,
            interface=Interfaces.ASGI,
            workers=server.workers,
            loop=Loops.uvloop,
            factory=True,
            workers_kill_timeout=max(1, math.ceil(server.drain_seconds)),
        ).serve()
        return
    if server.workers > 1:
        from modelgate import workers

        workers.serve(settings)
        return
    from modelgate.workers import serve_one

    serve_one(settings)


if __name__ == "__main__":
    prepare_main()
