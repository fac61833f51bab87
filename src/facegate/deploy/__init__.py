"""Deployment helpers: Kubernetes overlays rendered from a tenant's policy, and the
specification's environment names (``TENANT_ID``, ``MODEL_PATH``, ...) mapped onto ours.

Nothing here touches the database: the CLI (``facegate deploy overlay``) reads the policy and
hands plain data to :func:`facegate.deploy.overlay.render_overlay`, so rendering is testable alone.
"""
