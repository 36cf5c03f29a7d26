"""Error helpers."""

from modelgate.errors import redact


def test_redact_removes_a_key_whole_or_in_pieces():
    key = "sk-live-abcdefghijklmnopqrstuvwxyz"
    assert redact(f"bad key {key}!", key) == "bad key [redacted]!"
    assert key[:14] not in redact(f"bad key {key[:14]}****{key[-4:]}", key)
    assert redact("nothing to hide", key) == "nothing to hide"
    assert redact("short k1 here", "k1") == "short [redacted] here"
