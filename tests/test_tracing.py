import time
import uuid

from modelgate.tracing import new_trace_id


def test_trace_ids_are_distinct_time_ordered_uuids():
    before = time.time_ns() // 1_000_000
    ids = [new_trace_id() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for value in ids[:500]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert before <= parsed.int >> 80 <= after
    # milliseconds lead, so ids sort by creation time (what keeps the call log's index cheap)
    assert [i[:13] for i in ids] == sorted(i[:13] for i in ids)

