"""The SQLite file of one store, by table (``dbstat``), loaded by the given source tree.

    PYTHONPATH=SRC python -m bench.filesize DATA_DIR ITEMS [--peer]

Loads the benchmark's scoped workload's first ``ITEMS`` items into ``DATA_DIR`` through
the service (``bench.loading.load``, one process), then prints the file's MiB and the MiB
of each table and index; with ``--peer`` also LangGraph ``SqliteStore``'s file holding the
same items. Run it once with the old tree and once with the new one on ``PYTHONPATH``
to compare storage forms (the size of a store does not depend on the machine's load).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from bench import loading, peer
from bench.workload import Workload
from governed_memory.store.sqlite.store import DATABASE_FILE


def main(argv: list[str]) -> None:
    data_dir, items = Path(argv[0]), int(argv[1])
    workload = Workload()
    report = loading.load(data_dir, workload, items, 1)
    path = data_dir / DATABASE_FILE
    result = {
        "items": items,
        "load_seconds": round(report.seconds, 1),
        "file_mib": round(peer.file_mib(path), 2),
        "tables_mib": peer.space(path),
    }
    if "--peer" in argv and peer.missing() is None:
        with tempfile.TemporaryDirectory() as scratch:
            theirs = Path(scratch) / "peer.db"
            with peer.sqlite_store(theirs) as store:
                peer.load(store, workload, 0, items)
            result["peer_file_mib"] = round(peer.file_mib(theirs), 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
