"""Alembic migrations of the facegate schema (run by facegate.database.migrate)."""
