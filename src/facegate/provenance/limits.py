"""What reading a file's marks back may cost, by who asks.

A verification with valid credentials is held to the upload budget and the engine's input
limits, as a job's upload is. One without them (anyone on the internet) gets small limits
whatever the file: a video at most ``public_verify_max_pixels`` per frame, seconds, frames
per second and frames (refused from the probe, before any frame beyond the first is
decoded), and at most ``public_verify_decode_frames`` frames decoded to sample it (the
reader seeks to each sample instead of decoding its way there); images at most
``PUBLIC_IMAGE_PIXELS_FACTOR`` times the video's pixels. The endpoint runs such
verifications ``public_verify_concurrency`` at a time per process.
"""

from __future__ import annotations

from dataclasses import dataclass

from facegate.engine.image import ImageLimits
from facegate.engine.video.probe import VideoLimits
from facegate.settings import Settings

#: Frames decoded at most from a video a tenant verifies (its first minute at 30 fps: what
#: the reader decoded before it could seek).
AUTHENTICATED_DECODE_FRAMES = 1800
#: A still is decoded once, a video's frames up to ``decode_frames`` times: an image may
#: have this many times the pixels of one public video frame (4: a 4K still for 1080p).
PUBLIC_IMAGE_PIXELS_FACTOR = 4


@dataclass(frozen=True)
class InspectLimits:
    """The limits of one verification: the upload, an image, a video, and the frames a
    video's watermark may decode; ``max_fps`` 0 is no limit."""

    max_bytes: int
    image: ImageLimits
    video: VideoLimits
    max_fps: float = 0.0
    decode_frames: int = AUTHENTICATED_DECODE_FRAMES


def authenticated_limits(max_bytes: int) -> InspectLimits:
    """A caller with valid credentials (or the operator's CLI): the upload budget and the
    engine's default input limits."""
    return InspectLimits(
        max_bytes=max_bytes,
        image=ImageLimits(max_bytes=max_bytes),
        video=VideoLimits(max_bytes=max_bytes),
    )


def public_limits(settings: Settings) -> InspectLimits:
    """A caller without credentials: the small limits of the module's docstring."""
    max_bytes = settings.public_upload_max_bytes
    pixels = settings.public_verify_max_pixels
    return InspectLimits(
        max_bytes=max_bytes,
        image=ImageLimits(max_bytes=max_bytes, max_pixels=pixels * PUBLIC_IMAGE_PIXELS_FACTOR),
        video=VideoLimits(
            max_bytes=max_bytes,
            max_seconds=settings.public_verify_max_seconds,
            max_frames=settings.public_verify_max_frames,
            max_pixels=pixels,
        ),
        max_fps=settings.public_verify_max_fps,
        decode_frames=settings.public_verify_decode_frames,
    )
