"""The caller's address, from the connection or (behind a trusted proxy) from X-Forwarded-For."""

from __future__ import annotations

import ipaddress

MAX_ADDRESS_TEXT = 64  # an IPv6 address with a zone fits; anything longer is not an address


def forwarded_address(header: str) -> str | None:
    """The first address of an X-Forwarded-For value, or None when it is not an IP address.

    The header is caller-controlled text unless the proxy overwrites it: it is recorded in the call
    log and checked against the blacklist, so only a well-formed address is taken.
    """
    first = header.split(",", 1)[0].strip()
    if not first or len(first) > MAX_ADDRESS_TEXT:
        return None
    try:
        return str(ipaddress.ip_address(first))
    except ValueError:
        return None
