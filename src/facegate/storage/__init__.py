"""Object storage: the ObjectStore port, its local and S3 adapters, and TenantStore.

TenantStore is the only door for tenant data.
"""
