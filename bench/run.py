"""Run the whole benchmark in one go: `.venv/bin/python -m bench.run` (add --quick for a smoke run).

Targets, all in front of the same fake upstream on the same machine:
direct (the upstream alone), bare (a pass-through aiohttp proxy), modelgate
(1 worker in full; 2 and 4 workers for throughput; conversion paths), and
litellm (its proxy from PyPI, in bench/.venv-litellm, one worker, no database).

Writes raw results to bench/results/<date>.json and a markdown table to
bench/results/latest.md. Everything listens and sends on 127.0.0.1 only and
every load is bounded in count and time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):  # `python bench/run.py` as well as `python -m bench.run`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import procstats, report, targets  # noqa: E402
from bench.targets import BENCH_DIR, PYTHON, REPO, Call, Target  # noqa: E402

TOOLS_VENV = BENCH_DIR / ".venv-tools"  # py-spy for --profile


class Plan:
    """Durations, rates and CPU pinning for one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.quick = args.quick
        self.duration = args.duration or (1 if args.quick else 8)  # seconds per wrk run
        self.warmup = 1 if args.quick else 2
        self.latency_seconds = args.latency_seconds or (1.0 if args.quick else 6.0)
        self.rates = sorted(float(r) for r in args.rates.split(","))
        self.connections = [int(c) for c in args.connections.split(",")]
        self.workers = [int(w) for w in args.workers.split(",")]
        self.conversion = not args.no_conversion
        self.profile = args.profile
        cores = os.cpu_count() or 1
        # Two cores: the target alone on CPU 0; load generators and the fake upstream on CPU 1.
        self.target_cpus = "0" if cores >= 2 and not args.no_pin else None
        self.load_cpus = "1" if cores >= 2 and not args.no_pin else None

    def count(self, rate: float) -> int:
        return max(50, int(rate * self.latency_seconds))


def ensure_wrk() -> str:
    path = shutil.which("wrk")
    if path:
        return path
    print("wrk missing: installing Debian's package", flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False, timeout=600,
                   stdout=subprocess.DEVNULL)
    path = shutil.which("wrk")
    if not path:
        raise SystemExit("wrk is required (apt-get install -y wrk)")
    return path


def ensure_py_spy() -> str | None:
    exe = TOOLS_VENV / "bin" / "py-spy"
    if not exe.exists():
        subprocess.run([PYTHON, "-m", "venv", str(TOOLS_VENV)], check=False, timeout=300)
        subprocess.run([str(TOOLS_VENV / "bin" / "pip"), "install", "-q", "py-spy"], check=False, timeout=600)
    return str(exe) if exe.exists() else None


class Runner:
    def __init__(self, plan: Plan, run_dir: Path) -> None:
        self.plan = plan
        self.run_dir = run_dir

    def _body_file(self, call: Call) -> Path:
        path = self.run_dir / f"body-{hashlib.sha256(call.body).hexdigest()[:12]}.json"
        if not path.exists():
            path.write_bytes(call.body)
        return path

    def wrk(self, target: Target, call: Call, connections: int, duration: float,
            load_cpus: str | None, threads: int = 1) -> dict[str, Any]:
        """Saturation: wrk with `connections` keep-alive connections for `duration` seconds."""
        env = {**os.environ, "BENCH_BODY_FILE": str(self._body_file(call)),
               "BENCH_HEADERS": "\n".join(call.headers)}
        argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
                "-s", str(BENCH_DIR / "wrk_post.lua"), target.url + call.path]
        if load_cpus:
            argv = ["taskset", "-c", load_cpus, *argv]
        cpu_before = procstats.cpu_seconds(target.proc.pid) if target.proc else 0.0
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration + 60)
        cpu_after = procstats.cpu_seconds(target.proc.pid) if target.proc else 0.0
        match = re.search(r"^BENCH_JSON (.*)$", done.stdout, re.M)
        if done.returncode != 0 or not match:
            return {"error": f"wrk failed ({done.returncode}): {done.stderr.strip()[-300:]}"}
        raw = orjson.loads(match.group(1))
        requests = raw["requests"]
        seconds = raw["duration_us"] / 1e6
        errors = raw["errors"]
        return {
            "connections": connections, "duration_s": round(seconds, 3), "requests": requests,
            "rps": round(requests / seconds, 1) if seconds else 0.0,
            "non_2xx": errors["status"],
            "socket_errors": errors["connect"] + errors["read"] + errors["write"] + errors["timeout"],
            "errors": errors,
            "latency_ms": {k: round(v / 1000.0, 3) for k, v in raw["latency_us"].items()},
            "cpu_s": round(cpu_after - cpu_before, 3),
            "cpu_ms_per_request": round((cpu_after - cpu_before) * 1000.0 / requests, 4) if requests else None,
        }

    def open_loop(self, target: Target, call: Call, rate: float, load_cpus: str | None) -> dict[str, Any]:
        """Latency at a fixed rate from the open-loop client in its own process."""
        count = self.plan.count(rate)
        argv = [PYTHON, str(BENCH_DIR / "loadgen.py"), "--url", target.url + call.path,
                "--body-file", str(self._body_file(call)), "--rate", str(rate), "--count", str(count)]
        for header in call.headers:
            argv += ["--header", header]
        if load_cpus:
            argv = ["taskset", "-c", load_cpus, *argv]
        cpu_before = procstats.cpu_seconds(target.proc.pid) if target.proc else 0.0
        done = subprocess.run(argv, capture_output=True, text=True, timeout=count / rate + 120)
        cpu_after = procstats.cpu_seconds(target.proc.pid) if target.proc else 0.0
        if done.returncode != 0:
            return {"error": f"loadgen failed ({done.returncode}): {done.stderr.strip()[-300:]}"}
        out = orjson.loads(done.stdout)
        if out["completed"]:
            out["cpu_ms_per_request"] = round((cpu_after - cpu_before) * 1000.0 / out["completed"], 4)
        return out

    def measure(self, target: Target, call_name: str, *, connections: list[int], rates: list[float],
                load_cpus: str | None, streams: bool = True) -> dict[str, Any]:
        """Saturation throughput then fixed-rate latency, non-streamed and streamed."""
        call = target.calls[call_name]
        out: dict[str, Any] = {}
        for streamed in ([False, True] if streams else [False]):
            c = call.streamed() if streamed else call
            mode = "stream" if streamed else "plain"
            print(f"  {target.name} {call_name} {mode}: warm-up", flush=True)
            self.wrk(target, c, connections[0], self.plan.warmup, load_cpus)
            sat = {}
            for conns in connections:
                sat[f"c{conns}"] = result = self.wrk(target, c, conns, self.plan.duration, load_cpus)
                print(f"  {target.name} {call_name} {mode} c{conns}: {result.get('rps')} req/s "
                      f"cpu {result.get('cpu_ms_per_request')} ms/req errors "
                      f"{result.get('non_2xx')}/{result.get('socket_errors')} {result.get('error', '')}",
                      flush=True)
            best = max((r.get("rps") or 0.0) for r in sat.values())
            lat = {}
            for i, rate in enumerate(rates):
                # "Where the target can take them": an open-loop rate past ~70 % of saturation only
                # measures the queue; the lowest rate is still measured if the target sustains it.
                if rate > (best if i == 0 else 0.7 * best):
                    lat[f"r{int(rate)}"] = {"skipped": f"rate too close to saturation ({best:.0f} req/s)"}
                    continue
                lat[f"r{int(rate)}"] = result = self.open_loop(target, c, rate, load_cpus)
                lm = result.get("latency_ms", {})
                print(f"  {target.name} {call_name} {mode} @{rate:.0f}/s: p50 {lm.get('p50')} "
                      f"p99 {lm.get('p99')} ms errors {result.get('non_2xx')}/{result.get('socket_errors')}",
                      flush=True)
            out[mode] = {"saturation": sat, "latency": lat}
        return out

    def profile(self, target: Target, call: Call, load_cpus: str | None) -> dict[str, Any]:
        """py-spy on the target tree during a saturation run; top functions by own time."""
        py_spy = ensure_py_spy()
        if py_spy is None:
            return {"error": "py-spy could not be installed"}
        raw_path = self.run_dir / f"profile-{target.name}.txt"
        seconds = self.plan.duration
        spy = subprocess.Popen([py_spy, "record", "--pid", str(target.proc.pid), "--subprocesses",
                                "--duration", str(seconds + 1), "--rate", "250", "--nonblocking",
                                "--format", "raw", "--output", str(raw_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # let py-spy attach
        load = self.wrk(target, call, 32, seconds, load_cpus)
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate()
        if not raw_path.exists():
            return {"error": f"py-spy failed: {err.decode(errors='replace').strip()[-300:]}"}
        return {"load": load, **report.collapsed_summary(raw_path.read_text()), "raw_file": str(raw_path)}


def run_target(runner: Runner, target: Target, direct: bool = False) -> dict[str, Any]:
    plan = runner.plan
    # The direct upstream runs on the load core, so its load goes on the other core.
    load = plan.target_cpus if direct else plan.load_cpus
    out: dict[str, Any] = {"info": target.info}
    out["chat"] = runner.measure(target, "chat", connections=plan.connections, rates=plan.rates, load_cpus=load)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="modelgate benchmark harness",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--targets", default="direct,bare,modelgate,litellm",
                        help="comma list of direct, bare, modelgate, litellm")
    parser.add_argument("--quick", action="store_true", help="short smoke run (1 s loads)")
    parser.add_argument("--duration", type=int, help="seconds per saturation run (default 8, quick 1)")
    parser.add_argument("--latency-seconds", type=float, help="seconds per fixed-rate run (default 6, quick 1)")
    parser.add_argument("--rates", default="50,200,500", help="open-loop rates, requests/s")
    parser.add_argument("--connections", default="8,32", help="wrk connection counts")
    parser.add_argument("--workers", default="1,2,4", help="modelgate worker counts (first one in full)")
    parser.add_argument("--redis", metavar="URL",
                        help="also run each --redis-workers count with REDIS_URL=URL (shared buckets, breakers, "
                             "cooldowns; a fresh key prefix per run): the cost of one gateway across workers")
    parser.add_argument("--redis-workers", default="4", help="worker counts measured with and without --redis")
    parser.add_argument("--chunks", type=int, default=8, help="content chunks per streamed answer")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="upstream delay per answer")
    parser.add_argument("--no-conversion", action="store_true", help="skip modelgate's conversion paths")
    parser.add_argument("--profile", action="store_true", help="py-spy profile of modelgate under load")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for the 1-minute load average to drop below 1")
    parser.add_argument("--out-dir", type=Path, default=BENCH_DIR / "results")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    plan = Plan(args)
    chosen = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(chosen) - {"direct", "bare", "modelgate", "litellm"}
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")

    wrk_path = ensure_wrk()
    deadline = time.monotonic() + args.wait_quiet
    while os.getloadavg()[0] >= 1.0 and time.monotonic() < deadline:
        print(f"waiting for a quiet machine (load average {os.getloadavg()[0]:.2f})", flush=True)
        time.sleep(min(15.0, max(0.0, deadline - time.monotonic())))
    stamp = dt.datetime.now(dt.timezone.utc)
    run_dir = args.out_dir / "tmp" / stamp.strftime("%Y%m%dT%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(plan, run_dir)
    results: dict[str, Any] = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.run", *(argv or sys.argv[1:])]),
        "machine": machine_info(wrk_path),
        "plan": {"quick": plan.quick, "duration_s": plan.duration, "latency_seconds": plan.latency_seconds,
                 "rates": plan.rates, "connections": plan.connections, "workers": plan.workers,
                 "chunks": args.chunks, "delay_ms": args.delay_ms,
                 "pinning": {"target": plan.target_cpus, "load_and_upstream": plan.load_cpus}},
        "targets": {},
    }
    started = time.monotonic()
    upstream = targets.start_upstream(run_dir, plan.load_cpus, args.chunks, args.delay_ms)
    try:
        if "direct" in chosen:
            print("== direct", flush=True)
            res = run_target(runner, upstream, direct=True)
            if "modelgate" in chosen and plan.conversion:
                res["messages"] = runner.measure(upstream, "messages", connections=plan.connections[-1:],
                                                 rates=[200.0], load_cpus=plan.target_cpus)
            res["rss_mb"] = procstats.peak_rss_mb(upstream.proc.pid)
            results["targets"]["direct"] = res
        if "bare" in chosen:
            print("== bare", flush=True)
            results["targets"]["bare"] = measure_simple(runner, lambda: targets.start_bare(
                upstream, run_dir, plan.target_cpus))
        if "modelgate" in chosen:
            for i, workers in enumerate(plan.workers):
                print(f"== modelgate, {workers} worker(s)", flush=True)
                results["targets"][f"modelgate-w{workers}"] = measure_modelgate(
                    runner, upstream, run_dir, workers, full=(i == 0))
        if "modelgate" in chosen and args.redis:
            for workers in [int(w) for w in args.redis_workers.split(",") if w.strip()]:
                if f"modelgate-w{workers}" not in results["targets"]:
                    print(f"== modelgate, {workers} worker(s)", flush=True)
                    results["targets"][f"modelgate-w{workers}"] = measure_modelgate(
                        runner, upstream, run_dir, workers, full=False)
                print(f"== modelgate, {workers} worker(s), shared state in Redis", flush=True)
                results["targets"][f"modelgate-w{workers}-redis"] = measure_modelgate(
                    runner, upstream, run_dir, workers, full=False, redis_url=args.redis)
        if "litellm" in chosen:
            print("== litellm", flush=True)
            install = targets.ensure_litellm(run_dir)
            if install["installed"]:
                res = measure_simple(runner, lambda: targets.start_litellm(upstream, run_dir, plan.target_cpus))
                res.setdefault("info", {})["version"] = install["version"]
                results["targets"]["litellm"] = res
            else:
                print(f"  LiteLLM not installed: {install['error']}", flush=True)
                results["targets"]["litellm"] = {"error": f"install failed: {install['error']}"}
    finally:
        upstream.stop()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    json_path, md_path = report.write(results, args.out_dir, plan.quick)
    print(f"\nraw results: {json_path}\ntable: {md_path}\n", flush=True)
    print(md_path.read_text())
    return 0


def measure_simple(runner: Runner, start: Any) -> dict[str, Any]:
    try:
        target = start()
    except RuntimeError as exc:
        print(f"  failed to start: {exc}", flush=True)
        return {"error": str(exc)[-2000:]}
    res: dict[str, Any] = {}
    try:
        started_rss = procstats.peak_rss_mb(target.proc.pid)
        res = run_target(runner, target)
        res["rss_mb_after_start"] = started_rss
        res["rss_mb"] = procstats.peak_rss_mb(target.proc.pid)
    finally:
        res["stop"] = target.stop()
    return res


def measure_modelgate(runner: Runner, upstream: Target, run_dir: Path, workers: int, full: bool,
                      redis_url: str | None = None) -> dict[str, Any]:
    plan = runner.plan
    # One worker is pinned like the other targets; several workers get both cores (shared with the load).
    cpus = plan.target_cpus if workers == 1 else None
    load = plan.load_cpus if workers == 1 else None
    extra = {"REDIS_URL": redis_url, "REDIS_PREFIX": f"bench-{os.getpid()}-{time.time_ns()}:"} if redis_url else None
    try:
        target = targets.start_modelgate(upstream, run_dir, cpus, workers, extra,
                                         tag="-redis" if redis_url else "")
    except Exception as exc:  # any start-up failure is a result to report, not a crash of the run
        print(f"  failed to start: {exc}", flush=True)
        return {"error": str(exc)[-2000:]}
    res: dict[str, Any] = {"info": target.info, "rss_mb_after_start": procstats.peak_rss_mb(target.proc.pid)}
    try:
        if full:
            res["chat"] = runner.measure(target, "chat", connections=plan.connections, rates=plan.rates,
                                         load_cpus=load)
            if plan.conversion:
                for name in ("messages", "chat_to_messages"):
                    if name in target.calls:
                        res[name] = runner.measure(target, name, connections=plan.connections[-1:],
                                                   rates=[200.0], load_cpus=load)
            if plan.profile:
                print("  profiling", flush=True)
                res["profile"] = runner.profile(target, target.calls["chat"], load)
        else:
            res["chat"] = runner.measure(target, "chat", connections=plan.connections[-1:], rates=[],
                                         load_cpus=load)
        res["rss_mb"] = procstats.peak_rss_mb(target.proc.pid)
    finally:
        res["stop"] = target.stop()
    print(f"  call log: {res['stop']}", flush=True)
    return res


def machine_info(wrk_path: str) -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    wrk_version = subprocess.run([wrk_path, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    # BENCH_COMMIT names the commit where the tree was copied without its git directory.
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {"cpu": model, "cores": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1),
            # Other work on the machine skews every figure: the table shows this next to them.
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            "kernel": platform.release(), "python": platform.python_version(),
            "wrk": wrk_version.strip(), "modelgate_commit": commit}


if __name__ == "__main__":
    raise SystemExit(main())
