"""Settings come from GMEM_* variables, a file and flags; a bad one stops start-up in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_memory import open_store
from governed_memory.config import load_settings
from governed_memory.core.policy import DAY
from governed_memory.core.values import Kind, Status
from governed_memory.errors import ConfigError, FieldError, ValidationError
from tests.cli.conftest import Gmem


def test_defaults_are_those_of_the_spec() -> None:
    """Without any variable the settings are SPEC §9's defaults."""
    settings = load_settings()
    assert settings.data_dir == Path("./gmem-data")
    assert settings.database_url is None
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert (settings.rate_limit_requests, settings.rate_limit_window_seconds) == (600, 60)
    assert settings.max_body_bytes == 65_536
    assert settings.expiry_interval_seconds == 60
    assert settings.sqlite_synchronous == "FULL"
    assert settings.metrics_enabled is True
    policy = settings.ttl_policy().kinds
    assert (policy[Kind.WORKING_NOTE].default_seconds, policy[Kind.WORKING_NOTE].max_seconds) == (
        DAY,
        7 * DAY,
    )
    assert policy[Kind.FACT].max_seconds == 730 * DAY


def test_variables_override_defaults_and_flags_override_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GMEM_PORT sets the port; a value given by a flag wins over the variable."""
    monkeypatch.setenv("GMEM_PORT", "9000")
    monkeypatch.setenv("GMEM_SQLITE_SYNCHRONOUS", "NORMAL")
    assert load_settings().port == 9000
    assert load_settings().sqlite_synchronous == "NORMAL"
    assert load_settings(port="9100").port == 9100


def test_ttl_variables_build_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """GMEM_TTL_<KIND>_DEFAULT_SECONDS and _MAX_SECONDS set that kind's policy."""
    monkeypatch.setenv("GMEM_TTL_WORKING_NOTE_DEFAULT_SECONDS", "600")
    monkeypatch.setenv("GMEM_TTL_WORKING_NOTE_MAX_SECONDS", "3600")
    policy = load_settings().ttl_policy().kinds[Kind.WORKING_NOTE]
    assert (policy.default_seconds, policy.max_seconds) == (600, 3600)


def test_retention_variables_build_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """GMEM_RETENTION_<STATUS>_SECONDS sets a status's window for every kind, and
    GMEM_RETENTION_<KIND>_<STATUS>_SECONDS overrides it for one kind; unset, the defaults:
    30 days after expiry or rejection, 365 after a correction."""
    windows = load_settings().retention_policy().windows
    assert windows[(Kind.FACT, Status.EXPIRED)] == 30 * DAY
    assert windows[(Kind.SKILL, Status.REJECTED)] == 30 * DAY
    assert windows[(Kind.PREFERENCE, Status.SUPERSEDED)] == 365 * DAY
    monkeypatch.setenv("GMEM_RETENTION_EXPIRED_SECONDS", "3600")
    monkeypatch.setenv("GMEM_RETENTION_WORKING_NOTE_EXPIRED_SECONDS", "0")
    windows = load_settings().retention_policy().windows
    assert windows[(Kind.FACT, Status.EXPIRED)] == 3600
    assert windows[(Kind.WORKING_NOTE, Status.EXPIRED)] == 0
    assert windows[(Kind.WORKING_NOTE, Status.REJECTED)] == 30 * DAY


def test_a_settings_file_is_read_under_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KEY=value file sets values; the environment still wins over it."""
    config = tmp_path / "gmem.env"
    config.write_text("GMEM_PORT=9200\nGMEM_MAX_BODY_BYTES=1000\n")
    monkeypatch.setenv("GMEM_MAX_BODY_BYTES", "2000")
    settings = load_settings(config_file=config)
    assert (settings.port, settings.max_body_bytes) == (9200, 2000)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GMEM_PORT", "0"),
        ("GMEM_PORT", "eighty"),
        ("GMEM_RATE_LIMIT_REQUESTS", "0"),
        ("GMEM_RATE_LIMIT_WINDOW_SECONDS", "-5"),
        ("GMEM_MAX_BODY_BYTES", "0"),
        ("GMEM_EXPIRY_INTERVAL_SECONDS", "0"),
        ("GMEM_SQLITE_SYNCHRONOUS", "OFF"),
        ("GMEM_METRICS_ENABLED", "perhaps"),
        ("GMEM_LOG_LEVEL", "LOUD"),
        ("GMEM_TTL_FACT_DEFAULT_SECONDS", "0"),
        ("GMEM_TTL_FACT_MAX_SECONDS", "60"),
        ("GMEM_RETENTION_EXPIRED_SECONDS", "-1"),
        ("GMEM_RETENTION_SUPERSEDED_SECONDS", "a year"),
        ("GMEM_RETENTION_FACT_REJECTED_SECONDS", "-86400"),
        ("GMEM_RETENTION_SKILL_EXPIRED_SECONDS", str(101 * 365 * DAY)),
        ("GMEM_MASTER_KEY", "bm90LWEta2V5"),
        ("GMEM_DATABASE_URL", "mysql://db/gmem"),
        ("GMEM_SEARCH_LANGUAGE", "klingon"),
        ("GMEM_SEARCH_LANGUAGES", "acme=german"),
        ("GMEM_SEARCH_LANGUAGES", "acme:klingon"),
        ("GMEM_SEARCH_LANGUAGES", "Not A Tenant:german"),
        ("GMEM_SEARCH_LANGUAGES", "acme:german,acme:french"),
        ("GMEM_SEMANTIC", "maybe"),
    ],
)
def test_an_invalid_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """Each invalid value stops loading with one line that names the variable, not the value."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    message = raised.value.detail
    assert message.startswith(f"{variable}:")
    assert "\n" not in message
    if variable == "GMEM_MASTER_KEY":
        assert value not in message


def test_serve_with_an_invalid_setting_exits_with_one_line(
    gmem: Gmem, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``gmem serve`` refuses to start on a bad setting: status 1, one line naming it."""
    monkeypatch.setenv("GMEM_RATE_LIMIT_REQUESTS", "none")
    run = gmem("serve", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert run.err.count("\n") == 1
    assert "GMEM_RATE_LIMIT_REQUESTS" in run.err


def test_a_bad_flag_value_names_its_setting(gmem: Gmem, tmp_path: Path) -> None:
    """A flag mirrors its variable, and its error names the variable."""
    run = gmem("serve", "--data-dir", str(tmp_path), "--port", "70000")
    assert run.status == 1
    assert run.err.startswith("gmem: error: GMEM_PORT:")


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("mysql://db/gmem", "must start with postgresql://, postgres:// or sqlite:///"),
        ("sqlite:///", "sqlite:/// needs a file path"),
    ],
)
def test_settings_and_the_library_refuse_a_database_url_by_one_rule(url: str, rule: str) -> None:
    """GMEM_DATABASE_URL at start-up and open_store(database_url=…) give the same reason."""
    with pytest.raises(ConfigError) as at_start:
        load_settings(database_url=url)
    assert at_start.value.detail == f"GMEM_DATABASE_URL: {rule}"
    with pytest.raises(ValidationError) as in_library:
        open_store(database_url=url)
    assert in_library.value.errors == (FieldError("database_url", rule),)
