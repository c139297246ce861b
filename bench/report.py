"""The outputs of a run: a JSON file of every figure and a Markdown section of the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.figures import MEASURED, Figure

DOCS_INTRO = """# Benchmarks

The figures below are produced by the project's own benchmark (`bench/`) and
written into this file by it; each preset owns the section between its markers, and the
text outside the markers is kept. The machines are shared and noisy, so every figure is
reported beside baselines measured **in the same run**, as ratios.

- `make bench` — quick preset: stores of 10k and 100k items and the 100k-item single
  scope, and a 10k-item PostgreSQL store beside LangGraph's, a few minutes.
- `make bench-full` — full preset: adds 1M items.
- `make bench-smoke` — seconds; proves the harness works (CI), asserts nothing about speed.

Raw results of the last run of each preset: `bench/results/latest-<preset>.json`.
"""


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _value_cell(figure: Figure) -> str:
    if figure.status != MEASURED or figure.value is None:
        reason = f": {figure.note}" if figure.note else ""
        return f"— ({figure.status}{reason})"
    detail = figure.detail
    if figure.unit == "ms" and "p50_ms" in detail:
        return (
            f"p50 {_number(detail['p50_ms'])} · **p95 {_number(detail['p95_ms'])}** · "
            f"p99 {_number(detail['p99_ms'])} ms"
        )
    if figure.unit == "requests/s" and "p99_ms" in detail:
        return (
            f"**{_number(figure.value)}/s** (p50 {_number(detail['p50_ms'])} ms, "
            f"p99 {_number(detail['p99_ms'])} ms)"
        )
    return f"**{_number(figure.value)}** {figure.unit}"


def _ratios_cell(figure: Figure) -> str:
    return "; ".join(f"{ratio:.3g}× {label}" for label, ratio in figure.ratios.items()) or "—"


def _met_cell(figure: Figure) -> str:
    if figure.met is None:
        return "—"
    return "met" if figure.met else "**not met**"


def _peer_table(rows: list[dict[str, Any]]) -> list[str]:
    """Our figures beside LangGraph's stores measured in the same run (bench/peer.py)."""
    if not rows:
        return []
    lines = [
        "",
        "Beside LangGraph's `SqliteStore`/`PostgresStore` in the same run (their search: fetch "
        "the scope, BM25 in Python; see `bench/peer.py`):",
        "",
        "| figure | governed-memory | LangGraph | governed-memory ÷ LangGraph |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['figure']} | {_number(row['ours'])} | {_number(row['langgraph'])} | "
            f"{row['ratio']:.2f}× |"
        )
    return lines


def markdown(result: dict[str, Any], figures: dict[str, Figure]) -> str:
    machine = result["machine"]
    lines = [
        f"## Preset `{result['preset']}` — {result['date']}",
        "",
        f"Command: `{result['command']}` (runs `{result['invocation']}`), "
        f"{result['seconds']:.0f} s in all.",
        "",
        f"Machine: {machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB "
        f"RAM, {machine['system']}; Python {machine['python']}, SQLite {machine['sqlite']}, "
        f"PostgreSQL {machine['postgresql'] or 'not reachable'}; load average at start "
        f"{machine['load_average_at_start']} (the cores are shared with other work).",
        "",
        "| figure | value | target | same-run ratios | bar |",
        "|---|---|---|---|---|",
    ]
    for figure in figures.values():
        if figure.status != MEASURED and not figure.bar:
            continue  # an unmeasured baseline says nothing; bars are always listed
        lines.append(
            f"| {figure.title} | {_value_cell(figure)} | {figure.bar or '—'} | "
            f"{_ratios_cell(figure)} | {_met_cell(figure)} |"
        )
    lines += _peer_table(result.get("langgraph", []))
    lines += ["", "How the stores were loaded (through `MemoryService.write`):", ""]
    for name, load in result["loads"].items():
        reused = (
            f", reused {load['reused_from_cache']:,} from cache"
            if load["reused_from_cache"]
            else ""
        )
        rate = f" at {load['items_per_s']:,.0f} items/s" if load["items_per_s"] else ""
        lines.append(
            f"- {name}: {load['items']:,} items written in {load['seconds']:.1f} s{rate} "
            f"by {load['processes']} process(es), synchronous={load['synchronous']}{reused}"
        )
    notes = [f"- {f.title}: {f.note}" for f in figures.values() if f.note and f.status == MEASURED]
    if notes:
        lines += ["", "Notes:", "", *notes]
    return "\n".join(lines) + "\n"


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    scratch.replace(path)


def write_docs(path: Path, preset: str, section: str) -> None:
    """Replace this preset's section of the docs (or add it), keeping everything else."""
    begin, end = f"<!-- bench:{preset}:begin -->", f"<!-- bench:{preset}:end -->"
    block = f"{begin}\n{section}{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else DOCS_INTRO
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
