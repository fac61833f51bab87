"""The Redis adapter of the BanStore port: one atomic script per failed authentication, so
concurrent API processes neither lose failures nor double a ban."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from redis import Redis

from facegate.ratelimit.bans import Ban, BanPolicy

# KEYS: failures (zset), ban (string "strikes:expires_at", TTL), strikes (int), index (zset)
# ARGV: now, window, max_failures, memory_seconds, member, ip, base, max_ban
_RECORD_FAILURE = """
local now = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then return nil end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then return nil end
redis.call('DEL', KEYS[1])
local strikes = redis.call('INCR', KEYS[3])
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
local seconds = math.min(tonumber(ARGV[7]) * 2 ^ (strikes - 1), tonumber(ARGV[8]))
local expires = now + seconds
redis.call('SET', KEYS[2], strikes .. ':' .. expires, 'EX', math.ceil(seconds))
redis.call('ZADD', KEYS[4], expires, ARGV[6])
return {strikes, tostring(expires)}
"""


class RedisBanStore:
    """Bans in Redis under ``<prefix>:ban...`` keys, shared by every API process."""

    def __init__(
        self,
        client: Redis,
        policy: BanPolicy,
        prefix: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.policy = policy
        self.prefix = prefix
        self._clock = clock
        self._script = client.register_script(_RECORD_FAILURE)

    def _keys(self, ip: str) -> list[str]:
        p = self.prefix
        return [f"{p}:authfail:{ip}", f"{p}:ban:{ip}", f"{p}:strikes:{ip}", f"{p}:bans"]

    def record_failure(self, ip: str) -> Ban | None:
        policy = self.policy
        result: Any = self._script(
            keys=self._keys(ip),
            args=[
                repr(self._clock()),
                policy.window_seconds,
                policy.max_failures,
                policy.memory_seconds,
                uuid.uuid4().hex,
                ip,
                policy.ban_seconds,
                policy.max_ban_seconds,
            ],
        )
        if result is None:
            return None
        strikes, expires = result
        return Ban(ip, int(strikes), float(expires))

    def active_ban(self, ip: str) -> Ban | None:
        raw = self.client.get(self._keys(ip)[1])
        return _parse(ip, raw)

    def list_bans(self) -> list[Ban]:
        index = self._keys("-")[3]
        self.client.zremrangebyscore(index, "-inf", self._clock())
        ips = sorted(_text(ip) for ip in self.client.zrange(index, 0, -1))
        if not ips:
            return []
        raws = self.client.mget([self._keys(ip)[1] for ip in ips])
        return [ban for ip, raw in zip(ips, raws, strict=True) if (ban := _parse(ip, raw))]

    def unban(self, ip: str, *, forget: bool = False) -> bool:
        failures, ban, strikes, index = self._keys(ip)
        pipe = self.client.pipeline()
        pipe.delete(ban)
        pipe.delete(failures)
        pipe.zrem(index, ip)
        if forget:
            pipe.delete(strikes)
        removed = pipe.execute()
        return bool(removed[0])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse(ip: str, raw: Any) -> Ban | None:
    if raw is None:
        return None
    strikes, _, expires = _text(raw).partition(":")
    return Ban(ip, int(strikes), float(expires))
