"""How many faces a video shows at once, looked at where the tracker would look.

A run of a whole video decides, once per face track when the track first appears, which
source goes onto it (``engine/video/swap.py``); a part of a segmented run starts with fresh
tracks at its first frame. The two agree when that decision cannot depend on when it is
made: with at most one face in view, the one face is always the selected one. ``most_faces``
counts the faces on every ``every``-th frame (the tracker's detection cadence), stopping as
soon as ``enough`` were seen.
"""

from __future__ import annotations

from pathlib import Path

import av

from facegate.engine.faces import FaceAnalyser
from facegate.engine.video.convert import FrameGeometry, decoded_to_bgr


def most_faces(path: Path, analyser: FaceAnalyser, every: int, enough: int = 2) -> int:
    """The most faces found on one looked-at frame (at most ``enough``)."""
    most = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        context = stream.codec_context
        geometry = FrameGeometry.for_rotation(
            context.width, context.height, 0, context.color_range == 2
        )
        for index, picture in enumerate(container.decode(stream)):
            if index % every:
                continue
            most = max(most, len(analyser.analyse(decoded_to_bgr(picture, geometry))))
            if most >= enough:
                break
    return most
