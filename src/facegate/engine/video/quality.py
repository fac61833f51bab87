"""The quality report of a video: the faces of a few sampled frames (``engine.report``).

The recogniser costs one ResNet pass per face and image (~0.1 s of a CPU core each, two per
face: the result's and the original's), so a video is not reported frame by frame: its
length is cut into ``SAMPLED_FRAMES`` equal spans, and in each the first frame at or past the
span's middle that has a swapped face is reported, every swapped face of it. Each face's
report is an image report (``FaceReport``) with the frame's index (``frame``, counted from
the run's first frame) beside it.

A part of a segmented video (``worker.segments``) samples the spans of the whole video whose
middle falls in its frames, with the whole's frame indices: the parts' reports together are
the whole run's (a span is reported by the part that holds its middle).
"""

from __future__ import annotations

import threading
from typing import Any

from facegate.engine.report import FaceReport

#: How many frames of a video are reported (at most: a span with no swapped face gives none).
SAMPLED_FRAMES = 4


class QualitySampler:
    """Decides which frames are reported (``due``: in frame order, on the analysing thread)
    and gathers their reports (``add``: from any render thread)."""

    def __init__(
        self, frames: int, samples: int = SAMPLED_FRAMES, *, part_of: tuple[int, int] | None = None
    ) -> None:
        """``frames`` of this run; ``part_of``: (this run's first frame, the frames of the
        whole video) when the run is a part of a segmented one."""
        first, whole = part_of if part_of is not None else (0, frames)
        self.first = first
        self.span = max(1.0, whole / max(1, samples))
        self.samples = samples
        # The spans whose middle is before this part are an earlier part's.
        self.taken = min(samples, sum((k + 0.5) * self.span <= first - 1 for k in range(samples)))
        self._lock = threading.Lock()
        self._reports: list[tuple[int, FaceReport]] = []

    def due(self, index: int) -> bool:
        """Whether frame ``index`` (which has a swapped face) is reported: it is at or past
        the middle of the next span not yet sampled. Called once per such frame, in order
        (``index`` counted from this run's first frame)."""
        index += self.first
        if self.taken >= self.samples or index < (self.taken + 0.5) * self.span:
            return False
        # Spans whose middle passed without a swapped face give no report.
        self.taken = min(self.samples, int(index / self.span - 0.5) + 1)
        return True

    def add(self, index: int, reports: list[FaceReport]) -> None:
        """The reports of this run's frame ``index`` (kept with the whole video's index)."""
        with self._lock:
            self._reports.extend((self.first + index, report) for report in reports)

    def reports(self) -> list[FaceReport]:
        """Every report gathered, in frame order."""
        with self._lock:
            return [report for _, report in sorted(self._reports, key=lambda r: r[0])]

    def as_json(self) -> list[dict[str, Any]]:
        """Every report as the job stores it: the image report's fields and ``frame``."""
        with self._lock:
            ordered = sorted(self._reports, key=lambda r: (r[0], r[1].face))
            return [{**report.as_dict(), "frame": index} for index, report in ordered]
