"""Video: probe, decode, process and encode with PyAV, concurrently, in one process."""

from facegate.engine.video.options import VideoOptions, VideoProgress, VideoResult
from facegate.engine.video.probe import VideoInfo, VideoLimits, probe_video
from facegate.engine.video.process import FrameInspector, FrameStages, process_video
from facegate.engine.video_sniff import is_video_file

__all__ = [
    "FrameInspector",
    "FrameStages",
    "VideoInfo",
    "VideoLimits",
    "VideoOptions",
    "VideoProgress",
    "VideoResult",
    "is_video_file",
    "probe_video",
    "process_video",
]
