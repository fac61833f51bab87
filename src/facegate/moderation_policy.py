"""The moderation every moderated tenant gets, jobs and saved library faces alike (one
classifier, one threshold): ``worker.moderation`` applies it to jobs, ``library.moderation``
to a face when it is saved."""

from __future__ import annotations

from dataclasses import replace

from facegate.engine.moderation import ModerationPolicy

#: Inputs and outputs checked, a video so that no run of half a second (or of 15 frames)
#: goes unchecked (FACEGATE_MODERATION_VIDEO_GAP_SECONDS; about two frames a second at
#: 30 fps), refused from an nsfw score of 0.8 — open_nsfw's own guidance (below 0.2 likely
#: safe, above 0.8 highly probably NSFW). One flagged frame refuses a video, so more
#: checked frames are more chances of a false refusal: at the engine's default 0.5, 4 of
#: the 1140 frames of the test clips were over (a moving group photo, highest 0.58), a false
#: refusal of that clip at any sampling that picks one of them; at 0.8 none of the test
#: photos or of the clips' frames is, so even checking every frame refuses none of them
#: (benchmarks/moderation_bench.py measures both at the new sampling).
JOB_MODERATION = ModerationPolicy(
    check_inputs=True, check_outputs=True, threshold=0.8, video_gap_seconds=0.5
)


def job_moderation(video_gap_seconds: float) -> ModerationPolicy:
    """The jobs' policy with the installation's video gap (its settings)."""
    return replace(JOB_MODERATION, video_gap_seconds=video_gap_seconds)
