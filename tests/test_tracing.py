import uuid

from modelgate.tracing import new_trace_id


def test_trace_ids_are_distinct_version_4_uuids():
    ids = [new_trace_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for value in ids[:500]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122
