"""The HTTP service (SPEC §8): ``create_app(settings)`` builds it; ``gmem serve`` runs it."""

from governed_memory.http.app import create_app

__all__ = ["create_app"]
