"""Tenants, policies, API keys, JWT verification and the Principal every request resolves to."""
