"""``python -m bench --preset smoke|quick|full [--no-docs] [--output PATH] [--cache DIR]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.presets import PRESETS
from bench.report import markdown, write_docs, write_json
from bench.runner import execute

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "benchmarks.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument(
        "--output", type=Path, help="the JSON file (default bench/results/latest-PRESET.json)"
    )
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument(
        "--cache",
        type=Path,
        help="keep loaded stores here and reuse them while the service's source is unchanged",
    )
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    result, figures = execute(preset, args.cache)
    output = args.output or HERE / "results" / f"latest-{preset.name}.json"
    write_json(output, result)
    section = markdown(result, figures)
    if not args.no_docs:
        write_docs(DOCS, preset.name, section)
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
