"""The floor: a bare pass-through proxy in a few lines of aiohttp.

It reads the body, forwards it with one shared ClientSession, and writes the
answer back, streaming chunk by chunk when the upstream streams. No parsing,
no auth, no logging: what any Python gateway on aiohttp pays at minimum.
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency of modelgate
    uvloop = None

FORWARDED = ("Content-Type", "Authorization", "x-api-key", "anthropic-version")


def make_app(upstream: str) -> web.Application:
    app = web.Application()

    async def start(app: web.Application) -> None:
        app["session"] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), auto_decompress=False
        )

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
        async with app["session"].request(
            request.method, upstream + request.path_qs, data=body, headers=headers
        ) as up:
            ctype = up.headers.get("Content-Type", "application/json")
            if ctype.startswith("text/event-stream"):
                resp = web.StreamResponse(status=up.status, headers={"Content-Type": ctype})
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
            return web.Response(status=up.status, body=await up.read(), headers={"Content-Type": ctype})

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200)
    parser.add_argument("--upstream", default="http://127.0.0.1:9100")
    args = parser.parse_args(argv)
    web.run_app(make_app(args.upstream.rstrip("/")), host=args.host, port=args.port,
                access_log=None, print=None, loop=uvloop.new_event_loop() if uvloop else None)


if __name__ == "__main__":
    main()
