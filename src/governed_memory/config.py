"""Typed settings from ``GMEM_*`` environment variables, validated once at start-up (SPEC §9).

Precedence, highest first: values given by the caller (the CLI's flags), the environment,
an optional settings file (``GMEM_CONFIG_FILE`` or ``--config``, ``KEY=value`` lines), the
defaults. An invalid setting raises :class:`ConfigError`, whose one-line message names the
variable and the rule it breaks, never the value (it may be a secret).

What would otherwise be ignored in silence is a warning (the ``governed_memory.config``
logger): a ``GMEM_*`` name in the environment or the file that is no setting (with the
closest valid name), and a line of the file that is not ``KEY=value`` (by file and line
number only: the line may hold a secret). Names starting ``GMEM_TEST_`` belong to the
project's test suite and are left alone.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any, Literal

import pydantic
from dotenv.parser import parse_stream
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from governed_memory.analysis import LANGUAGES
from governed_memory.core import values
from governed_memory.core.model import RETAINED_STATUSES
from governed_memory.core.policy import DEFAULT_RETENTION, DEFAULT_TTLS, RetentionPolicy, TtlPolicy
from governed_memory.core.values import Kind, Status
from governed_memory.crypto import parse_master_key
from governed_memory.errors import ConfigError, CryptoError, ValidationError
from governed_memory.locations import DEFAULT_DATA_DIR, backend_of, is_postgres

PREFIX = "GMEM_"
MAX_TTL_SECONDS = 100 * 365 * 86_400  # a century: beyond it timestamps overflow
CONFIG_FILE_VARIABLE = "GMEM_CONFIG_FILE"
#: GMEM_* variables read elsewhere than :class:`Settings`: the settings file's own name,
#: the Python client (``GMEM_URL``, ``GMEM_API_KEY``) and ``gmem mcp``.
OTHER_VARIABLES = frozenset(
    {
        CONFIG_FILE_VARIABLE,
        "GMEM_URL",
        "GMEM_API_KEY",
        "GMEM_MCP_TRUST",
        "GMEM_MCP_HOST",
        "GMEM_MCP_PORT",
    }
)
#: The distributions of the otel extra, by a module each provides.
OTEL_EXTRA = {"opentelemetry.trace": "opentelemetry-api", "opentelemetry.sdk": "opentelemetry-sdk"}
#: Variables of the project's test suite (``GMEM_TEST_POSTGRES_DSN``…), not of the product.
TEST_PREFIX = "GMEM_TEST_"

log = logging.getLogger("governed_memory.config")


class _DotenvParseWarnings(logging.Filter):
    """python-dotenv says "could not parse statement" without the file; we say it better."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("python-dotenv could not parse")


logging.getLogger("dotenv.main").addFilter(_DotenvParseWarnings())


class Settings(BaseSettings):
    """Every setting of the service, with the defaults of SPEC §9."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        validate_default=True,
    )

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    master_key: SecretStr | None = None
    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8080, ge=1, le=65_535)
    # gmem serve's worker processes (docs/operations.md); more than 64 only multiplies
    # the store's connections and the memory footprint.
    workers: int = Field(1, ge=1, le=64)
    rate_limit_requests: int = Field(600, ge=1)
    rate_limit_window_seconds: int = Field(60, ge=1)
    max_body_bytes: int = Field(65_536, ge=1)
    max_connections: int = Field(1_000, ge=1, le=1_000_000)
    request_timeout_seconds: float = Field(20.0, gt=0, le=3_600)
    expiry_interval_seconds: float = Field(60.0, gt=0)
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    database_pool_max: int = Field(10, ge=1, le=1000)
    metrics_enabled: bool = True
    # The review console at /console/ (docs/console.md): on or off, and how long a signed-in
    # session may sit idle before it must sign in again. Its cookies are Secure when the
    # request came over HTTPS (as a trusted proxy's X-Forwarded-Proto says), or always with
    # console_secure_cookies (TLS ended by a proxy uvicorn does not trust).
    console_enabled: bool = True
    console_idle_timeout_seconds: int = Field(900, ge=60, le=86_400)
    console_secure_cookies: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Search (SPEC §6.2): the analyzer's language for every tenant, other languages for
    # some tenants ("acme:german,globex:french"), and semantic recall (the extra).
    search_language: str = "english"
    search_languages: str | None = None
    semantic: Literal["off", "on"] = "off"
    # OpenTelemetry traces (the otel extra, docs/telemetry.md): on or off, and where spans
    # go (console: stdout; otlp: the standard OTEL_EXPORTER_OTLP_* endpoint; global: the
    # tracer provider the process installed itself).
    otel: Literal["off", "on"] = "off"
    otel_exporter: Literal["otlp", "console", "global"] = "otlp"

    ttl_fact_default_seconds: int = Field(DEFAULT_TTLS[Kind.FACT][0], ge=1, le=MAX_TTL_SECONDS)
    ttl_fact_max_seconds: int = Field(DEFAULT_TTLS[Kind.FACT][1], ge=1, le=MAX_TTL_SECONDS)
    ttl_preference_default_seconds: int = Field(
        DEFAULT_TTLS[Kind.PREFERENCE][0], ge=1, le=MAX_TTL_SECONDS
    )
    ttl_preference_max_seconds: int = Field(
        DEFAULT_TTLS[Kind.PREFERENCE][1], ge=1, le=MAX_TTL_SECONDS
    )
    ttl_skill_default_seconds: int = Field(DEFAULT_TTLS[Kind.SKILL][0], ge=1, le=MAX_TTL_SECONDS)
    ttl_skill_max_seconds: int = Field(DEFAULT_TTLS[Kind.SKILL][1], ge=1, le=MAX_TTL_SECONDS)
    ttl_working_note_default_seconds: int = Field(
        DEFAULT_TTLS[Kind.WORKING_NOTE][0], ge=1, le=MAX_TTL_SECONDS
    )
    ttl_working_note_max_seconds: int = Field(
        DEFAULT_TTLS[Kind.WORKING_NOTE][1], ge=1, le=MAX_TTL_SECONDS
    )

    # Retention (SPEC §7): how long content is kept after an item expired, was rejected or
    # was superseded; per kind, a window overrides its status's (unset: the status's).
    retention_expired_seconds: int = Field(
        DEFAULT_RETENTION[Status.EXPIRED], ge=0, le=MAX_TTL_SECONDS
    )
    retention_rejected_seconds: int = Field(
        DEFAULT_RETENTION[Status.REJECTED], ge=0, le=MAX_TTL_SECONDS
    )
    retention_superseded_seconds: int = Field(
        DEFAULT_RETENTION[Status.SUPERSEDED], ge=0, le=MAX_TTL_SECONDS
    )
    retention_fact_expired_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_fact_rejected_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_fact_superseded_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_preference_expired_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_preference_rejected_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_preference_superseded_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_skill_expired_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_skill_rejected_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_skill_superseded_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_working_note_expired_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_working_note_rejected_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)
    retention_working_note_superseded_seconds: int | None = Field(None, ge=0, le=MAX_TTL_SECONDS)

    def retention_policy(self) -> RetentionPolicy:
        """The retention windows these settings describe, per status and kind."""
        per_kind = {
            (kind, status): seconds
            for kind in Kind
            for status in RETAINED_STATUSES
            if (seconds := getattr(self, f"retention_{kind.value}_{status.value}_seconds"))
            is not None
        }
        return RetentionPolicy.from_seconds(
            {s: getattr(self, f"retention_{s.value}_seconds") for s in RETAINED_STATUSES},
            per_kind,
        )

    def ttl_policy(self) -> TtlPolicy:
        """The per-kind TTL policy these settings describe."""
        return TtlPolicy.from_seconds(
            {
                kind: (
                    getattr(self, f"ttl_{kind.value}_default_seconds"),
                    getattr(self, f"ttl_{kind.value}_max_seconds"),
                )
                for kind in Kind
            }
        )

    def store_options(self) -> dict[str, Any]:
        """Backend options: the connection pool size applies to PostgreSQL only."""
        return {"max_size": self.database_pool_max} if is_postgres(self.database_url) else {}

    def tenant_languages(self) -> dict[str, str]:
        """The analyzer language of each tenant named in ``search_languages``."""
        entries = self.search_languages.split(",") if self.search_languages else []
        pairs = (entry.partition(":") for entry in entries)
        return {tenant.strip(): language.strip() for tenant, _, language in pairs}

    def master_key_value(self) -> str | None:
        """The base64 master key, if one is configured."""
        return None if self.master_key is None else self.master_key.get_secret_value()


def variable(field: str) -> str:
    """The environment variable of a settings field."""
    return PREFIX + field.upper()


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from overrides, environment and file, checked as a whole; or ConfigError."""
    given = {key: value for key, value in overrides.items() if value is not None}
    unknown = set(given) - set(Settings.model_fields)
    if unknown:
        raise ConfigError(f"unknown setting {variable(sorted(unknown)[0])}")
    config_file = config_file or os.environ.get(CONFIG_FILE_VARIABLE) or None
    if config_file is not None and not Path(config_file).is_file():
        raise ConfigError(f"{CONFIG_FILE_VARIABLE}: no such file")
    try:
        settings = Settings(_env_file=config_file, **given)  # type: ignore[call-arg]
    except pydantic.ValidationError as error:
        raise ConfigError(_first_problem(error)) from None
    _check(settings)
    _warn_about_ignored(None if config_file is None else Path(config_file))
    return settings


def known_variables() -> frozenset[str]:
    """Every GMEM_* name the product reads."""
    return frozenset(variable(field) for field in Settings.model_fields) | OTHER_VARIABLES


def _warn_about_ignored(config_file: Path | None) -> None:
    """Warn about each GMEM_* name that is no setting, and each junk line of the file."""
    known = known_variables()
    for name in sorted(os.environ):
        if _unknown(name, known):
            log.warning("%s is not a setting and is ignored%s", name, _closest(name, known))
    if config_file is None:
        return
    with config_file.open(encoding="utf-8", errors="replace") as stream:
        for binding in parse_stream(stream):
            text = binding.original.string
            # A binding's line is where its text starts, blank lines before it included.
            line = binding.original.line + text[: len(text) - len(text.lstrip())].count("\n")
            where = f"{config_file}, line {line}"
            if binding.error:
                log.warning("%s is not a KEY=value line and is ignored (not shown)", where)
            elif binding.key is not None and not binding.key.upper().startswith(PREFIX):
                log.warning("%s: %s is not a GMEM_* setting and is ignored", where, binding.key)
            elif binding.key is not None and _unknown(binding.key, known):
                log.warning(
                    "%s: %s is not a setting and is ignored%s",
                    where,
                    binding.key,
                    _closest(binding.key, known),
                )


def _unknown(name: str, known: frozenset[str]) -> bool:
    upper = name.upper()
    return upper.startswith(PREFIX) and not upper.startswith(TEST_PREFIX) and upper not in known


def _closest(name: str, known: frozenset[str]) -> str:
    match = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


def _first_problem(error: pydantic.ValidationError) -> str:
    """One line naming the first bad variable and the rule (never the value)."""
    first = error.errors(include_input=False, include_url=False)[0]
    field = str(first["loc"][0]) if first["loc"] else "settings"
    return f"{variable(field)}: {first['msg']}"


def _check(settings: Settings) -> None:
    """Rules across fields and formats pydantic does not know."""
    for kind in Kind:
        default = getattr(settings, f"ttl_{kind.value}_default_seconds")
        maximum = getattr(settings, f"ttl_{kind.value}_max_seconds")
        if maximum < default:
            raise ConfigError(
                f"{variable(f'ttl_{kind.value}_max_seconds')}: must be at least "
                f"{variable(f'ttl_{kind.value}_default_seconds')} ({default})"
            )
    try:
        settings.ttl_policy()
    except ValidationError as error:  # pragma: no cover - the loop above covers the rules
        raise ConfigError(f"TTL policy: {error.detail}") from None
    key = settings.master_key_value()
    if key is not None:
        try:
            parse_master_key(key)
        except CryptoError:
            raise ConfigError(
                "GMEM_MASTER_KEY: must be base64 that decodes to exactly 32 bytes"
            ) from None
    if settings.database_url is not None:
        try:
            backend_of(settings.database_url)
        except ValidationError as error:
            raise ConfigError(f"{variable('database_url')}: {error.errors[0].message}") from None
    _check_languages(settings)
    _check_otel(settings)


def _check_otel(settings: Settings) -> None:
    """Tracing needs the otel extra (looked for, not imported: nothing of OpenTelemetry
    loads unless tracing is on)."""
    if settings.otel == "off":
        return
    for module, distribution in OTEL_EXTRA.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            raise ConfigError(
                f"{variable('otel')}=on needs the otel extra, and {distribution} is not "
                "installed: pip install 'governed-memory[otel]'"
            )


def _check_languages(settings: Settings) -> None:
    """Every language a Snowball stemmer of PyStemmer; every tenant a valid tenant id."""
    known = ", ".join(sorted(LANGUAGES))
    if settings.search_language not in LANGUAGES:
        raise ConfigError(f"{variable('search_language')}: must be one of {known}")
    name = variable("search_languages")
    seen: set[str] = set()
    entries = settings.search_languages.split(",") if settings.search_languages else []
    for entry in entries:
        tenant, colon, language = (part.strip() for part in entry.partition(":"))
        if not colon:
            raise ConfigError(f"{name}: must be tenant:language pairs, comma-separated")
        try:
            values.tenant_id(tenant)
        except ValidationError:
            raise ConfigError(f"{name}: a tenant id is not valid") from None
        if language not in LANGUAGES:
            raise ConfigError(f"{name}: each language must be one of {known}")
        if tenant in seen:
            raise ConfigError(f"{name}: a tenant is named twice")
        seen.add(tenant)


__all__ = ["ConfigError", "Settings", "known_variables", "load_settings", "variable"]
