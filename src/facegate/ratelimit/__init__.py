"""Rate limits and abusive-IP bans at the gateway.

Sliding-window limits per tenant (its policy's ``requests_per_minute``) and per client IP
for unauthenticated calls, fail2ban-style bans after repeated failed authentications, and
the IETF ``RateLimit``/``RateLimit-Policy`` headers. Redis holds the counters in the
cluster shape, process memory in the embedded shape: the same code, chosen by
``FACEGATE_REDIS_URL``.
"""
