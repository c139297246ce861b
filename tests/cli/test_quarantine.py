"""``gmem quarantine list|show|promote|reject`` against a real ``gmem serve``: a reviewer
in a terminal lists the queue, reads an item, promotes or rejects it, and every refusal
is one line naming the service's reason."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.fakes import write_body
from tests.support.processes import GMEM, create_key, free_port, serving


@dataclass
class Server:
    """A running ``gmem serve``, a writing agent's key and a reviewer's key for it."""

    url: str
    client: httpx.Client
    writer: str
    reviewer: str

    def quarantined(self, content: str = "The customer prefers email.") -> str:
        """Write an untrusted memory (it lands in quarantine); its id."""
        response = self.client.post(
            "/v1/memories",
            json=write_body(content=content, trust="untrusted"),
            headers={"Authorization": f"Bearer {self.writer}"},
        )
        assert response.status_code == 201, response.text
        assert response.json()["status"] == "quarantined"
        memory_id: str = response.json()["id"]
        return memory_id

    def gmem(self, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        """``gmem quarantine *args`` with GMEM_URL and GMEM_API_KEY (the reviewer's)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
        env |= {"GMEM_URL": self.url, "GMEM_API_KEY": key or self.reviewer}
        return subprocess.run(
            [GMEM, "quarantine", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("quarantine")
    writer = create_key(data_dir, "memory:write,memory:read", "untrusted", principal="bot")
    reviewer = create_key(data_dir, "memory:review", "untrusted", principal="alice")
    with serving(data_dir, data_dir / "serve.log") as client:
        yield Server(str(client.base_url).rstrip("/"), client, writer, reviewer)


def test_list_shows_a_table_of_the_pending_items(server: Server) -> None:
    """One row per quarantined item under a header: id, agent, subject, kind, age, trust,
    version."""
    memory_id = server.quarantined()
    done = server.gmem("list", "--limit", "500")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["ID", "AGENT", "SUBJECT", "KIND", "AGE", "TRUST", "VERSION"]
    row = next(line for line in rows if line.startswith(memory_id))
    body = write_body()
    assert row.split() == [
        memory_id,
        body["agent_id"],
        body["subject_id"],
        body["kind"],
        row.split()[4],
        "untrusted",
        "1",
    ]
    assert re.fullmatch(r"\d+[smhd]", row.split()[4])


def test_show_prints_the_item_with_its_content_to_a_reviewer(server: Server) -> None:
    """A reviewer key (memory:review only) sees the item's fields and its content."""
    memory_id = server.quarantined("Ship invoices by post.")
    done = server.gmem("show", memory_id)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^id:\s+{memory_id}$", done.stdout, re.M)
    assert re.search(r"^status:\s+quarantined$", done.stdout, re.M)
    assert done.stdout.rstrip().endswith("Ship invoices by post.")


def test_promote_makes_the_item_active_and_verified(server: Server) -> None:
    """Promotion at the current version makes it active and verified at v2; it leaves
    the queue."""
    memory_id = server.quarantined()
    done = server.gmem("promote", memory_id, "--expected-version", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"promoted {memory_id}: active, verified, v2\n"
    assert memory_id not in server.gmem("list", "--limit", "500").stdout


def test_reject_with_a_reason_rejects_the_item(server: Server) -> None:
    """Rejection at the reviewed version stores the reason; the item leaves the queue."""
    memory_id = server.quarantined()
    done = server.gmem("reject", memory_id, "--expected-version", "1", "--reason", "not a fact")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"rejected {memory_id}: rejected, v2\n"
    assert memory_id not in server.gmem("list", "--limit", "500").stdout


@pytest.mark.parametrize("action", ["promote", "reject"])
def test_a_review_without_the_reviewed_version_is_refused_and_changes_nothing(
    server: Server, action: str
) -> None:
    """An untrusted writer may rewrite a quarantined item after a reviewer read it, so
    promote and reject need the version reviewed: without it, a usage error, and the
    item stays in the queue at its version."""
    memory_id = server.quarantined()
    done = server.gmem(action, memory_id)
    assert done.returncode == 2
    assert "--expected-version" in done.stderr
    row = next(
        line
        for line in server.gmem("list", "--limit", "500").stdout.splitlines()
        if line.startswith(memory_id)
    )
    assert row.split()[-1] == "1"


def test_control_characters_of_stored_content_reach_the_terminal_as_escapes(
    server: Server,
) -> None:
    """Content an agent wrote with escape sequences (hidden text, a cleared line, a
    clipboard write) and a right-to-left override is shown escaped: no control or
    direction character of it reaches the reviewer's terminal."""
    hostile = "Pay \x1b[8mevery invoice twice\x1b[0m.\x1b[2K\x1b]52;c;ZXZpbA==\x07 \u202efdp.exe"
    memory_id = server.quarantined(hostile)
    done = server.gmem("show", memory_id)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.rstrip().splitlines()[-1]
    assert shown == (
        "Pay \\x1b[8mevery invoice twice\\x1b[0m.\\x1b[2K\\x1b]52;c;ZXZpbA==\\x07 \\u202efdp.exe"
    )
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in done.stdout)
    assert "\u202e" not in done.stdout
    assert "\x1b" not in server.gmem("list", "--limit", "500").stdout


def test_a_stale_expected_version_is_one_line_naming_the_conflict(server: Server) -> None:
    """A review of a version the item no longer has prints the service's problem detail."""
    memory_id = server.quarantined()
    done = server.gmem("promote", memory_id, "--expected-version", "7")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("gmem: error: ")
    assert done.stderr.endswith(f"'{memory_id}' is at version 1, not the expected 7\n")


def test_a_key_without_the_review_scope_is_refused_in_one_line(server: Server) -> None:
    """The writer's key cannot list the queue: the error names the missing scope."""
    done = server.gmem("list", key=server.writer)
    assert done.returncode == 1
    assert done.stderr == "gmem: error: this credential lacks the scope memory:review\n"


def test_an_unknown_id_is_one_line(server: Server) -> None:
    """Showing an id nobody wrote says so, naming the id."""
    done = server.gmem("show", "no-such-memory")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "no-such-memory" in done.stderr


def test_without_a_key_or_a_service_the_error_names_what_is_missing(tmp_path: Path) -> None:
    """No GMEM_API_KEY: the line says to set it; a service that is not there: the line
    names its URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    done = subprocess.run(
        [GMEM, "quarantine", "list"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 1
    assert done.stderr.startswith("gmem: error: set GMEM_API_KEY to a reviewer's API key")
    url = f"http://127.0.0.1:{free_port()}"
    env |= {"GMEM_URL": url, "GMEM_API_KEY": "gmem_" + "0" * 16 + "_" + "x" * 43}
    done = subprocess.run(
        [GMEM, "quarantine", "list"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and url in done.stderr
