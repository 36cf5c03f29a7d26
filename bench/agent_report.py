"""Tables of the agent benchmark (bench/agent.py): figures per target and the issue-14 goals."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import orjson

from bench.agent_cases import AGENT_CASES

GOALS = {
    "agent_pass_cpu": 1.3, "agent_conv_cpu": 2.0, "small_rps": 0.85, "small_cpu": 1.2,
    "stream_conv_cpu": 1.15, "ttfb_added_ms": 30.0, "scaling": 0.90, "rss_mb": 100.0,
}
PEERS = ("tensorzero", "portkey", "litellm")
# Which bare-proxy case each case is compared with: the same client body through the floor.
REFERENCE = {
    **{case.name: case.bare for case in AGENT_CASES},
    "tensorzero": "bare chat", "portkey": "bare chat", "litellm": "bare chat",
    "modelgate": "bare", "modelgate stream": "bare stream",
}


def write(results: dict[str, Any], out_dir: Path, quick: bool) -> tuple[Path, Path]:
    """agent-<date>T<HHMM>-<cores>core.json and agent-latest-<cores>core.md: a run never overwrites
    another one's figures, nor the latest table of a machine of another size."""
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = f"-{results['machine']['cores']}core" + ("-quick" if quick else "")
    stamp = results["date"][:16].replace(":", "")  # 2026-11-24T0111
    json_path = out_dir / f"agent-{stamp}{suffix}.json"
    json_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    md_path = out_dir / f"agent-latest{suffix}.md"
    md_path.write_text(markdown(results))
    return json_path, md_path


def _stats(values: list[Any]) -> dict[str, float] | None:
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _fmt(s: dict[str, float] | None, digits: int = 2, unit: str = "") -> str:
    if not s:
        return "–"
    f = f"{{:,.{digits}f}}"
    if s["min"] == s["max"]:
        return f.format(s["median"]) + unit
    return f"{f.format(s['median'])}{unit} ({f.format(s['min'])}–{f.format(s['max'])})"


def ratios(runs: dict[str, list[dict]], label: str, ref: str, field: str) -> dict[str, float] | None:
    """Per-round ratio of a case's figure to its reference's in the same round."""
    mine, theirs = runs.get(label) or [], runs.get(ref) or []
    return _stats([a.get(field) / b.get(field) for a, b in zip(mine, theirs)
                   if a.get(field) and b.get(field)])


def errors_of(runs: dict[str, list[dict]], peers: bool = True) -> int:
    """`peers`: count the peers' runs too (their errors are theirs, shown in their rows, not the goal's)."""
    return sum((r.get("non_2xx") or 0) + (r.get("socket_errors") or 0) + (1 if r.get("error") else 0)
               for label, rs in runs.items() if peers or label not in PEERS for r in rs)


def request_table(runs: dict[str, list[dict]], small: bool = False) -> list[str]:
    lines = ["| case | req/s | CPU ms/req | CPU vs bare | req/s vs bare | errors |", "|---|---|---|---|---|---|"]
    for label, rs in runs.items():
        ref = ("bare" if small and label in PEERS else REFERENCE.get(label))
        lines.append(
            f"| {label} | {_fmt(_stats([r.get('rps') for r in rs]), 0)} "
            f"| {_fmt(_stats([r.get('cpu_ms_per_request') for r in rs]), 3)} "
            f"| {_fmt(ratios(runs, label, ref, 'cpu_ms_per_request'), 2, '×') if ref else '–'} "
            f"| {_fmt(ratios(runs, label, ref, 'rps'), 2, '×') if ref else '–'} "
            f"| {errors_of({label: rs})} |")
    return lines


def stream_added(runs: dict[str, list[dict]], label: str) -> dict[str, float] | None:
    direct = runs.get("direct chat") or []
    return _stats([(a.get("first_byte_ms") or {}).get("p50", 0) - (b.get("first_byte_ms") or {}).get("p50", 0)
                   for a, b in zip(runs.get(label) or [], direct)
                   if (a.get("first_byte_ms") or {}).get("p50") is not None
                   and (b.get("first_byte_ms") or {}).get("p50") is not None])


def stream_table(runs: dict[str, list[dict]]) -> list[str]:
    lines = ["| case | streams done | CPU µs/chunk | TTFB p50 ms | TTFB p50 added ms | errors |",
             "|---|---|---|---|---|---|"]
    for label, rs in runs.items():
        lines.append(
            f"| {label} | {_fmt(_stats([r.get('completed') for r in rs]), 0)} "
            f"| {_fmt(_stats([r.get('cpu_us_per_chunk') for r in rs]), 1)} "
            f"| {_fmt(_stats([(r.get('first_byte_ms') or {}).get('p50') for r in rs]), 1)} "
            f"| {'–' if label == 'direct chat' else _fmt(stream_added(runs, label), 1)} "
            f"| {errors_of({label: rs})} |")
    return lines


def _cpu_per_chunk_ratio(runs: dict[str, list[dict]], label: str, ref: str) -> dict[str, float] | None:
    return ratios(runs, label, ref, "cpu_us_per_chunk")


def goals(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def row(name: str, s: dict[str, float] | None, limit: float, le: bool, fmt: str = "{:.2f}×") -> None:
        if not s:
            rows.append((name, "not measured", "–"))
            return
        value = s["median"]
        met = value <= limit if le else value >= limit
        spread = f" ({fmt.format(s['min'])}–{fmt.format(s['max'])})" if s["min"] != s["max"] else ""
        rows.append((name, fmt.format(value) + spread, "yes" if met else f"no (by {abs(value - limit):.2f})"))

    a = results.get("agent150") or {}
    row("150 KB agent, pass-through CPU/req ≤ 1.3× bare (chat)", ratios(a, "modelgate pass-through chat",
        "bare chat", "cpu_ms_per_request"), GOALS["agent_pass_cpu"], True)
    row("150 KB agent, pass-through CPU/req ≤ 1.3× bare (messages)", ratios(
        a, "modelgate pass-through messages", "bare messages", "cpu_ms_per_request"), GOALS["agent_pass_cpu"], True)
    row("150 KB agent, pass-through CPU/req ≤ 1.3× bare (Responses)", ratios(
        a, "modelgate pass-through responses", "bare responses", "cpu_ms_per_request"), GOALS["agent_pass_cpu"],
        True)
    row("150 KB agent, conversion messages→chat CPU/req ≤ 2× bare", ratios(
        a, "modelgate messages→chat", "bare messages", "cpu_ms_per_request"), GOALS["agent_conv_cpu"], True)
    row("150 KB agent, conversion chat→messages CPU/req ≤ 2× bare", ratios(
        a, "modelgate chat→messages", "bare chat", "cpu_ms_per_request"), GOALS["agent_conv_cpu"], True)
    row("150 KB agent, conversion responses→chat CPU/req ≤ 2× bare", ratios(
        a, "modelgate responses→chat", "bare chat", "cpu_ms_per_request"), GOALS["agent_conv_cpu"], True)
    renamed = ratios(a, "modelgate pass-through chat, renamed model", "modelgate pass-through chat",
                     "cpu_ms_per_request")
    if renamed:
        rows.append(("150 KB agent, pass-through with a renamed model: CPU/req vs the same model id",
                     _fmt(renamed, 2, "×"), "(cost of a model served under another upstream id)"))
    s = results.get("small") or {}
    row("small requests: throughput ≥ 0.85× bare", ratios(s, "modelgate", "bare", "rps"), GOALS["small_rps"], False)
    row("small streamed requests: throughput ≥ 0.85× bare", ratios(s, "modelgate stream", "bare stream", "rps"),
        GOALS["small_rps"], False)
    row("small requests: CPU/req ≤ 1.2× bare", ratios(s, "modelgate", "bare", "cpu_ms_per_request"),
        GOALS["small_cpu"], True)
    row("small streamed requests: CPU/req ≤ 1.2× bare", ratios(s, "modelgate stream", "bare stream",
        "cpu_ms_per_request"), GOALS["small_cpu"], True)
    st = results.get("streams") or {}
    x20 = st.get("x20") or {}
    for conv in ("modelgate messages→chat", "modelgate chat→messages"):
        ref = "modelgate pass-through chat" if conv.endswith("chat") else "modelgate pass-through messages"
        row(f"long streams x20: {conv.split(' ', 1)[1]} CPU/chunk ≤ 1.15× pass-through",
            _cpu_per_chunk_ratio(x20, conv, ref), GOALS["stream_conv_cpu"], True)
    x200 = st.get("x200") or {}
    for conv in ("modelgate messages→chat", "modelgate chat→messages"):
        row(f"200 concurrent converted streams ({conv.split(' ', 1)[1]}): added p50 TTFB ≤ 30 ms",
            stream_added(x200, conv), GOALS["ttfb_added_ms"], True, "{:.1f} ms")
    w = results.get("workers") or {}
    for name, res in w.items():
        if name != "w1" and isinstance(res, dict) and "scaling_per_worker" in res:
            row(f"{name[1:]} workers: throughput per worker ≥ 90 % of one worker's",
                {"median": res["scaling_per_worker"], "min": res["scaling_per_worker"],
                 "max": res["scaling_per_worker"]}, GOALS["scaling"], False, "{:.0%}")
            even = res.get("min_over_max_worker_cpu")
            if even:
                rows.append((f"{name[1:]} workers: least / most busy worker's CPU", f"{even['median']:.2f}",
                             "even" if even["median"] >= 0.8 else "uneven"))
    rss = results.get("rss_mb") or {}
    if rss:
        row("peak RSS per worker after the large bodies ≤ 100 MB", {"median": rss["max_process"],
            "min": rss["max_process"], "max": rss["max_process"]}, GOALS["rss_mb"], True, "{:.1f} MB")
    stop = (results.get("stop") or {}).get("modelgate-w1") or {}
    lost = [stop.get("lost_call_log_rows")] + [r.get("stop", {}).get("lost_call_log_rows")
                                              for r in w.values() if isinstance(r, dict)]
    lost = [x for x in lost if x is not None]
    calls = [stop.get("upstream_calls")] + [r.get("stop", {}).get("upstream_calls") for r in w.values()
                                            if isinstance(r, dict)]
    errs = sum(errors_of(results.get(k) or {}, peers=False) for k in ("agent150", "agent80", "small"))
    errs += sum(errors_of(v, peers=False) for v in st.values())
    rows.append(("lost call-log rows, errors (every run)",
                 f"{sum(lost)} of {sum(c for c in calls if c)} calls; {errs} errors",
                 "yes" if not sum(lost) and not errs else "no"))
    return rows


def markdown(results: dict[str, Any]) -> str:
    m, plan = results["machine"], results["plan"]
    lay = plan["layout"]
    lines = [
        f"# Agent-traffic benchmark ({'quick smoke run' if plan['quick'] else 'full run'})",
        "",
        f"- Date: {results['date']}; modelgate commit {m.get('modelgate_commit')}",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Linux {m['kernel']}, "
        f"Python {m['python']}, {m['wrk']}; load average {m.get('loadavg_at_start')} → {m.get('loadavg_at_end')}",
        f"- Command: `{results['command']}` ({results.get('elapsed_s')} s)",
        f"- Pinning: upstream CPU {lay['upstream']}, load generators {lay['load']}, one-worker targets "
        f"(all at once, measured in turn) CPU {lay['target']}, workers {lay['workers']}",
        f"- {plan['rounds']} interleaved rounds; wrk {plan['duration_s']} s × {plan['connections']} connections "
        f"per case; long streams {plan['long_chunks']} chunks {plan['gap_ms']} ms apart, "
        f"{plan['stream_seconds']} s per load. Figures: median (min–max over rounds); ratios are taken within "
        "a round, then the median.",
        "",
        "## Issue 14 goals",
        "",
        "| goal | measured | met |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in goals(results)]
    for key, title in (("agent150", "150 KB agent requests (short answer)"), ("agent80", "80 KB agent requests"),
                       ("small", "Small requests")):
        if results.get(key):
            lines += ["", f"## {title}", ""] + request_table(results[key], small=key == "small")
    for conc, runs in (results.get("streams") or {}).items():
        lines += ["", f"## Long streams, {conc[1:]} concurrent ({plan['long_chunks']} chunks, "
                  f"{plan['gap_ms']} ms apart)", ""] + stream_table(runs)
    w = results.get("workers") or {}
    if w:
        lines += ["", "## Workers (small requests, 64 connections)", "",
                  "| workers | req/s | per worker vs one | least / most busy worker CPU | peak RSS MB (largest) "
                  "| lost rows |", "|---|---|---|---|---|---|"]
        for name, res in w.items():
            if "error" in res and "rps" not in res:
                lines.append(f"| {name[1:]} | {res['error'].splitlines()[0][:80]} | | | | |")
                continue
            lines.append(
                f"| {name[1:]} | {_fmt(res.get('rps'), 0)} | {res.get('scaling_per_worker', '–')} "
                f"| {_fmt(res.get('min_over_max_worker_cpu'), 2)} | {(res.get('rss_mb') or {}).get('max_process')} "
                f"| {(res.get('stop') or {}).get('lost_call_log_rows')} |")
    lines += ["", "## Peers", ""]
    for name, info in (results.get("peers") or {}).items():
        lines.append(f"- {name}: {info}")
    lines += ["", f"Peak RSS of the one-worker modelgate: after start-up {results.get('rss_mb_after_start')}, "
              f"after the request runs {results.get('rss_mb_after_requests')}, at the end {results.get('rss_mb')}."]
    return "\n".join(lines) + "\n"
