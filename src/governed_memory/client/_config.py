"""Where the client connects and how it introduces itself, from arguments or ``GMEM_*``."""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx

from governed_memory._version import __version__
from governed_memory.client._retry import RetryPolicy

URL_VARIABLE = "GMEM_URL"
API_KEY_VARIABLE = "GMEM_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class Config:
    """The resolved settings of one client."""

    base_url: str
    api_key: str | None
    retry: RetryPolicy

    @classmethod
    def resolve(
        cls, base_url: str | None, api_key: str | None, retry: RetryPolicy | None
    ) -> Config:
        """Arguments win; else ``GMEM_URL`` / ``GMEM_API_KEY``; else the defaults."""
        url = base_url or os.environ.get(URL_VARIABLE) or DEFAULT_URL
        key = api_key or os.environ.get(API_KEY_VARIABLE) or None
        return cls(url.rstrip("/"), key, retry or RetryPolicy())

    @property
    def headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "User-Agent": f"governed-memory-client/{__version__}",
        }
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    @property
    def display_url(self) -> str:
        """The base URL without any credentials, for error messages."""
        url = httpx.URL(self.base_url)
        port = f":{url.port}" if url.port is not None else ""
        return f"{url.scheme}://{url.host}{port}{url.path.rstrip('/')}"


__all__ = ["API_KEY_VARIABLE", "DEFAULT_URL", "URL_VARIABLE", "Config"]
