"""A TCP proxy a test controls: forward, blackhole (a partition: connections stay open, nothing
passes), or cut (every connection closed, new ones refused until restored).

    proxy = await TcpProxy("127.0.0.1", 5432).start()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/db"
    proxy.blackhole(); ...; proxy.restore()
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode = "forward"  # forward | blackhole | cut
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self, port: int = 0) -> "TcpProxy":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def blackhole(self) -> None:
        """Like a partition: open connections hang silently, new ones connect but get no answer."""
        self.mode = "blackhole"
        self._flowing.clear()

    def cut(self) -> None:
        """Every connection is reset and new ones are closed at once."""
        self.mode = "cut"
        self._flowing.clear()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        """New connections are forwarded again (connections held through a blackhole stay dead)."""
        self.mode = "forward"
        self._flowing.set()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self.mode == "cut":
            client_w.transport.abort()
            return
        self._writers.add(client_w)
        if self.mode == "blackhole":
            return  # accepted, never answered
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            return
        self._writers.add(up_w)
        await asyncio.gather(self._pipe(client_r, up_w), self._pipe(up_r, client_w), return_exceptions=True)
        for w in (client_w, up_w):
            self._writers.discard(w)
            w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dead = False
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if not self._flowing.is_set():
                dead = True  # a connection that saw a blackhole never carries data again
            if dead:
                continue
            writer.write(data)
            await writer.drain()
        writer.transport.abort()
