"""One block at a time: the ordering the messages and Responses stream encoders share.

Both vendors stream one content block (messages) or output item (Responses) at a time: opened, its deltas,
closed, then the next; clients rely on it. A chat-completions upstream may interleave text and several tool
calls, so blocks open in arrival order and an event for a block that cannot open yet waits in a queue:
- a text or thinking block closes as soon as anything else arrives;
- a tool call closes once its arguments so far are complete JSON (the usual sequential tool-call stream, so
  nothing waits); until then later blocks' events wait, released in order when it completes or the stream
  ends (`_drain(force=True)`). Only interleaving upstreams ever wait.
"""

from __future__ import annotations

import orjson

from modelgate.protocols.ir import StreamEvent, ToolCallDelta, ToolCallStart


class OneBlockAtATime:
    """The queue; an encoder says where an event goes (`_place`) and whether its open block may close
    (`_can_switch`)."""

    def __init__(self) -> None:
        self._queue: list[StreamEvent] = []
        self._seen_calls: set[int] = set()  # IR tool indexes whose header arrived
        self._closed_calls: set[int] = set()  # ... and whose block closed: a later fragment cannot reopen it

    def _place(self, event: StreamEvent, out: list[bytes], force: bool) -> None:
        raise NotImplementedError

    def _can_switch(self, force: bool) -> bool:
        raise NotImplementedError

    def _route(self, event: StreamEvent, out: list[bytes]) -> None:
        """A live event: register tool calls, place the event, release what it unblocked."""
        if isinstance(event, ToolCallStart):
            if event.index in self._seen_calls:
                return  # a repeated header chunk of a call already seen
            self._seen_calls.add(event.index)
        elif isinstance(event, ToolCallDelta) and event.index not in self._seen_calls:
            return  # arguments without a header: no block to put them in
        self._place(event, out, False)
        if self._queue and self._can_switch(False):
            self._drain(out, False)

    def _drain(self, out: list[bytes], force: bool) -> None:
        # Events re-queued during a pass keep their order: `_place` queues everything behind the first
        # event that still has to wait.
        while self._queue and self._can_switch(force):
            pending, self._queue = self._queue, []
            for event in pending:
                self._place(event, out, force)


def complete_json(chunks: list[str]) -> bool:
    """Whether a tool call's argument fragments so far make complete JSON."""
    try:
        orjson.loads("".join(chunks))
    except orjson.JSONDecodeError:
        return False
    return True
