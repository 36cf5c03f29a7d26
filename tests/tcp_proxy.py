"""A TCP proxy the test controls: cut it (close every connection, refuse or hang new ones) and restore it.

Used to take Redis away from a running gateway without touching the real server.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode = "pass"  # pass | refuse | hang
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> "TcpProxy":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            writer.close()
            return
        if self.mode == "hang":  # accept, read, never answer
            self._writers.add(writer)
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self.mode != "pass":  # cut while connected: the bytes go nowhere
                    continue
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()
            self._writers.discard(writer)

    def cut(self, mode: str = "refuse") -> None:
        """`refuse`: drop every connection and close new ones; `hang`: stop forwarding, keep sockets open."""
        self.mode = mode
        if mode == "refuse":
            for writer in list(self._writers):
                writer.close()
            self._writers.clear()

    def restore(self) -> None:
        self.mode = "pass"

    async def close(self) -> None:
        self.cut("refuse")
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
