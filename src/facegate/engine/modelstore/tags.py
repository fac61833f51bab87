"""Which tag of a model a job uses: pins (the specification's ``MODEL_TAG``) and A/B splits.

The split is deterministic in the job id, so a retried job keeps its variant and the variant
can be recomputed for audit; the chosen tag is returned for the job to record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from facegate.engine.errors import InvalidOptions


@dataclass(frozen=True)
class TagPolicy:
    """Tag pins and A/B splits for one tenant's (or the installation's) jobs.

    - ``default_tag``: the ``MODEL_TAG`` value, used for every model that has that tag;
    - ``pins``: model name -> tag, wins over ``default_tag``;
    - ``splits``: model name -> {tag: weight}; wins over both for jobs with an id.
    With none of them the newest installed tag is used (see ModelStore.tags).
    """

    default_tag: str | None = None
    pins: Mapping[str, str] = field(default_factory=dict)
    splits: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, weights in self.splits.items():
            if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise InvalidOptions(f"A/B split of {name!r} needs non-negative weights, sum > 0")

    def choose(self, name: str, job_id: str | None, installed: list[str]) -> str | None:
        """The tag to use for ``name`` (None: the store's newest); only installed tags count."""
        split = self.splits.get(name)
        if split and job_id is not None:
            return choose_variant(name, job_id, split)
        if name in self.pins:
            return self.pins[name]
        if self.default_tag is not None and self.default_tag in installed:
            return self.default_tag
        return None


def choose_variant(name: str, job_id: str, weights: Mapping[str, float]) -> str:
    """Pick a tag with probability proportional to its weight, deterministically per job."""
    digest = hashlib.sha256(f"{name}\x00{job_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64 * sum(weights.values())
    running = 0.0
    items = sorted(weights.items())  # independent of the mapping's insertion order
    for tag, weight in items:
        running += weight
        if point < running:
            return tag
    return next(tag for tag, weight in reversed(items) if weight > 0)


@dataclass(frozen=True)
class ModelRequest:
    """Who asks for which model: tenant, explicit tag, tag policy and job id (for A/B).

    The worker builds one per job from the tenant's policy and puts it on the JobContext;
    processors pass it to the ModelHub, so a tenant's private models and pins apply to its
    jobs only.
    """

    tenant: str | None = None
    tag: str | None = None
    policy: TagPolicy | None = None
    job_id: str | None = None
