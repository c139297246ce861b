"""``gmem keys create|list|revoke``, run as an operator runs them: the installed command in
a child process, against a data directory."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from governed_memory import open_store
from governed_memory.apikeys import create_api_key, split_token, verify
from governed_memory.cli.keys import MAX_TRUST_REQUIRED, PRINCIPAL_REQUIRED
from governed_memory.core.values import Scope, Trust
from governed_memory.store.sqlite import SQLiteStore
from tests.support.processes import GMEM

READER = ("--agents", "*", "--scopes", "memory:read")


@dataclass(frozen=True)
class Done:
    """What one ``gmem`` process printed and how it ended."""

    status: int
    out: str
    err: str


def gmem(data_dir: Path, *args: str) -> Done:
    """Run ``gmem *args --data-dir data_dir`` with no GMEM_* variable of the machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    done = subprocess.run(
        [GMEM, *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def create(data_dir: Path, *args: str) -> dict[str, object]:
    """``gmem keys create --tenant acme --json *args``; the printed object."""
    done = gmem(data_dir, "keys", "create", "--tenant", "acme", "--json", *args)
    assert done.status == 0, done.err
    created: dict[str, object] = json.loads(done.out)
    return created


def listed(data_dir: Path) -> list[dict[str, object]]:
    """``gmem keys list --json``; no keys where no store was ever made."""
    if not (data_dir / "gmem.sqlite3").exists():
        return []
    done = gmem(data_dir, "keys", "list", "--json")
    assert done.status == 0, done.err
    keys: list[dict[str, object]] = json.loads(done.out)
    return keys


def test_a_created_key_belongs_to_its_principal_and_authenticates(tmp_path: Path) -> None:
    """--json prints the key, its principal and grants; the key authenticates as that principal."""
    created = create(
        tmp_path,
        *("--principal", "alice@acme", "--agents", "support-bot,sales-bot"),
        *("--scopes", "memory:write,memory:read", "--max-trust", "trusted"),
    )
    assert created["principal"] == "alice@acme"
    assert (created["agents"], created["scopes"]) == (
        ["sales-bot", "support-bot"],
        ["memory:read", "memory:write"],
    )
    assert (created["max_trust"], created["state"]) == ("trusted", "active")
    assert (created["expires_at"], created["last_used_at"]) == (None, None)
    key_id, secret = split_token(str(created["api_key"]))
    assert key_id == created["key_id"]
    store = open_store(data_dir=tmp_path)
    try:
        who = verify(store.api_key(key_id), secret, datetime.now(UTC))
    finally:
        store.close()
    assert (who.tenant_id, who.principal_id, who.credential) == (
        "acme",
        "alice@acme",
        f"key:{key_id}",
    )
    assert (who.max_trust, who.scopes) == (Trust.TRUSTED, {Scope.MEMORY_WRITE, Scope.MEMORY_READ})


def test_a_key_without_a_principal_is_refused_in_one_clear_line(tmp_path: Path) -> None:
    """Without --principal nothing is created, and one line says why it is needed."""
    done = gmem(tmp_path, "keys", "create", "--tenant", "acme", *READER)
    assert done.status == 1
    assert done.err == f"gmem: error: {PRINCIPAL_REQUIRED}\n"
    assert listed(tmp_path) == []


def test_without_json_the_key_is_shown_once_with_a_warning(tmp_path: Path) -> None:
    """Without --json the key is printed once, with its principal and a warning to store it."""
    done = gmem(tmp_path, "keys", "create", "--tenant", "acme", "--principal", "bob", *READER)
    assert done.status == 0, done.err
    assert done.out.count("gmem_") == 1
    assert "of bob, tenant acme" in done.out
    assert "shown only once" in done.out
    assert listed(tmp_path)[0]["agents"] == "*"


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--scopes", "memory:everything", "scopes"),
        ("--max-trust", "verified", "max_trust"),
        ("--tenant", "Not A Tenant", "tenant_id"),
        ("--agents", "", "agents"),
        ("--principal", "alice smith", "principal"),
        ("--expires-in", "soon", "expires_in"),
        ("--expires-in", "0d", "expires_in"),
        ("--expires-at", "2020-01-01T00:00:00Z", "expires_at"),
        ("--expires-at", "tomorrow", "expires_at"),
    ],
)
def test_bad_grants_are_refused_in_one_line_naming_the_field(
    tmp_path: Path, flag: str, value: str, named: str
) -> None:
    """A bad scope, trust, tenant, agent list, principal or expiry is one line naming it."""
    args = {
        "--tenant": "acme",
        "--principal": "alice",
        "--agents": "*",
        "--scopes": "memory:write",
        "--max-trust": "trusted",
    } | {flag: value}
    done = gmem(tmp_path, "keys", "create", *[x for kv in args.items() for x in kv])
    assert done.status == 1
    assert done.err.count("\n") == 1
    assert done.err.startswith(f"gmem: error: {named}: ")
    assert listed(tmp_path) == []


def test_the_admin_scope_is_refused_with_its_reason(tmp_path: Path) -> None:
    """admin grants nothing, so no new key may carry it: one line says so."""
    done = gmem(
        tmp_path,
        *("keys", "create", "--tenant", "acme", "--principal", "ops", "--agents", "*"),
        *("--scopes", "memory:read,admin"),
    )
    assert done.status == 1
    assert done.err == (
        "gmem: error: scopes: admin grants nothing: keys are managed with gmem keys; leave it out\n"
    )


def test_a_key_that_does_not_write_needs_no_max_trust(tmp_path: Path) -> None:
    """A review-only key is created without --max-trust; a writing key must name one."""
    reviewer = create(tmp_path, "--principal", "rita", "--agents", "*", "--scopes", "memory:review")
    assert (reviewer["scopes"], reviewer["max_trust"]) == (["memory:review"], "untrusted")
    done = gmem(
        tmp_path,
        *("keys", "create", "--tenant", "acme", "--principal", "wes", "--agents", "*"),
        *("--scopes", "memory:write"),
    )
    assert done.status == 1
    assert done.err == f"gmem: error: {MAX_TRUST_REQUIRED}\n"


def test_a_key_may_expire_after_a_duration_or_at_an_instant(tmp_path: Path) -> None:
    """--expires-in 90d and --expires-at set the expiry; giving both is refused."""
    before = datetime.now(UTC)
    in_90_days = create(tmp_path, "--principal", "ci", *READER, "--expires-in", "90d")
    expires = datetime.fromisoformat(str(in_90_days["expires_at"]))
    assert before + timedelta(days=90) <= expires <= datetime.now(UTC) + timedelta(days=90)
    at = create(tmp_path, "--principal", "ci", *READER, "--expires-at", "2999-01-01T00:00:00Z")
    assert at["expires_at"] == "2999-01-01T00:00:00+00:00"
    both = gmem(
        tmp_path,
        *("keys", "create", "--tenant", "acme", "--principal", "ci", *READER),
        *("--expires-in", "1d", "--expires-at", "2999-01-01T00:00:00Z"),
    )
    assert (both.status, both.err) == (
        1,
        "gmem: error: give --expires-in or --expires-at, not both\n",
    )


def test_keys_list_shows_principal_state_dates_and_grants_never_a_secret(tmp_path: Path) -> None:
    """Each line: id, tenant, principal, state, created, expires, last used, grants, name."""
    tokens = []
    for tenant in ("acme", "globex"):
        done = gmem(
            tmp_path,
            *("keys", "create", "--tenant", tenant, "--principal", f"{tenant}-ops", *READER),
            *("--name", f"{tenant}-reader", "--expires-at", "2999-01-01T00:00:00Z", "--json"),
        )
        tokens.append(json.loads(done.out)["api_key"])
    done = gmem(tmp_path, "keys", "list")
    assert done.status == 0
    lines = done.out.splitlines()
    assert len(lines) == 2
    for line, token, tenant in zip(lines, tokens, ("acme", "globex"), strict=True):
        key_id, secret = split_token(token)
        assert line.split()[:4] == [key_id, tenant, f"{tenant}-ops", "active"]
        assert "created=20" in line and "expires=2999-01-01T00:00:00Z" in line
        assert "last_used=-" in line and f"name={tenant}-reader" in line
        assert secret not in done.out
    only = gmem(tmp_path, "keys", "list", "--tenant", "globex")
    assert [line.split()[1] for line in only.out.splitlines()] == ["globex"]


def test_keys_list_shows_last_use_and_expired_keys(tmp_path: Path) -> None:
    """A key's recorded last use is listed; a key past its expiry is listed as expired."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    now = datetime.now(UTC)
    used, _ = create_api_key("acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, now)
    old, _ = create_api_key("acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, now)
    try:
        store.add_api_key(used)
        store.add_api_key(dataclasses.replace(old, expires_at=now - timedelta(seconds=1)))
        store.touch_api_key(used.key_id, now)
    finally:
        store.close()
    keys = {key["key_id"]: key for key in listed(tmp_path)}
    assert keys[used.key_id]["last_used_at"] == now.isoformat()
    assert (keys[used.key_id]["state"], keys[old.key_id]["state"]) == ("active", "expired")
    assert keys[old.key_id]["principal"] == f"key:{old.key_id}"


def test_keys_revoke_help_names_the_key_id_as_it_is(tmp_path: Path) -> None:
    """--help says the key id is the 16 hex characters after gmem_, not "the part after"."""
    done = gmem(tmp_path, "keys", "revoke", "--help")
    assert done.status == 0
    text = " ".join(done.out.split())
    assert "the 16 hex characters after gmem_ in gmem_<key id>_<secret>" in text
    assert "the part after gmem_" not in text


def test_revoking_by_id_or_by_the_whole_key_stops_it_and_never_prints_the_secret(
    tmp_path: Path,
) -> None:
    """A key id or the whole key revokes it; the secret appears in no output."""
    for how in ("id", "whole key"):
        created = create(tmp_path, "--principal", "alice", *READER)
        token = str(created["api_key"])
        _, secret = split_token(token)
        done = gmem(tmp_path, "keys", "revoke", token if how == "whole key" else token[5:21])
        assert done.status == 0, done.err
        assert done.out == f"revoked {created['key_id']} of alice\n"
        assert secret not in done.out + done.err
    assert [key["state"] for key in listed(tmp_path)] == ["revoked", "revoked"]


@pytest.mark.parametrize("mistake", ["drop-last-char", "part-after-gmem", "trailing-junk"], ids=str)
def test_a_wrong_revoke_argument_is_never_echoed(tmp_path: Path, mistake: str) -> None:
    """A mangled key is refused in one line that quotes nothing of it (it holds a secret)."""
    created = create(tmp_path, "--principal", "alice", *READER)
    token = str(created["api_key"])
    argument = {
        "drop-last-char": token[:-1],
        "part-after-gmem": token[5:],
        "trailing-junk": token + "!",
    }[mistake]
    done = gmem(tmp_path, "keys", "revoke", argument)
    assert done.status == 1
    assert done.err == (
        "gmem: error: expected a key id (the 16 hex characters after gmem_) or a whole API key\n"
    )
    assert split_token(token)[1][:8] not in done.err
    assert listed(tmp_path)[0]["state"] == "active"


def test_revoking_an_unknown_id_fails_and_revoking_twice_says_when(tmp_path: Path) -> None:
    """An unknown id is an error line; a second revoke keeps and names the first time."""
    unknown = gmem(tmp_path, "keys", "revoke", "0123456789abcdef")
    assert (unknown.status, unknown.err) == (
        1,
        "gmem: error: no API key with id 0123456789abcdef\n",
    )
    created = create(tmp_path, "--principal", "alice", *READER)
    key_id = str(created["key_id"])
    assert gmem(tmp_path, "keys", "revoke", key_id).status == 0
    first = listed(tmp_path)[0]["revoked_at"]
    again = gmem(tmp_path, "keys", "revoke", key_id)
    assert (again.status, again.out) == (0, f"{key_id} was revoked already, at {first}\n")


def test_keys_list_into_a_pipe_closed_early_ends_quietly(tmp_path: Path) -> None:
    """`gmem keys list | head -1`: no "Broken pipe" line, and the status of SIGPIPE (141)."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    now = datetime.now(UTC)
    try:
        for n in range(1500):  # far more than a pipe buffer holds
            record, _ = create_api_key(
                "acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, now, f"k{n}"
            )
            store.add_api_key(record)
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    process = subprocess.Popen(
        [GMEM, "keys", "list", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # what head does after its line
    status = process.wait(timeout=120)
    with process.stderr:
        err = process.stderr.read()
    assert re.fullmatch(rb"[0-9a-f]{16}", first[:16])
    assert err == b""
    assert status == 141
