"""The outputs of a quality run: a JSON result and a Markdown section for docs/benchmarks.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def markdown(result: dict[str, Any]) -> str:
    """Tables of the run: every system on categories 1–4, category 5, each conversation."""
    systems: dict[str, Any] = result["systems"]
    names = list(systems)
    conversations = result["data"]["conversations"]
    data = result["data"]
    lines = [
        "## Retrieval quality (LoCoMo)",
        "",
        f"`make bench-quality` on {result['date']}, {result['seconds']:.0f} s: "
        f"{data['turns']:,} turns (one memory each), {data['questions']:,} questions "
        f"({data['questions_1_4']} of categories 1–4 with evidence), conversations "
        f"{', '.join(conversations)} of `{data['folder']}`. Every system ranks each "
        "conversation on its own (one scope per conversation); the baselines ran in the "
        "same run.",
        "",
        "| system | recall@5 | recall@10 | recall@20 | hit@10 | cat. 5 recall@10 | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        main = systems[name]["categories_1_4"]
        adversarial = systems[name]["category_5"]
        lines.append(
            f"| {name} | {_cell(main['recall@5'])} | **{_cell(main['recall@10'])}** | "
            f"{_cell(main['recall@20'])} | {_cell(main['hit@10'])} | "
            f"{_cell(adversarial['recall@10'])} | {systems[name]['seconds']:.1f} |"
        )
    lines += [
        "",
        "recall@10 (categories 1–4) per conversation and per category:",
        "",
        "| system | " + " | ".join(conversations) + " | cat. 1 | cat. 2 | cat. 3 | cat. 4 |",
        "|---|" + "---|" * (len(conversations) + 4),
    ]
    for name in names:
        per = systems[name]["by_conversation"]
        cats = systems[name]["by_category"]
        cells = [_cell(per[c]["recall@10"]) for c in conversations]
        cells += [_cell(cats[c]["recall@10"]) if c in cats else "—" for c in "1234"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- **{name}**: {systems[name]['description']}" for name in names]]
    lines += _bars(systems)
    speed = result["analyzer"]
    lines += [
        "",
        f"Analyzing a 100-word text takes {speed['index_terms_us_per_100_words']:.0f} µs for "
        f"the index, {speed['query_terms_us_per_100_words']:.0f} µs as a query; the tokenizer "
        "before the analyzer (case-folded words) took "
        f"{speed['former_terms_us_per_100_words']:.0f} µs.",
    ]
    if "cost" in result:
        lines += _cost(result["cost"])
    evidence = result["evidence"]
    lines += [
        "",
        f"Evidence ids: {evidence['repaired']} entries repaired, {evidence['dropped']} dropped "
        f"(naming no turn), {evidence['questions_without_evidence']} questions without "
        "evidence left out (see `bench/quality/locomo.py`).",
        "",
    ]
    return "\n".join(lines)


def _recall(systems: dict[str, Any], name: str) -> float | None:
    figure = systems.get(name, {}).get("categories_1_4", {}).get("recall@10")
    return None if figure is None else float(figure)


def _bars(systems: dict[str, Any]) -> list[str]:
    """The retrieval-quality bars, read off this run (0.65 is set on held-out conversations)."""
    product, stemmed = _recall(systems, "product"), _recall(systems, "BM25 + stemming")
    semantic = _recall(systems, "product + semantic")
    lines = ["", "The bars, recall@10 on categories 1–4 in this run:", ""]
    if product is not None and stemmed is not None:
        above = "above" if product > stemmed else "**not above**"
        level = "≥ 0.65" if product >= 0.65 else "**below 0.65**"
        lines.append(
            f"- default settings: {product:.3f}, {above} BM25 with stemming ({stemmed:.3f}, "
            f"{product - stemmed:+.3f}), {level} (that bar is set on the held-out "
            "conversations; a development run only shows where it stands)"
        )
    if product is not None and semantic is not None:
        verdict = "met" if semantic >= product + 0.02 else "**not met**"
        lines.append(
            f"- semantic recall ≥ 0.02 above the default: {semantic:.3f} vs {product:.3f} "
            f"({semantic - product:+.3f}): {verdict}"
        )
    return lines if len(lines) > 3 else []


def _cost(cost: dict[str, Any]) -> list[str]:
    """What semantic recall costs a search, by scope size (bench/quality/cost.py)."""
    lines = [
        "",
        f"What semantic recall costs a search (`--cost`{_when(cost)}; {cost['queries']} "
        "searches of 3 "
        "workload words, limit 10, in one scope; the semantic rows with a free 384-dimension "
        "embedder, so they show the store, the decryption of every vector of the scope and "
        "the scoring, not the model):",
        "",
        "| items in the scope | lexical p50 / p95 | semantic p50 / p95 |",
        "|---|---|---|",
    ]
    for size, figures in cost["sizes"].items():
        lexical, semantic = figures["lexical"], figures["semantic"]
        lines.append(
            f"| {int(size):,} | {lexical['p50']:.2f} / {lexical['p95']:.2f} ms | "
            f"{semantic['p50']:.2f} / {semantic['p95']:.2f} ms |"
        )
    embedding = cost.get("query_embedding")
    if embedding is not None:
        lines += [
            "",
            f"Embedding the query with all-MiniLM-L6-v2 on the CPU adds p50 "
            f"{embedding['p50']:.1f} ms, p95 {embedding['p95']:.1f} ms per search.",
        ]
    return lines


def _when(cost: dict[str, Any]) -> str:
    """When the cost was measured, if not with the rest of the run."""
    return f", measured on {cost['date']}" if "date" in cost else ""


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    temporary.replace(path)
