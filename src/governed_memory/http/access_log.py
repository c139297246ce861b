"""The access log: one content-free JSON line and one metrics sample per HTTP request.

Written by the app's edge (:mod:`governed_memory.http.edge`), outside everything else,
so it sees every final status, including the 500s of the layers inside it. It logs the
method, the route template (not the concrete path, which carries ids), the status, the
duration and the id of the API key that authenticated, if any; never a body.
"""

from __future__ import annotations

import logging

from starlette.types import Scope

from governed_memory.observability import ACCESS_LOGGER

#: Where the authenticator leaves the id of the request's API key, for this log to name.
KEY_ID_STATE = "key_id"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED_ROUTE = "unmatched"

access_log = logging.getLogger(ACCESS_LOGGER)


def route_template(scope: Scope) -> str:
    """The template of the route that handled the request (``/v1/memories/{id}``)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


__all__ = ["KEY_ID_STATE", "KNOWN_METHODS", "access_log", "route_template"]
