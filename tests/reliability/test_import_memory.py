"""``gmem import`` (and the rebuild it ends with) holds little per item: the fold reads the
log as it goes, content is opened a chunk at a time, and the projection's rows are loaded
a chunk at a time. Peak RSS is measured, never time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from governed_memory import open_service
from tests.support.fakes import body, principal
from tests.support.processes import GMEM, peak_rss_mib

#: What each imported item may add to the peak, at most. Holding the whole log, every
#: item's plaintext and every row of the rebuild cost 4.2 KiB an item here (5 KiB at 60k
#: items); now 2.4 (71 -> 94 MiB; what is left: the fold's state of each item, with its
#: sealed content, and its index entry), 2.85 before the strings and provenances many
#: events repeat were shared as they are decoded.
KIB_PER_ITEM = 3.0


def exported(tmp_path: Path, items: int) -> Path:
    """An export of a store of ``items`` facts of 100 subjects; its master.key beside it."""
    source = tmp_path / f"source-{items}"
    service = open_service(data_dir=source, synchronous="OFF")
    try:
        writer = principal()
        for number in range(items):
            service.write(
                writer,
                body(
                    id=f"m{number}",
                    subject_id=f"customer-{number % 100}",
                    content=f"Fact {number}: prefers email for invoice {number * 7}.",
                ),
            )
    finally:
        service.close()
    dump = tmp_path / f"export-{items}.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    done = subprocess.run(
        [GMEM, "export", "--output", str(dump), "--data-dir", str(source)],
        capture_output=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    shutil.copy(source / "master.key", tmp_path / f"master-{items}.key")
    return dump


def import_peak_mib(tmp_path: Path, items: int) -> float:
    """Peak RSS (MiB) of ``gmem import`` of an export of ``items`` into a fresh store."""
    dump = exported(tmp_path, items)
    target = tmp_path / f"target-{items}"
    target.mkdir()
    shutil.copy(tmp_path / f"master-{items}.key", target / "master.key")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    return peak_rss_mib([GMEM, "import", str(dump), "--data-dir", str(target)], env)


@pytest.mark.slow
def test_the_peak_memory_of_an_import_grows_by_little_per_item(tmp_path: Path) -> None:
    """From 2,000 to 12,000 items, the peak RSS of an import grows by less than
    3 KiB an item."""
    small = import_peak_mib(tmp_path, 2_000)
    large = import_peak_mib(tmp_path, 12_000)
    per_item_kib = (large - small) * 1024 / 10_000
    assert per_item_kib < KIB_PER_ITEM, f"{small:.0f} MiB -> {large:.0f} MiB ({per_item_kib:.2f})"
