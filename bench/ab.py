"""A/B of modelgate source trees: CPU per request of each, in alternating rounds on one core.

    git worktree add /tmp/before HEAD~1
    .venv/bin/python -m bench.ab --variant before=/tmp/before --variant after=. --cases small,agent150

Each variant is a directory holding a `modelgate` package (a worktree of another commit, or a copy with
one part changed to see what that part costs). It runs as this virtualenv's `modelgate serve`, one
worker, with the directory first on PYTHONPATH. Every variant and the bare proxy are pinned to the same
core, the upstream and wrk to another (bench/agent.py's layout). A round runs each target once per case,
in an order that rotates from round to round, so that no place in a round can favour one of them (two
copies of one tree read 0.998× each other with the order fixed and with it rotating, 6 rounds each).
The ratios are taken within a round, against the bare proxy and against the first variant, and
reported as the median (min–max) over the rounds. The machine's drift between rounds
cancels out in them, where absolute figures of runs minutes apart do not compare (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Callable

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import targets, workloads  # noqa: E402
from bench.agent import Layout  # noqa: E402
from bench.agent_cases import AGENT_CASES, AgentCase, bare_call, gateway_call  # noqa: E402
from bench.run import Runner, ensure_wrk  # noqa: E402
from bench.targets import Call, Target  # noqa: E402

# A case: the bare proxy's call (chat or messages upstream path) and modelgate's, given its key.
Case = tuple[Callable[[Target], Call], Callable[[str], Call]]


def _chat(key: str, body: bytes, stream: bool = False) -> Call:
    return Call("/v1/chat/completions", [f"Authorization: Bearer {key}"], body, stream)


def _bare_chat(body: bytes, stream: bool = False) -> Callable[[Target], Call]:
    return lambda up: Call("/v1/chat/completions", up.calls["chat"].headers, body, stream)


def _agent_case(case: AgentCase, stream: bool = False) -> Case:
    return (lambda up: bare_call(case.bare, workloads.AGENT_150, up, stream),
            lambda key: gateway_call(case, workloads.AGENT_150, key, stream))


def cases() -> dict[str, Case]:
    small = targets.chat_call("/", []).body
    small_stream = targets.chat_call("/", []).streamed().body
    return {
        "small": (_bare_chat(small), lambda key: _chat(key, small)),
        "small-stream": (_bare_chat(small_stream, stream=True), lambda key: _chat(key, small_stream, stream=True)),
        **{case.short: _agent_case(case) for case in AGENT_CASES},
        **{case.short + "-stream": _agent_case(case, stream=True) for case in AGENT_CASES},
    }


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.2f}–{max(values):.2f})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="A/B of modelgate source trees (CPU per request)",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--variant", action="append", required=True, metavar="NAME=DIR",
                        help="a directory holding a modelgate package; give two or more (the first is the base)")
    parser.add_argument("--cases", default="small,agent150", help=f"comma-separated: {', '.join(cases())}")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds")
    parser.add_argument("--duration", type=int, default=2, help="seconds per wrk load")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    variants = dict(spec.split("=", 1) for spec in args.variant)
    for name, source in variants.items():
        if not (Path(source) / "modelgate" / "__init__.py").is_file():
            raise SystemExit(f"variant {name}: {source} holds no modelgate package")
    known = cases()
    chosen = args.cases.split(",")
    unknown = [case for case in chosen if case not in known]
    if unknown:
        raise SystemExit(f"unknown cases: {', '.join(unknown)} (known: {', '.join(known)})")
    ensure_wrk()
    layout = Layout(os.cpu_count() or 1, args.no_pin)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        run_dir = Path(tmp)
        runner = Runner(None, run_dir)  # type: ignore[arg-type]
        upstream = targets.start_upstream(run_dir, layout.upstream, 8, 0.0)
        started: list[Target] = []
        try:
            bare = targets.start_bare(upstream, run_dir, layout.target)
            started.append(bare)
            gateways = {}
            for name, source in variants.items():
                path = [str(Path(source).resolve()), os.environ.get("PYTHONPATH", "")]
                env = {"PYTHONPATH": os.pathsep.join(p for p in path if p)}
                gateways[name] = targets.start_modelgate(upstream, run_dir, layout.target, 1, env, tag="-" + name)
                started.append(gateways[name])
            for case in chosen:
                bare_call, gateway_call = known[case]
                plan = [("bare", bare, bare_call(upstream))]
                plan += [(name, mg, gateway_call(mg.info["api_key"])) for name, mg in gateways.items()]
                for _, target, call in plan:  # warm-up
                    runner.wrk(target, call, args.connections, 1, layout.load, layout.wrk_threads)
                runs: dict[str, list[dict]] = {name: [] for name, _, _ in plan}
                for r in range(args.rounds):
                    for name, target, call in plan[r % len(plan):] + plan[:r % len(plan)]:
                        runs[name].append(runner.wrk(target, call, args.connections, args.duration, layout.load,
                                                     layout.wrk_threads))
                report(case, runs, list(gateways))
        finally:
            for target in reversed(started):
                target.stop()
            upstream.stop()
    return 0


def report(case: str, runs: dict[str, list[dict]], names: list[str]) -> None:
    failed = [f"{name}: {run['error']}" for name, rs in runs.items() for run in rs if "error" in run]
    if failed:
        print(f"{case}: failed loads: {'; '.join(failed)}", flush=True)
        return
    cpu = {name: [run["cpu_ms_per_request"] for run in rs] for name, rs in runs.items()}
    print(f"{case}: bare {statistics.median(cpu['bare']):.4f} ms CPU per request", flush=True)
    base = names[0]
    for name in names:
        errors = sum(run["non_2xx"] + run["socket_errors"] for run in runs[name])
        vs_bare = [m / b for m, b in zip(cpu[name], cpu["bare"])]
        line = f"  {name}: {statistics.median(cpu[name]):.4f} ms, {_spread(vs_bare)}× bare"
        if name != base:
            line += f", {_spread([m / b for m, b in zip(cpu[name], cpu[base])])}× {base}"
        print(f"{line}, errors {errors}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
