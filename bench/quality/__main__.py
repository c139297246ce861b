"""``python -m bench.quality [DATA_DIR] [--json PATH] [--markdown PATH] [--docs]
[--skip-product] [--semantic auto|on|off] [--cost]``.

DATA_DIR defaults to ``../shared/data/locomo-dev`` beside the project root. The tables are
printed (and written to ``--markdown``, and with ``--docs`` into docs/benchmarks.md between
its quality markers); the JSON result goes to ``--json`` (default
``bench/results/latest-quality.json``). ``--semantic auto`` (the default) adds the semantic
systems where the semantic extra is installed; ``--cost`` measures what semantic recall
costs a search at 1k and 10k items (``bench/quality/cost.py``).
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.quality import cost
from bench.quality.locomo import load
from bench.quality.report import markdown, write_json
from bench.quality.run import SEMANTIC_SYSTEMS, SYSTEMS, evaluate
from bench.report import write_docs
from governed_memory.semantic import missing

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
DEFAULT_JSON = ROOT / "bench" / "results" / "latest-quality.json"
DOCS = ROOT / "docs" / "benchmarks.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="LoCoMo folder")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="the JSON result")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--docs", action="store_true", help="write them into docs/benchmarks.md")
    parser.add_argument(
        "--skip-product", action="store_true", help="leave out the product (seconds, not a minute)"
    )
    parser.add_argument(
        "--semantic",
        choices=("auto", "on", "off"),
        default="auto",
        help="the semantic systems (they need the semantic extra): auto adds them if installed",
    )
    parser.add_argument(
        "--cost", action="store_true", help="also what semantic recall costs a search"
    )
    args = parser.parse_args(argv)
    chosen = [s for s in SYSTEMS if not (args.skip_product and s.name == "product")]
    absent = missing()
    if args.semantic == "on" and absent is not None:
        parser.error(f"--semantic on: the semantic extra is not installed ({absent} is missing)")
    if args.semantic == "on" or (args.semantic == "auto" and absent is None):
        chosen += [s for s in SEMANTIC_SYSTEMS if not (args.skip_product and "product" in s.name)]
    start = time.perf_counter()
    result = evaluate(args.data, chosen)
    if args.cost:
        questions = [q.text for c in load(args.data) for q in c.questions]
        result["cost"] = cost.measure(questions)
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_json(args.json, result)
    section = markdown(result)
    if args.markdown:
        args.markdown.write_text(section, encoding="utf-8")
    if args.docs:
        write_docs(DOCS, "quality", section)
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
