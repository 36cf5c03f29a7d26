"""In-process cost of reading an agent request on pass-through: the codec's typed view against
its own path (parse_json + validate), each with the forwarded bytes and the freeing of what
it built. Interleaved rounds of CPU time; less noisy than the HTTP benchmark on a shared box.

    .venv/bin/python -m bench.decode [--rounds 21] [--calls 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.workloads import AGENT_80, AGENT_150, agent_chat_body, agent_messages_body, agent_responses_body
from modelgate.gateway.inference import read_request
from modelgate.protocols.body import forward
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.messages import MessagesCodec
from modelgate.protocols.responses import ResponsesCodec

HEADERS = {b"anthropic-version": b"2023-06-01"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=100, help="calls per round and path")
    args = parser.parse_args()
    cases = [(f"{name} {shape.total_kb} KB", codec, build(shape, "m"))
             for shape in (AGENT_150, AGENT_80)
             for name, codec, build in (("chat", ChatCodec(), agent_chat_body),
                                        ("messages", MessagesCodec(), agent_messages_body),
                                        ("responses", ResponsesCodec(), agent_responses_body))]
    print("µs per request, median (min–max) over rounds; ratio taken within a round")
    for name, codec, raw in cases:
        def call(typed: bool) -> bytes:
            body, model, _ = read_request(codec, raw, HEADERS, typed=typed)
            return forward(body, {"model": model})

        assert codec.read_typed(raw, HEADERS) is not None and call(True) == call(False)
        times: dict[bool, list[float]] = {True: [], False: []}
        ratios = []
        for r in range(args.rounds):
            for typed in (r % 2 == 0, r % 2 == 1):  # alternate which path goes first
                started = time.process_time()
                for _ in range(args.calls):
                    call(typed)
                times[typed].append((time.process_time() - started) / args.calls * 1e6)
            ratios.append(times[True][-1] / times[False][-1])
        own, view = times[False], times[True]
        print(f"{name:18s} own path {statistics.median(own):6.0f} ({min(own):.0f}–{max(own):.0f})   "
              f"typed view {statistics.median(view):6.0f} ({min(view):.0f}–{max(view):.0f})   "
              f"view/own {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
