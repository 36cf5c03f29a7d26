"""The CLI acting on a running gateway through its management API (`modelgate --url URL …`).

The token is read from the environment (MODELGATE_TOKEN), never from the command line,
so it stays out of shell history and process lists.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from typing import Any

import orjson

from modelgate.errors import GatewayError

TOKEN_ENV = "MODELGATE_TOKEN"


class RemoteError(Exception):
    """The server could not be reached or answered something that is not the API."""


def call(url: str, method: str, path: str, body: Any = None, query: str = "") -> Any:
    """One management API call; returns `data`, raises GatewayError with the server's code on refusal."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise RemoteError(f"--url needs a management API token in ${TOKEN_ENV} (modelgate token create)")
    target = url.rstrip("/") + "/api/v1" + path + (f"?{query}" if query else "")
    request = urllib.request.Request(
        target, method=method, data=orjson.dumps(body) if body is not None else None,
        headers={"authorization": f"Bearer {token}", "content-type": "application/json",
                 "accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        try:
            parsed = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise RemoteError(f"{target} answered HTTP {exc.code}") from None
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else {}
        raise GatewayError(exc.code, str(error.get("code", "ERROR")), str(error.get("message", ""))) from None
    except (urllib.error.URLError, OSError) as exc:
        raise RemoteError(f"cannot reach {target}: {getattr(exc, 'reason', exc)}") from None
    try:
        return orjson.loads(payload)["data"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise RemoteError(f"{target} did not answer with the management API's envelope") from None
