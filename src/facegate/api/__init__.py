"""HTTP API: app factory, routers, dependencies, problem+json errors."""
