"""``facegate stream-check``: stream a photo as a camera to a running server's
``POST /v1/streams`` for a few seconds and print what came back (frames, fps, latency
from frame numbers stamped into the pixels, why it ended): whether live streams work
through this deployment, from where the command runs."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path

import click
import cv2
import httpx
import numpy as np

from facegate.engine.types import Frame
from facegate.streams.loopback import camera_frame, run_client_at


@click.command("stream-check")
@click.option("--url", default="http://127.0.0.1:8000", show_default=True)
@click.option("--key", required=True, help="an API key with streams:write")
@click.option(
    "--camera",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="the photo the camera shows (fitted to 640x480)",
)
@click.option("--source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--source-face-id", type=click.UUID, help="a saved face instead of --source")
@click.option(
    "--seconds",
    type=click.FloatRange(0.5, 600),
    default=5.0,
    show_default=True,
    help="how long to stream once the first swapped frame is back",
)
@click.option(
    "--relay",
    is_flag=True,
    help="relay candidates only: every packet through the TURN server of GET /v1/streams/ice "
    "(checks TURN as a client behind a firewall would use it)",
)
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write the last swapped frame received here (PNG)",
)
def stream_check(
    url: str,
    key: str,
    camera: Path,
    source: Path | None,
    source_face_id: uuid.UUID | None,
    seconds: float,
    relay: bool,
    save: Path | None,
) -> None:
    """Prints one JSON object; exit 1 when no swapped frame came back."""
    if (source is None) == (source_face_id is None):
        raise click.UsageError("give --source or --source-face-id")
    read = cv2.imread(str(camera))
    if read is None:
        raise click.BadParameter(f"cannot read {camera}", param_hint="--camera")
    picture: Frame = np.asarray(read, dtype=np.uint8)
    if source is not None:
        body = {"source_image": base64.b64encode(source.read_bytes()).decode()}
    else:
        body = {"source_face_id": str(source_face_id)}
    try:
        run = asyncio.run(
            run_client_at(url, key, body, camera_frame(picture), seconds, keep=0, relay=relay)
        )
    except httpx.HTTPStatusError as exc:
        raise click.ClickException(f"{exc.response.status_code}: {exc.response.text}") from None
    if save is not None and run.last is not None:
        cv2.imwrite(str(save), run.last)
    click.echo(json.dumps(run.summary()))
    if not run.samples:
        raise click.ClickException("no swapped frame came back")
