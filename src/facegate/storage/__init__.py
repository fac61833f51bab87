"""Object storage: the ObjectStore port, its local and S3 adapters, and TenantStore (the only door)."""
