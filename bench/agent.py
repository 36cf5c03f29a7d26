"""The agent benchmark (issue 14): the traffic coding agents send, measured in alternation.

`.venv/bin/python -m bench.agent` (add --quick for a smoke run) measures, in one run:

- request/response: 150 KB and 80 KB agent requests (bench/workloads.py) and the small request, through
  the bare proxy, modelgate pass-through (chat → chat upstream, messages → messages upstream, each under the model's own
  id, and chat with a model served under another upstream id: its request and answer renamed), modelgate conversion both ways
  (messages client → chat upstream, chat client → messages upstream) and from the Responses protocol
  (Responses client → chat upstream; the fake upstream has no Responses endpoint for pass-through), and the peer
  gateways that install (TensorZero, Portkey, LiteLLM). Every target runs on the same CPU core at the same
  time; the rounds alternate between them, so machine drift cancels out in the ratios, which are taken
  within a round and reported as the median (and range) over rounds;
- long streams: 300 chunks 2 ms apart (the fake upstream's `*-long` models) at 20 and 200 concurrent
  streams: the target's CPU per chunk and its time to first byte added to the direct call's;
- workers: modelgate with 1, 2, 4 and N workers (N: the cores left after the upstream and the load
  generator), 64 keep-alive connections: throughput, scaling per worker and each worker's share of the CPU
  (even when the connections are spread evenly);
- peak RSS per worker after the large bodies, call-log rows against upstream calls, errors.

Writes bench/results/agent-<date>T<HHMM>-<cores>core.json and bench/results/agent-latest-<cores>core.md
(`-quick` variants for --quick).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import peers, procstats, targets, workloads  # noqa: E402
from bench.agent_cases import AGENT_CASES, BARE_CASES, bare_call, gateway_call  # noqa: E402
from bench.run import Runner, ensure_wrk, machine_info  # noqa: E402
from bench.targets import (  # noqa: E402
    ALT_LONG_MODEL, BENCH_DIR, LONG_MODEL, MODEL, PYTHON, RESPONSES_LONG_MODEL, Call, Target,
)

class Layout:
    """CPU pinning: upstream, load generators, the single-worker targets, and modelgate's workers."""

    def __init__(self, cores: int, no_pin: bool) -> None:
        self.cores = cores
        if no_pin or cores < 2:
            self.upstream = self.load = self.target = self.workers = None
            self.max_workers = max(1, cores)
            self.wrk_threads = 1
        elif cores < 8:  # the 2-core box: the target alone on CPU 0, everything else on CPU 1
            self.upstream, self.load, self.target, self.workers = "1", "1", "0", None
            self.max_workers = cores
            self.wrk_threads = 1
        else:  # upstream on 0, load on 1-3, single-worker targets on 4, workers from 4 up
            self.upstream, self.load, self.target = "0", "1-3", "4"
            self.workers = f"4-{cores - 1}"
            self.max_workers = cores - 4
            self.wrk_threads = 3

    def describe(self) -> dict[str, Any]:
        return {"upstream": self.upstream, "load": self.load, "target": self.target, "workers": self.workers,
                "max_workers": self.max_workers}


def med(values: list[float]) -> dict[str, float] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4), "n": len(values)}


class AgentBench:
    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        self.args = args
        self.quick = args.quick
        self.rounds = args.rounds or (1 if args.quick else 3)
        self.duration = args.duration or (1 if args.quick else 4)
        self.stream_seconds = args.stream_seconds or (1.0 if args.quick else 4.0)
        self.layout = Layout(os.cpu_count() or 1, args.no_pin)
        self.run_dir = run_dir
        self.runner = Runner(None, run_dir)  # type: ignore[arg-type]
        self.upstream: Target | None = None

    # --- request/response, interleaved ------------------------------------------------------

    def interleaved(self, cases: list[tuple[str, Target, Call]], connections: int) -> dict[str, list[dict]]:
        """Each case once per round, in the same order every round; all targets live on the same core."""
        out: dict[str, list[dict]] = {label: [] for label, _, _ in cases}
        for label, target, call in cases:  # warm-up: first calls, caches, connection pools
            self.counted(target, lambda: self.runner.wrk(target, call, connections, 1, self.layout.load))
        for r in range(self.rounds):
            for label, target, call in cases:
                res = self.counted(target, lambda: self.runner.wrk(
                    target, call, connections, self.duration, self.layout.load, self.layout.wrk_threads))
                out[label].append(res)
                print(f"  round {r + 1} {label}: {res.get('rps')} req/s, {res.get('cpu_ms_per_request')} ms CPU/req"
                      f" errors {res.get('non_2xx')}/{res.get('socket_errors')} {res.get('error', '')}", flush=True)
        return out

    def counted(self, target: Target, load: Callable[[], dict]) -> dict:
        """Runs a load; for modelgate, adds the upstream calls it caused (the call log must hold as many)."""
        if not target.name.startswith("modelgate") or self.upstream is None:
            return load()
        # Calls a load leaves in flight still reach the upstream after it ends: let them land first.
        time.sleep(0.3)
        before = targets.upstream_calls(self.upstream)
        try:
            return load()
        finally:
            time.sleep(0.3)
            target.info["served"] = target.info.get("served", 0) + targets.upstream_calls(self.upstream) - before

    # --- long streams -----------------------------------------------------------------------

    def stream_load(self, target: Target, call: Call, concurrency: int) -> dict[str, Any]:
        body_file = self.runner._body_file(call)
        argv = [PYTHON, str(BENCH_DIR / "streamload.py"), "--url", target.url + call.path, "--body-file",
                str(body_file), "--concurrency", str(concurrency), "--seconds", str(self.stream_seconds)]
        for header in call.headers:
            argv += ["--header", header]
        if self.layout.load:
            argv = ["taskset", "-c", self.layout.load, *argv]
        pid = target.proc.pid if target.proc else None
        before = procstats.cpu_seconds(pid) if pid else 0.0
        done = subprocess.run(argv, capture_output=True, text=True, timeout=self.stream_seconds + 120)
        after = procstats.cpu_seconds(pid) if pid else 0.0
        if done.returncode != 0:
            return {"error": f"streamload failed: {done.stderr.strip()[-300:]}"}
        res = orjson.loads(done.stdout)
        chunks = res["completed"] * self.args.long_chunks
        res["cpu_s"] = round(after - before, 3)
        res["cpu_us_per_chunk"] = round((after - before) * 1e6 / chunks, 3) if chunks else None
        return res

    def streams(self, cases: list[tuple[str, Target, Call]], concurrency: int) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {label: [] for label, _, _ in cases}
        for r in range(self.rounds):
            for label, target, call in cases:
                res = self.counted(target, lambda: self.stream_load(target, call, concurrency))
                out[label].append(res)
                fb = (res.get("first_byte_ms") or {}).get("p50")
                print(f"  round {r + 1} {label} x{concurrency}: {res.get('completed')} streams, "
                      f"{res.get('cpu_us_per_chunk')} us CPU/chunk, TTFB p50 {fb} ms, errors "
                      f"{res.get('non_2xx')}/{res.get('socket_errors')} {res.get('error', '')}", flush=True)
        return out

    # --- workers ----------------------------------------------------------------------------

    def workers(self, upstream: Target, counts: list[int], call_for: Callable[[Target], Call]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for w in counts:
            print(f"== modelgate, {w} worker(s)", flush=True)
            cpus = self.layout.target if w == 1 else self.layout.workers
            try:
                mg = targets.start_modelgate(upstream, self.run_dir, cpus, w, tag="-scaling")
            except Exception as exc:
                out[f"w{w}"] = {"error": str(exc)[-1000:]}
                continue
            try:
                call = call_for(mg)
                self.counted(mg, lambda: self.runner.wrk(mg, call, 64, 1, self.layout.load, self.layout.wrk_threads))
                runs, shares = [], []
                for _ in range(max(1, self.rounds - 1)):
                    pids = procstats.tree_pids(mg.proc.pid)
                    before = {pid: procstats.cpu_seconds_of(pid) for pid in pids}
                    res = self.counted(mg, lambda: self.runner.wrk(mg, call, 64, self.duration, self.layout.load,
                                                                   self.layout.wrk_threads))
                    used = sorted((procstats.cpu_seconds_of(pid) - before[pid] for pid in pids), reverse=True)
                    busy = used[:w]  # the workers; the supervisor (if any) idles
                    shares.append(round(min(busy) / max(busy), 3) if busy and max(busy) > 0 else 0.0)
                    runs.append(res)
                    print(f"  w{w}: {res.get('rps')} req/s, per-worker CPU s {[round(u, 2) for u in busy]}",
                          flush=True)
                out[f"w{w}"] = {"runs": runs, "rps": med([r.get("rps") for r in runs]),
                                "min_over_max_worker_cpu": med(shares),
                                "rss_mb": procstats.peak_rss_mb(mg.proc.pid)}
            finally:
                out.setdefault(f"w{w}", {})["stop"] = stop = stop_modelgate(mg)
                print(f"  call log: {stop}", flush=True)
        base = (out.get("w1", {}).get("rps") or {}).get("median")
        for w in counts:
            rps = (out.get(f"w{w}", {}).get("rps") or {}).get("median")
            if base and rps:
                out[f"w{w}"]["scaling_per_worker"] = round(rps / (w * base), 3)
        return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="modelgate agent-traffic benchmark (issue 14)",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: one round, 1 s loads")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 1)")
    parser.add_argument("--duration", type=int, help="seconds per wrk run (default 4, quick 1)")
    parser.add_argument("--stream-seconds", type=float, help="seconds per long-stream load (default 4, quick 1)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections for request/response")
    parser.add_argument("--long-chunks", type=int, default=300, help="chunks of a long stream")
    parser.add_argument("--gap-ms", type=float, default=2.0, help="milliseconds between long-stream chunks")
    parser.add_argument("--concurrency", default="20,200", help="concurrent long streams")
    parser.add_argument("--workers", default="1,2,4,max", help="modelgate worker counts ('max': cores left)")
    parser.add_argument("--peers", default="tensorzero,portkey,litellm", help="peer gateways to try")
    parser.add_argument("--parts", default="requests,streams,workers", help="which parts to run")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--out-dir", type=Path, default=BENCH_DIR / "results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    wrk_path = ensure_wrk()
    stamp = dt.datetime.now(dt.timezone.utc)
    run_dir = args.out_dir / "tmp" / ("agent-" + stamp.strftime("%Y%m%dT%H%M%S"))
    run_dir.mkdir(parents=True, exist_ok=True)
    bench = AgentBench(args, run_dir)
    lay = bench.layout
    parts = set(args.parts.split(","))
    results: dict[str, Any] = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": " ".join(["python", "-m", "bench.agent", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_info(wrk_path),
        "plan": {"quick": args.quick, "rounds": bench.rounds, "duration_s": bench.duration,
                 "stream_seconds": bench.stream_seconds, "connections": args.connections,
                 "long_chunks": args.long_chunks, "gap_ms": args.gap_ms, "layout": lay.describe()},
        "peers": {},
    }
    started = time.monotonic()
    upstream = targets.start_upstream(run_dir, lay.upstream, 8, 0.0, args.long_chunks, args.gap_ms)
    bench.upstream = upstream
    live: list[Target] = []
    try:
        bare = targets.start_bare(upstream, run_dir, lay.target)
        live.append(bare)
        mg = targets.start_modelgate(upstream, run_dir, lay.target, 1)
        live.append(mg)
        results["rss_mb_after_start"] = procstats.peak_rss_mb(mg.proc.pid)
        peer_targets = start_peers(args, upstream, run_dir, lay.target, results["peers"])
        live.extend(peer_targets)
        key = mg.info["api_key"]
        mg_chat = [f"Authorization: Bearer {key}"]
        mg_msgs = [f"x-api-key: {key}", "alt-version: 2023-06-01"]
        up_chat = upstream.calls["chat"].headers

        def chat(body: bytes) -> Call:
            return Call("/v1/chat/completions", mg_chat, body, False)

        def msgs(body: bytes) -> Call:
            return Call("/alt/v1/messages", mg_msgs, body, False)

        if "requests" in parts:
            for shape_name, shape in (("agent150", workloads.AGENT_150), ("agent80", workloads.AGENT_80)):
                print(f"== {shape_name}: interleaved", flush=True)
                cases = [(name, bare, bare_call(name, shape, upstream)) for name in BARE_CASES]
                cases += [(case.name, mg, gateway_call(case, shape, key)) for case in AGENT_CASES]
                if shape is workloads.AGENT_150:
                    chat_body = workloads.agent_chat_body(shape, MODEL)
                    cases += [(p.name, p, peers.chat_with_model(p, chat_body)) for p in peer_targets]
                results[shape_name] = bench.interleaved(cases, args.connections)
            print("== small requests: interleaved", flush=True)
            small = targets.chat_call("/v1/chat/completions", up_chat)
            cases = [("bare", bare, small), ("modelgate", mg, chat(small.body)),
                     ("bare stream", bare, small.streamed()), ("modelgate stream", mg, chat(small.streamed().body))]
            cases += [(p.name, p, peers.chat_with_model(p, small.body)) for p in peer_targets]
            results["small"] = bench.interleaved(cases, args.connections)
        results["rss_mb_after_requests"] = procstats.peak_rss_mb(mg.proc.pid)

        if "streams" in parts:
            long_chat = orjson.dumps({"model": LONG_MODEL, "max_tokens": 1024, "stream": True,
                                      "messages": [{"role": "user", "content": "Write a long answer."}]})
            long_msgs = orjson.dumps({"model": LONG_MODEL, "max_tokens": 1024, "stream": True,
                                      "messages": [{"role": "user", "content": "Write a long answer."}]})
            alt_chat = orjson.dumps({**orjson.loads(long_chat), "model": ALT_LONG_MODEL})
            alt_msgs = orjson.dumps({**orjson.loads(long_msgs), "model": ALT_LONG_MODEL})
            long_responses = orjson.dumps({"model": RESPONSES_LONG_MODEL, "max_output_tokens": 1024, "stream": True,
                                           "input": "Write a long answer."})
            cases = [
                ("direct chat", upstream, Call("/v1/chat/completions", up_chat, long_chat, True)),
                ("bare chat", bare, Call("/v1/chat/completions", up_chat, long_chat, True)),
                ("modelgate pass-through chat", mg, chat(long_chat)),
                ("modelgate pass-through messages", mg, msgs(alt_msgs)),
                ("modelgate pass-through responses", mg, Call("/v1/responses", mg_chat, long_responses, True)),
                ("modelgate messages→chat", mg, msgs(long_msgs)),
                ("modelgate chat→messages", mg, chat(alt_chat)),
            ]
            cases += [(p.name, p, peers.chat_with_model(p, long_chat)) for p in peer_targets
                      # Portkey 1.15.2 on Node answers streams with 500: its updateHeaders appends to a fetch
                      # Response's immutable headers (Portkey-AI/gateway issues 1389 and 1550).
                      if p.name != "portkey"]
            results["streams"] = {}
            for conc in (int(c) for c in args.concurrency.split(",")):
                print(f"== long streams x{conc}", flush=True)
                results["streams"][f"x{conc}"] = bench.streams(cases, conc)
        results["rss_mb"] = procstats.peak_rss_mb(mg.proc.pid)
    finally:
        stops = {}
        for target in reversed(live):
            stops[target.name] = stop_modelgate(target) if target.name.startswith("modelgate") else target.stop()
        results["stop"] = stops
        print(f"  call log: {stops.get('modelgate-w1')}", flush=True)
    try:
        if "workers" in parts:
            counts = []
            for w in args.workers.split(","):
                n = lay.max_workers if w == "max" else int(w)
                if n <= lay.max_workers and n not in counts:
                    counts.append(n)
            results["workers"] = bench.workers(upstream, counts, lambda t: Call(
                "/v1/chat/completions", [f"Authorization: Bearer {t.info['api_key']}"],
                targets.chat_call("/", []).body, False))
    finally:
        upstream.stop()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    from bench import agent_report

    json_path, md_path = agent_report.write(results, args.out_dir, args.quick)
    print(f"\nraw results: {json_path}\ntable: {md_path}\n", flush=True)
    print(md_path.read_text())
    return 0


def stop_modelgate(target: Target) -> dict[str, Any]:
    """Graceful stop, then the call log against the upstream calls this harness's loads caused."""
    out: dict[str, Any] = {"exit_code": target.proc.stop() if target.proc else None}
    rows = targets.count_call_log(Path(target.info["data_dir"]))
    served = target.info.get("served", 0)
    out.update({"upstream_calls": served, "call_log_rows": rows, "lost_call_log_rows": max(0, served - rows)})
    return out


def start_peers(args: argparse.Namespace, upstream: Target, run_dir: Path, cpus: str | None,
                info: dict[str, Any]) -> list[Target]:
    started = []
    for name in [p for p in args.peers.split(",") if p]:
        print(f"== peer {name}", flush=True)
        try:
            if name == "tensorzero":
                install = peers.ensure_tensorzero(run_dir)
                start: Callable[[], Target] = lambda: peers.start_tensorzero(upstream, run_dir, cpus)
            elif name == "portkey":
                install = peers.ensure_portkey(run_dir)
                start = lambda: peers.start_portkey(upstream, run_dir, cpus)
            elif name == "litellm":
                install = targets.ensure_litellm(run_dir)
                start = lambda: targets.start_litellm(upstream, run_dir, cpus)
            else:
                raise SystemExit(f"unknown peer {name}")
            info[name] = install
            if not install["installed"]:
                print(f"  not installed: {install['error']}", flush=True)
                continue
            started.append(start())
        except Exception as exc:  # a peer that fails to start is a result, not a crash of the run
            info[name] = {**info.get(name, {}), "error": str(exc)[-1000:]}
            print(f"  failed: {str(exc)[-300:]}", flush=True)
    return started


if __name__ == "__main__":
    raise SystemExit(main())
