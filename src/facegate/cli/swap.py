"""``facegate swap``: the engine on the command line, no service involved."""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from facegate.cli.swap_video import is_video_target, run_video_swap, start_lab_tables
from facegate.engine.errors import EngineError, InvalidOptions
from facegate.engine.image import ImageLimits, encode_image, load_image_file
from facegate.engine.pipeline import PipelineSpec
from facegate.models.requests import installation_engine
from facegate.settings import get_settings

FORMATS_BY_SUFFIX = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".webp": "webp"}


def parse_mapping(text: str | None) -> list[list[int]] | None:
    """``"0:1,1:0"`` → ``[[0, 1], [1, 0]]`` (source face index : target face index)."""
    if not text:
        return None
    pairs: list[list[int]] = []
    for item in text.split(","):
        left, sep, right = item.strip().partition(":")
        if not sep or not left.isdigit() or not right.isdigit():
            raise click.BadParameter(
                f"{item!r} is not SOURCE:TARGET (e.g. 0:1,1:0)", param_hint="--map"
            )
        pairs.append([int(left), int(right)])
    return pairs


def build_spec_document(
    *,
    processors: str,
    selector: str,
    order: str,
    mapping: str | None,
    blend: float,
    mask: str,
    output_format: str,
    quality: int,
) -> dict[str, Any]:
    names = [name.strip() for name in processors.split(",") if name.strip()]
    options: dict[str, dict[str, Any]] = {}
    if "face_swapper" in names:
        options["face_swapper"] = {"blend": blend, "mask": mask}
    return {
        "processors": names,
        "processor_options": options,
        "selector": {"mode": selector, "order": order, "mapping": parse_mapping(mapping)},
        "output": {"format": output_format, "quality": quality},
    }


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the result; its suffix picks the format (.jpg .png .webp).",
)
@click.option(
    "--processors",
    default="face_swapper",
    show_default=True,
    help="Comma-separated processors, run in order (e.g. face_swapper,face_debugger).",
)
@click.option(
    "--selector",
    type=click.Choice(["one", "many", "reference"]),
    default="many",
    show_default=True,
    help="Which target faces to process: the largest one, all of them, or the person "
    "shown in --reference FILE.",
)
@click.option(
    "--order",
    default="large-small",
    show_default=True,
    help="Face order: large-small, small-large, left-right, right-left, top-bottom, "
    "bottom-top, best-worst, worst-best.",
)
@click.option(
    "--reference",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Image of the person to replace (with --selector reference).",
)
@click.option("--map", "mapping", help="Explicit pairs SOURCE_FACE:TARGET_FACE, e.g. 0:1,1:0.")
@click.option(
    "--blend",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="Swap strength (0 keeps the target).",
)
@click.option(
    "--mask",
    type=click.Choice(["feather", "poisson"]),
    default="feather",
    show_default=True,
    help="Blend mode at the face border.",
)
@click.option("--output-quality", type=click.IntRange(1, 100), default=90, show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="On success print one JSON object on stdout (output, faces, seconds).",
)
def swap(
    paths: tuple[Path, ...],
    output: Path,
    processors: str,
    selector: str,
    order: str,
    reference: Path | None,
    mapping: str | None,
    blend: float,
    mask: str,
    output_quality: int,
    quiet: bool,
    as_json: bool,
) -> None:
    """Swap faces: SOURCE [SOURCE...] TARGET -o OUT.

    Every source image contributes its faces (largest first); the target's faces are
    replaced according to --selector / --map. Errors print one line and exit with 2.
    """
    if len(paths) < 2:
        raise click.UsageError("give at least one SOURCE and a TARGET")
    if selector == "reference" and reference is None:
        raise click.UsageError(
            "--selector reference needs --reference FILE "
            "(a photo of the person in TARGET whose face is replaced)"
        )

    video = is_video_target(paths[-1])
    # A video's container follows its own suffix; the image format only matters for images.
    fmt = "jpeg" if video else FORMATS_BY_SUFFIX.get(output.suffix.lower())
    if fmt is None:
        raise click.UsageError(f"unknown output suffix {output.suffix!r} (use .jpg, .png or .webp)")
    document = build_spec_document(
        processors=processors,
        selector=selector,
        order=order,
        mapping=mapping,
        blend=blend,
        mask=mask,
        output_format=fmt,
        quality=output_quality,
    )
    started = time.perf_counter()
    try:
        summary = (run_video_swap if video else run_swap)(
            paths, output, reference, document, show_progress=not (quiet or as_json)
        )
    except EngineError as exc:
        click.echo(f"error: {exc.code}: {exc.detail}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        sys.exit(2)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    if as_json:
        click.echo(json.dumps({"output": str(output), **summary}))
    elif not quiet:
        click.echo(describe(output, summary), err=True)
    exit_without_teardown()


def exit_without_teardown() -> None:
    """End the process now that the result is written and said, without the interpreter's
    teardown (~75 ms here: freeing every module, the mediapipe graphs and the engine's
    threads, which nothing will use again). The exit handlers still run (the stderr
    filter's drain among them) and the output streams are flushed. Only where this process
    is the command, its streams the real ones; under a caller that captures them (click's
    CliRunner, pytest) it returns and the command ends as any other."""
    stdout, stderr = sys.__stdout__, sys.__stderr__
    if stdout is None or stderr is None or sys.stdout is not stdout or sys.stderr is not stderr:
        return
    atexit._run_exitfuncs()
    stdout.flush()
    stderr.flush()
    os._exit(0)


def describe(output: Path, summary: dict[str, Any]) -> str:
    """The one line of a successful swap: where the result went, what was done, how long."""
    if "frames" in summary:
        done = (
            f"{summary['frames']} frames {summary['width']}x{summary['height']} "
            f"at {summary['fps']:.1f} fps"
        )
    else:
        done = f"{summary['processed']} of {summary['target_faces']} faces swapped"
    return f"wrote {output}: {done} in {summary['seconds']:.1f} s"


def run_swap(
    paths: tuple[Path, ...],
    output: Path,
    reference: Path | None,
    document: dict[str, Any],
    *,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Swap into the image ``output``; returns the faces found and processed."""
    try:
        spec = PipelineSpec.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidOptions(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    tables = start_lab_tables()
    limits = ImageLimits()
    *source_paths, target_path = paths
    sources = [load_image_file(path, limits).frame for path in source_paths]
    target = load_image_file(target_path, limits)
    ref = load_image_file(reference, limits).frame if reference else None
    counts: dict[str, int] = {}
    pipeline = installation_engine(get_settings()).pipeline(spec)
    tables.join()
    result = pipeline.run_image(sources, target.frame, reference=ref, counts=counts)
    fmt = spec.output.format or "jpeg"
    data = encode_image(result, fmt, spec.output.quality, alpha=target.alpha)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.part")
    tmp.write_bytes(data)
    tmp.replace(output)
    return dict(counts)
