"""The cost of one gateway across workers: N workers with Redis against N workers without.

    .venv/bin/python -m bench.shared_state [--workers 4] [--redis redis://127.0.0.1:6379/0]
                                           [--rounds 5] [--seconds 8] [--connections 32]

Both gateways (`modelgate serve`, fresh SQLite data dirs, the per-key bucket checked on every call,
the same fake upstream) run side by side; the harness alternates between them for `--rounds`
rounds (which goes first alternates too), each a 1 s warm-up then `--seconds` of wrk with
`--connections` keep-alive connections on non-streamed chat calls. Reported per configuration:
the median throughput and the median gateway CPU per call (utime + stime of the process tree);
the result is the ratio with Redis / without. Issue 15's target: throughput ratio >= 0.90.
Exit status 1 when wrk saw errors. About 2.5 minutes with the defaults on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import targets  # noqa: E402
from bench.run import Runner, ensure_wrk  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", metavar="URL")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=8, help="wrk run per configuration and round")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--out-dir", type=Path, default=targets.BENCH_DIR / "results")
    args = parser.parse_args(argv)
    ensure_wrk()
    started = time.monotonic()
    log_dir = Path(tempfile.mkdtemp(prefix="mg-shared-state-"))
    runner = Runner(None, log_dir)  # type: ignore[arg-type]  # wrk needs only the run directory
    upstream = targets.start_upstream(log_dir, None, 8, 0.0)
    gateways: dict[str, targets.Target] = {}
    rounds: dict[str, list[dict[str, Any]]] = {"local": [], "redis": []}
    try:
        gateways["local"] = targets.start_modelgate(upstream, log_dir, None, args.workers)
        prefix = f"bench-shared-{os.getpid()}-{time.time_ns()}:"
        gateways["redis"] = targets.start_modelgate(
            upstream, log_dir, None, args.workers, {"REDIS_URL": args.redis, "REDIS_PREFIX": prefix}, tag="-redis")
        for i in range(args.rounds):
            order = ["local", "redis"] if i % 2 == 0 else ["redis", "local"]
            for name in order:
                target = gateways[name]
                call = target.calls["chat"]
                runner.wrk(target, call, args.connections, 1, None)  # warm-up
                result = runner.wrk(target, call, args.connections, args.seconds, None)
                rounds[name].append(result)
                print(f"round {i + 1} {name:5}: {result.get('rps')} req/s, "
                      f"{result.get('cpu_ms_per_request')} CPU ms/call", flush=True)
    finally:
        for target in gateways.values():
            target.stop()
        upstream.stop()
    summary: dict[str, Any] = {}
    for name, runs in rounds.items():
        ok = [r for r in runs if "error" not in r]
        summary[name] = {
            "rps_median": round(statistics.median(r["rps"] for r in ok), 1) if ok else None,
            "cpu_ms_per_call_median": round(statistics.median(r["cpu_ms_per_request"] for r in ok), 4) if ok else None,
            "errors": sum(1 for r in runs if "error" in r) + sum(r["non_2xx"] + r["socket_errors"] for r in ok),
        }
    local, shared = summary["local"], summary["redis"]
    ratio = (shared["rps_median"] / local["rps_median"]) if local["rps_median"] and shared["rps_median"] else None
    cpu_ratio = (shared["cpu_ms_per_call_median"] / local["cpu_ms_per_call_median"]
                 if local["cpu_ms_per_call_median"] and shared["cpu_ms_per_call_median"] else None)
    results = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(), "workers": args.workers, "connections": args.connections,
        "seconds": args.seconds, "rounds": rounds, "summary": summary,
        "throughput_ratio_redis_to_local": round(ratio, 3) if ratio else None,
        "cpu_per_call_ratio_redis_to_local": round(cpu_ratio, 3) if cpu_ratio else None,
        "target_met": ratio is not None and ratio >= 0.90,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / "shared-state-latest.json"
    out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(f"{args.workers} workers: {local['rps_median']} req/s without Redis, {shared['rps_median']} with; "
          f"throughput ratio {results['throughput_ratio_redis_to_local']} (target >= 0.90), "
          f"CPU per call ratio {results['cpu_per_call_ratio_redis_to_local']}; "
          f"{results['wall_seconds']} s; written to {out}")
    return 1 if local["errors"] or shared["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
