"""What keeps a live frame's latency low: its last packet releases it to the decoder (not
the next frame's first), and a keyframe's detection while the face is followed runs beside
the frames."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import cv2
import numpy as np
import pytest
from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket
from tests.streams.streamkit import CAMERA_PHOTO, SOURCE_PHOTO, photo

from facegate.engine.faces import FaceAnalyser
from facegate.engine.tracking import FaceTracker, TrackerOptions
from facegate.engine.types import Face, Frame
from facegate.streams.loopback import PhotoCamera, camera_frame
from facegate.streams.media import MarkerJitterBuffer, release_on_marker

KEY = bytes(range(32))


def rtp(seq: int, timestamp: int, data: bytes, *, marker: bool) -> RtpPacket:
    packet = RtpPacket(
        payload_type=96, marker=int(marker), sequence_number=seq, timestamp=timestamp
    )
    packet._data = data  # type: ignore[attr-defined]  # what the receiver depayloads into
    return packet


def frames_out(buffer: JitterBuffer, packets: list[RtpPacket]) -> list[tuple[int, bytes] | None]:
    """Per packet added: the frame it released (timestamp, data), or None."""
    released: list[tuple[int, bytes] | None] = []
    for packet in packets:
        _, frame = buffer.add(packet)
        released.append(None if frame is None else (frame.timestamp, frame.data))
    return released


def test_a_frame_is_released_at_its_last_packet() -> None:
    packets = [
        rtp(100, 3000, b"a1", marker=False),
        rtp(101, 3000, b"a2", marker=True),
        rtp(102, 6000, b"b1", marker=True),
        rtp(103, 9000, b"c1", marker=False),
    ]
    # aiortc's own buffer: each frame waits for the next frame's first packet
    assert frames_out(JitterBuffer(128, is_video=True), packets) == [
        None,
        None,
        (3000, b"a1a2"),
        (6000, b"b1"),
    ]
    assert frames_out(MarkerJitterBuffer(128, is_video=True), packets) == [
        None,
        (3000, b"a1a2"),
        (6000, b"b1"),
        None,
    ]


def test_a_frame_with_a_packet_missing_waits_as_before() -> None:
    buffer = MarkerJitterBuffer(128, is_video=True)
    released = frames_out(
        buffer,
        [
            rtp(200, 3000, b"a1", marker=False),
            rtp(202, 3000, b"a3", marker=True),  # 201 lost: not a whole frame
            rtp(201, 3000, b"a2", marker=False),  # retransmitted: now it is
            rtp(203, 6000, b"b1", marker=True),
        ],
    )
    assert released == [None, None, None, (3000, b"a1a2a3")]
    # the next frame is at the head now; its marker was in: the next packet finds it whole
    assert frames_out(buffer, [rtp(204, 9000, b"c1", marker=True)]) == [(6000, b"b1")]


async def test_release_on_marker_fits_the_video_receivers_only() -> None:
    pc = RTCPeerConnection()
    try:
        pc.addTrack(PhotoCamera(camera_frame(photo(CAMERA_PHOTO))))
        release_on_marker(pc)
        release_on_marker(pc)  # twice: still one buffer, kept
        (transceiver,) = pc.getTransceivers()
        buffer = transceiver.receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        assert isinstance(buffer, MarkerJitterBuffer)
        assert buffer.capacity >= 128
    finally:
        await pc.close()


class SpyAnalyser:
    """The real analyser, noting the thread each detection ran on."""

    def __init__(self, analyser: FaceAnalyser) -> None:
        self.analyser = analyser
        self.threads: list[str] = []

    def analyse(self, frame: Frame) -> list[Face]:
        self.threads.append(threading.current_thread().name)
        return self.analyser.analyse(frame)

    def aside(self) -> ThreadPoolExecutor:
        return self.analyser.aside()


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


def two_scenes() -> tuple[Frame, Frame]:
    """One face on the left; then a second person on the right too."""
    left = cv2.resize(photo(CAMERA_PHOTO), (300, 360))
    right = cv2.resize(photo(SOURCE_PHOTO), (300, 360))
    one = np.full((480, 720, 3), 90, np.uint8)
    one[60:420, 20:320] = left
    two = one.copy()
    two[60:420, 400:700] = right
    return one, two


@pytest.mark.parametrize("aside", [False, True])
def test_a_keyframe_detection_runs_aside_and_the_new_face_joins(
    analyser: FaceAnalyser, aside: bool
) -> None:
    one, two = two_scenes()
    spy = SpyAnalyser(analyser)
    tracker = FaceTracker(
        cast(FaceAnalyser, spy), TrackerOptions(detect_every=5, detect_aside=aside)
    )
    try:
        for index in range(5):
            assert len(tracker.update(one, index)) == 1
        # frame 5: a keyframe, and a second person has come in
        found = tracker.update(two, 5)
        if not aside:
            assert len(found) == 2  # the frame waited for the detection
            assert spy.threads == ["MainThread", "MainThread"]
            return
        assert len(found) == 1  # the frame went on with the face it follows
        index, deadline = 6, time.monotonic() + 10
        while len(found) < 2:
            assert time.monotonic() < deadline, "the new face never joined"
            time.sleep(0.02)
            found = tracker.update(two, index)
            index += 1
        assert {face.track_id for face in found} == {0, 1}
        assert len(spy.threads) == 2
        assert all(name.startswith("tracker-detect") for name in spy.threads)
    finally:
        tracker.close()
