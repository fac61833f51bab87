"""The app's API routes as one flat table: which route a method and path reach, and which
methods a path allows — answered from the headers alone, before FastAPI routes the request.

FastAPI nests included routers (each ``include_router`` is one opaque route of its parent),
so the table is built from ``fastapi.routing.iter_route_contexts``, which walks them with
their effective (prefixed) paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.convertors import Convertor
from starlette.routing import compile_path


@dataclass(frozen=True)
class Entry:
    pattern: re.Pattern[str]
    convertors: dict[str, Convertor[Any]]
    methods: frozenset[str]
    route: APIRoute


class RouteTable:
    """Built once per app, on first use (routes are all included by then)."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    @classmethod
    def of(cls, app: FastAPI) -> RouteTable:
        table: RouteTable | None = getattr(app.state, "route_table", None)
        if table is None:
            table = app.state.route_table = cls.build(app)
        return table

    @classmethod
    def build(cls, app: FastAPI) -> RouteTable:
        entries: list[Entry] = []
        for context in iter_route_contexts(app.router.routes):
            route, path = context.original_route, context.path
            if isinstance(route, APIRoute) and path:
                pattern, _, convertors = compile_path(path)
                methods = frozenset(context.methods or ())
                entries.append(Entry(pattern, convertors, methods, route))
        return cls(entries)

    def find(self, method: str, path: str) -> tuple[APIRoute, dict[str, Any]] | None:
        """The API route serving ``method`` on ``path`` and its path parameters (converted
        as the router converts them), if any."""
        for entry in self.entries:
            if method in entry.methods and (matched := entry.pattern.match(path)):
                params = {
                    name: entry.convertors[name].convert(value)
                    for name, value in matched.groupdict().items()
                }
                return entry.route, params
        return None

    def allowed(self, path: str) -> list[str]:
        """Every method some API route serves on ``path`` (for a 405's ``Allow``)."""
        methods = {m for e in self.entries if e.pattern.match(path) for m in e.methods}
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods)
