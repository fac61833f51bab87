"""``facegate swap`` on a video target: the same pipeline, frames tracked, a progress bar."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click
from pydantic import ValidationError

from facegate.engine.errors import InvalidOptions
from facegate.engine.image import ImageLimits, load_image_file
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.swap.color import build_lab_tables
from facegate.engine.video_sniff import is_video_file
from facegate.models.requests import installation_engine
from facegate.settings import get_settings

if TYPE_CHECKING:
    from facegate.engine.video import VideoProgress


def is_video_target(path: Path) -> bool:
    """Decided by the file's content, never its name (a missing file is not a video)."""
    return path.is_file() and is_video_file(path)


def start_lab_tables() -> threading.Thread:
    """OpenCV's L*a*b* tables built on a thread (``color.build_lab_tables``): the caller
    reads its inputs and builds the engine meanwhile, then joins it before the first swap."""
    tables = threading.Thread(target=build_lab_tables, name="lab-tables", daemon=True)
    tables.start()
    return tables


def run_video_swap(
    paths: tuple[Path, ...],
    output: Path,
    reference: Path | None,
    document: dict[str, Any],
    *,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the pipeline over the video ``paths[-1]`` into ``output`` (.mp4 .mov .mkv .webm);
    a progress bar on stderr unless ``show_progress`` is false. Returns frames, size, fps."""
    # optional: PyAV and the video stack, which `facegate swap` of an image never loads
    from facegate.engine.video.options import container_for

    container_for(output)  # refuse an unknown output suffix before any work
    try:
        spec = PipelineSpec.model_validate({**document, "output": {}})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidOptions(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    tables = start_lab_tables()
    limits = ImageLimits()
    *source_paths, target_path = paths
    sources = [load_image_file(path, limits).frame for path in source_paths]
    ref = load_image_file(reference, limits).frame if reference else None
    output.parent.mkdir(parents=True, exist_ok=True)
    pipeline = installation_engine(get_settings()).pipeline(spec)
    tables.join()
    sink: TextIO = sys.stderr if show_progress else io.StringIO()
    with click.progressbar(length=1, label="swapping", show_pos=True, file=sink) as bar:

        def report(progress: VideoProgress) -> None:
            bar.length = progress.frames_total
            bar.update(progress.frames_done - bar.pos)
            bar.label = f"swapping {progress.fps:5.1f} fps"

        result = pipeline.run_video(sources, target_path, output, reference=ref, on_progress=report)
    return {
        "frames": result.frames,
        "width": result.width,
        "height": result.height,
        "fps": round(result.frames / max(result.seconds, 1e-6), 1),
    }
