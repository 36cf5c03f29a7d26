"""Turn the raw results of one run into JSON on disk and markdown tables."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

# Issue 6 targets for modelgate, 1 worker.
GOALS = {
    "plain_vs_bare": 0.50,
    "plain_vs_litellm": 30.0,
    "stream_vs_bare": 0.60,
    "cpu_ms": 0.25,
    "p50_added_200": 1.5,
    "p99_added_200": 3.0,
    "rss_mb": 100.0,
}


def write(results: dict[str, Any], out_dir: Path, quick: bool) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if quick else ""
    json_path = out_dir / f"{results['date'][:10]}{suffix}.json"
    json_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    md_path = out_dir / f"latest{suffix}.md"
    md_path.write_text(markdown(results))
    return json_path, md_path


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def count_errors(tree: Any) -> int:
    """Non-2xx answers and socket errors over every measured run of a target."""
    if isinstance(tree, dict):
        own = sum(v for k, v in tree.items() if k in ("non_2xx", "socket_errors") and isinstance(v, int))
        failed = 1 if isinstance(tree.get("error"), str) and "connections" not in tree else 0
        return own + failed + sum(count_errors(v) for k, v in tree.items() if k != "errors")
    if isinstance(tree, list):
        return sum(count_errors(v) for v in tree)
    return 0


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _rps(res: Any, call: str, mode: str, conns: str) -> float | None:
    return _get(res, call, mode, "saturation", conns, "rps")


def _lat(res: Any, call: str, mode: str, rate: str, field: str, pct: str) -> float | None:
    return _get(res, call, mode, "latency", rate, field, pct)


def added(res: Any, base: Any, call: str, base_call: str, mode: str, rate: str, field: str, pct: str) -> float | None:
    mine, theirs = _lat(res, call, mode, rate, field, pct), _lat(base, base_call, mode, rate, field, pct)
    if mine is None or theirs is None:
        return None
    return mine - theirs


def _pair(a: float | None, b: float | None, sign: bool = True) -> str:
    if a is None and b is None:
        return "–"
    f = "{:+.2f}" if sign else "{:.2f}"
    return f"{f.format(a) if a is not None else '–'} / {f.format(b) if b is not None else '–'}"


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    plan = results["plan"]
    t = results["targets"]
    direct = t.get("direct")
    lines = [
        f"# Benchmark results ({'quick smoke run' if plan['quick'] else 'full run'})",
        "",
        f"- Date: {results['date']}; modelgate commit {m.get('modelgate_commit')}",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Linux {m['kernel']}, "
        f"Python {m['python']}, {m['wrk']}",
        f"- Command: `{results['command']}` ({results.get('elapsed_s')} s)",
        f"- Load average before / after the run (anything above ~0.1 before means other work was "
        f"competing for the 2 cores): {m.get('loadavg_at_start')} / {m.get('loadavg_at_end')}",
        f"- Loads: wrk {plan['duration_s']} s per run at {', '.join(map(str, plan['connections']))} "
        f"connections; open-loop {plan['latency_seconds']} s per rate; upstream answers "
        f"{plan['chunks']} stream chunks, delay {plan['delay_ms']} ms",
        f"- Pinning: target on CPU {plan['pinning']['target']}, load generators and fake upstream on CPU "
        f"{plan['pinning']['load_and_upstream']} (direct: upstream on {plan['pinning']['load_and_upstream']}, "
        f"load on {plan['pinning']['target']}; modelgate with 2+ workers unpinned)",
        "",
        "## Chat completions, one worker",
        "",
        "Throughput in requests/s at saturation. Latency columns: p50 / p99 in ms; for `direct` the "
        "absolute figures, for the others the latency *added* to the direct call at the same rate. "
        "CPU: target process tree's own CPU time per request at saturation (32 connections, non-streamed).",
        "",
        "| target | req/s c8 | req/s c32 | stream c8 | stream c32 | CPU ms/req | @50/s | @200/s | @500/s "
        "| stream TTFB @50/s | stream TTFB @200/s | peak RSS MB (after start-up) | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = [name for name in ("direct", "bare") if name in t]
    order += [name for name in t if name.startswith("modelgate-")][:1]
    order += [name for name in ("litellm",) if name in t]
    for name in order:
        res = t[name]
        label = name + (f" {res['info']['version']}" if _get(res, "info", "version") else "")
        if "error" in res and "chat" not in res:
            lines.append(f"| {label} | {res['error'].splitlines()[0][:80]} |" + " |" * 11)
            continue
        cpu = _get(res, "chat", "plain", "saturation", "c32", "cpu_ms_per_request") or _get(
            res, "chat", "plain", "saturation", f"c{plan['connections'][-1]}", "cpu_ms_per_request")
        row = [label, _fmt(_rps(res, "chat", "plain", "c8")), _fmt(_rps(res, "chat", "plain", "c32")),
               _fmt(_rps(res, "chat", "stream", "c8")), _fmt(_rps(res, "chat", "stream", "c32")),
               _fmt(cpu, 3)]
        for rate in ("r50", "r200", "r500"):
            if name == "direct":
                row.append(_pair(_lat(res, "chat", "plain", rate, "latency_ms", "p50"),
                                 _lat(res, "chat", "plain", rate, "latency_ms", "p99"), sign=False))
            elif _get(res, "chat", "plain", "latency", rate, "skipped"):
                row.append("skipped")
            else:
                row.append(_pair(added(res, direct, "chat", "chat", "plain", rate, "latency_ms", "p50"),
                                 added(res, direct, "chat", "chat", "plain", rate, "latency_ms", "p99")))
        for rate in ("r50", "r200"):
            if name == "direct":
                row.append(_pair(_lat(res, "chat", "stream", rate, "first_byte_ms", "p50"),
                                 _lat(res, "chat", "stream", rate, "first_byte_ms", "p99"), sign=False))
            elif _get(res, "chat", "stream", "latency", rate, "skipped"):
                row.append("skipped")
            else:
                row.append(_pair(added(res, direct, "chat", "chat", "stream", rate, "first_byte_ms", "p50"),
                                 added(res, direct, "chat", "chat", "stream", rate, "first_byte_ms", "p99")))
        rss, boot = _get(res, "rss_mb", "sum"), _get(res, "rss_mb_after_start", "sum")
        row += [_fmt(rss, 1) + (f" ({boot:.1f})" if boot is not None else ""), _fmt(count_errors(res))]
        lines.append("| " + " | ".join(row) + " |")

    workers = [name for name in t if name.startswith("modelgate-")]
    if workers:
        lines += ["", "## modelgate by worker count", "",
                  "| workers | req/s c32 | stream c32 | CPU ms/req | peak RSS MB (sum) | errors "
                  "| call-log rows / upstream calls | lost rows |",
                  "|---|---|---|---|---|---|---|---|"]
        for name in workers:
            res = t[name]
            if "error" in res and "chat" not in res:
                lines.append(f"| {name} | {res['error'].splitlines()[0][:80]} |" + " |" * 6)
                continue
            stop = res.get("stop", {})
            lines.append("| " + " | ".join([
                str(_get(res, "info", "workers")) + (" + Redis" if _get(res, "info", "redis") else ""),
                _fmt(_rps(res, "chat", "plain", "c32")),
                _fmt(_rps(res, "chat", "stream", "c32")),
                _fmt(_get(res, "chat", "plain", "saturation", "c32", "cpu_ms_per_request"), 3),
                _fmt(_get(res, "rss_mb", "sum"), 1), _fmt(count_errors({k: v for k, v in res.items() if k != "stop"})),
                f"{_fmt(stop.get('call_log_rows'))} / {_fmt(stop.get('upstream_calls'))}",
                _fmt(stop.get("lost_call_log_rows")),
            ]) + " |")

    redis_pairs = [(name[: -len("-redis")], name) for name in workers
                   if name.endswith("-redis") and name[: -len("-redis")] in t]
    if redis_pairs:
        lines += ["", "## Shared state through Redis (issue 15: within 10 % of the same workers without Redis)", "",
                  "| workers | req/s c32 without / with Redis | with / without | stream c32 without / with | met |",
                  "|---|---|---|---|---|"]
        for plain_name, redis_name in redis_pairs:
            plain, shared = t[plain_name], t[redis_name]
            a, b = _rps(plain, "chat", "plain", "c32"), _rps(shared, "chat", "plain", "c32")
            ratio = b / a if a and b else None
            lines.append("| " + " | ".join([
                str(_get(plain, "info", "workers")), f"{_fmt(a)} / {_fmt(b)}",
                f"{ratio:.0%}" if ratio else "–",
                f"{_fmt(_rps(plain, 'chat', 'stream', 'c32'))} / {_fmt(_rps(shared, 'chat', 'stream', 'c32'))}",
                ("yes" if ratio >= 0.9 else "**no**") if ratio else "–",
            ]) + " |")

    first = t.get(workers[0]) if workers else None
    conv = [(n, label, base) for n, label, base in (
        ("messages", "messages client → chat upstream", "chat"),
        ("chat_to_messages", "chat client → messages upstream", "messages"),
    ) if first and n in first]
    if conv:
        lines += ["", "## modelgate conversion paths (one worker)", "",
                  "Added latency against the direct call of the upstream format that path reaches.", "",
                  "| path | req/s c32 | stream c32 | added p50 / p99 @200/s | stream TTFB added @200/s | errors |",
                  "|---|---|---|---|---|---|"]
        for n, label, base in conv:
            res = first
            lines.append("| " + " | ".join([
                label, _fmt(_rps(res, n, "plain", "c32")), _fmt(_rps(res, n, "stream", "c32")),
                _pair(added(res, direct, n, base, "plain", "r200", "latency_ms", "p50"),
                      added(res, direct, n, base, "plain", "r200", "latency_ms", "p99")),
                _pair(added(res, direct, n, base, "stream", "r200", "first_byte_ms", "p50"),
                      added(res, direct, n, base, "stream", "r200", "first_byte_ms", "p99")),
                _fmt(count_errors(res.get(n))),
            ]) + " |")
    if first and first.get("info", {}).get("conversion_problem"):
        lines += ["", f"Conversion path not measured: {first['info']['conversion_problem']}"]

    checks = goal_checks(results)
    if checks:
        lines += ["", "## Targets (issue 6, modelgate with one worker)", "",
                  "| goal | measured | met |", "|---|---|---|"]
        for goal, measured, ok in checks:
            lines.append(f"| {goal} | {measured} | {'yes' if ok else ('**no**' if ok is False else '–')} |")

    prof = _get(first, "profile") if first else None
    if prof and "self" in prof:
        lines += ["", "## Where modelgate spends its time (py-spy, saturation, 32 connections)", "",
                  f"{prof['samples']} samples. Own time = samples where the function itself was running.", "",
                  "| # | function | own % | total % |", "|---|---|---|---|"]
        for i, row in enumerate(prof["self"][:10], 1):
            lines.append(f"| {i} | `{row['function']}` | {row['self_pct']:.1f} | {row['total_pct']:.1f} |")
        if prof.get("modelgate_total"):
            lines += ["", "modelgate's own functions by total time (including what they call):", "",
                      "| function | total % |", "|---|---|"]
            lines += [f"| `{row['function']}` | {row['total_pct']:.1f} |" for row in prof["modelgate_total"][:10]]
    lines.append("")
    return "\n".join(lines)


def goal_checks(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    t = results["targets"]
    mg = next((v for k, v in t.items() if k.startswith("modelgate-") and _get(v, "info", "workers") == 1), None)
    if not mg or "chat" not in mg:
        return []
    bare, lite, direct = t.get("bare"), t.get("litellm"), t.get("direct")
    out: list[tuple[str, str, bool | None]] = []

    def ratio(goal: str, mine: float | None, theirs: float | None, need: float, times: bool = False) -> None:
        if mine is None or not theirs:
            out.append((goal, "not measured", None))
            return
        r = mine / theirs
        shown = f"{r:.1f}× ({mine:,.0f} vs {theirs:,.0f} req/s)" if times else \
            f"{r * 100:.0f} % ({mine:,.0f} vs {theirs:,.0f} req/s)"
        out.append((goal, shown, r >= need))

    for conns in ("c8", "c32"):
        ratio(f"non-streamed ≥ 50 % of bare ({conns})", _rps(mg, "chat", "plain", conns),
              _rps(bare, "chat", "plain", conns), GOALS["plain_vs_bare"])
    for conns in ("c8", "c32"):
        ratio(f"non-streamed ≥ 30× LiteLLM ({conns})", _rps(mg, "chat", "plain", conns),
              _rps(lite, "chat", "plain", conns), GOALS["plain_vs_litellm"], times=True)
    for conns in ("c8", "c32"):
        ratio(f"streamed ≥ 60 % of bare ({conns})", _rps(mg, "chat", "stream", conns),
              _rps(bare, "chat", "stream", conns), GOALS["stream_vs_bare"])
    cpu = _get(mg, "chat", "plain", "saturation", "c32", "cpu_ms_per_request")
    out.append(("CPU ≤ 0.25 ms/request", "not measured" if cpu is None else f"{cpu:.3f} ms",
                None if cpu is None else cpu <= GOALS["cpu_ms"]))
    for pct, key in (("p50", "p50_added_200"), ("p99", "p99_added_200")):
        a = added(mg, direct, "chat", "chat", "plain", "r200", "latency_ms", pct)
        out.append((f"added latency @200/s {pct} ≤ {GOALS[key]} ms", "not measured" if a is None else f"{a:+.2f} ms",
                    None if a is None else a <= GOALS[key]))
    rss = _get(mg, "rss_mb", "sum")
    out.append(("peak RSS ≤ 100 MB", "not measured" if rss is None else f"{rss:.1f} MB",
                None if rss is None else rss <= GOALS["rss_mb"]))
    lost = [(_get(v, "stop", "lost_call_log_rows"), k) for k, v in t.items() if k.startswith("modelgate-")]
    measured = [x for x, _ in lost if x is not None]
    out.append(("0 lost call-log rows (all worker counts)", ", ".join(f"{k}: {x}" for x, k in lost),
                None if not measured else sum(measured) == 0))
    errs = count_errors({k: v for k, v in mg.items() if k != "stop"})
    out.append(("0 errors", str(errs), errs == 0))
    return out


_LINE = re.compile(r"^(.*) (\d+)$")


def collapsed_summary(text: str, top: int = 15) -> dict[str, Any]:
    """Own and total time per function from py-spy's raw (collapsed stack) output."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        stack, count = match.group(1), int(match.group(2))
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    rows = [{"function": f, "self_pct": 100.0 * n / samples, "total_pct": 100.0 * total[f] / samples}
            for f, n in own.most_common(top)] if samples else []
    cumulative = [{"function": f, "total_pct": 100.0 * n / samples} for f, n in total.most_common(top)] \
        if samples else []
    # The project's own functions by total time: where to look first in modelgate's code.
    ours = [{"function": f, "total_pct": 100.0 * n / samples} for f, n in total.most_common()
            if "(modelgate/" in f and not f.startswith(("main (", "<module> (", "run ("))][:top] if samples else []
    return {"samples": samples, "self": rows, "cumulative": cumulative, "modelgate_total": ours}
