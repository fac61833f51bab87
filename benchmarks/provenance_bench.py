"""Provenance marks: watermark survival, false detections, and what marking costs.

1. Survival: every test photo (../shared/data/faces) swapped with one source face (photos
   without a face stay as they are), marked with a 64-bit payload (serial + 40-bit MAC; and,
   as the baseline in the same run, the old public layout: installation id + serial +
   CRC-24, read with its own Chase decoder), saved as a JPEG result
   (quality 95), then put through what shared copies go through (JPEG 70, resize to 50 %,
   a 10 % crop centred and from a corner, brightness +-10 %). Recovery = the exact payload
   read back. Beside it, the two methods of the invisible-watermark package and the
   blind-watermark package, each as it is meant to be used (64 bits at full resolution, its
   own bit order and decisions), on the same results; and the marks' PSNR.
1b. Survival by size (``--only sizes``): the same results scaled to each of ``--widths``
   before marking, four random serials each, through JPEG 70, resize to 50 % and a 10 %
   centred crop (a copy's JPEG at 90): where a small result's mark stops surviving.
2. False detections: every unmarked photo, every unmarked swap result and every frame of
   the test clips (``make_face_clip``, 2 s at 30 fps, 640x360): any payload read is a false
   detection (a MAC that verifies; for the baseline, a CRC that passes, and one naming the
   installation).
3. Cost per 1080p image job: its engine work (decode, swap, encode) unmarked (baseline) vs
   marked (+ watermark + C2PA signature), alternated in one run.
4. Cost per video: a 720p clip through ``Pipeline.run_video`` with and without the
   watermark (fps ratio), and the C2PA signature of the result; then the result re-encoded
   with H.264 at a lower bitrate (whole clip, and a 3 s cut from its middle) and read back.

The machine is shared: the load average is printed; compare ratios within one run.

    .venv/bin/python benchmarks/provenance_bench.py [--clips 3] [--video-seconds 4]
        [--only survival,sizes,false,image,video] [--no-packages] [--widths 256,320,400,480]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
import cv2
import numpy as np
import numpy.typing as npt

from benchkit import (
    FACES,
    engine_runtime,
    like_a_facegate_process,
    load_average,
    median_seconds,
    read_frame,
)
from facegate.engine.errors import NoFaceDetected
from facegate.engine.image import ImageLimits, encode_image, load_image
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.types import Frame
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.engine.watermark import (
    VideoWatermark,
    candidate_views,
    embed_watermark,
    package_module,
    watermark_scores,
)
from facegate.provenance.keys import create_keys
from facegate.provenance.manifest import manifest_definition, sign_bytes, sign_file
from facegate.provenance.payload import LENGTH, Payload, decode_any, encode_payload
from facegate.provenance.reading import read_video_watermark

PHOTOS = sorted(p for p in FACES.glob("*") if p.suffix in {".jpg", ".png"})
SOURCE = FACES / "man_frontal_glasses.jpg"
TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
INSTALLATION = 0xFACE
KEY = bytes(range(32))  # the watermark key of the benchmark's installation
SWAP = PipelineSpec.model_validate({"processors": ["face_swapper"]})
ENGINE = engine_runtime()


def jpeg(frame: Frame, quality: int) -> Frame:
    encoded = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])[1]
    return np.asarray(cv2.imdecode(encoded, cv2.IMREAD_COLOR), dtype=np.uint8)


def crop_centre(frame: Frame) -> Frame:
    h, w = frame.shape[:2]
    return frame[round(h * 0.05) : h - round(h * 0.05), round(w * 0.05) : w - round(w * 0.05)]


def crop_corner(frame: Frame) -> Frame:
    h, w = frame.shape[:2]
    return frame[round(h * 0.1) :, round(w * 0.1) :]


TRANSFORMS: dict[str, Callable[[Frame], Frame]] = {
    "as saved": lambda f: f,
    "JPEG 70": lambda f: jpeg(f, 70),
    "resize 50%": lambda f: np.asarray(
        cv2.resize(f, (f.shape[1] // 2, f.shape[0] // 2), interpolation=cv2.INTER_AREA), np.uint8
    ),
    "crop 10% centre": crop_centre,
    "crop 10% corner": crop_corner,
    "brightness +10%": lambda f: np.asarray(cv2.convertScaleAbs(f, alpha=1.1), np.uint8),
    "brightness -10%": lambda f: np.asarray(cv2.convertScaleAbs(f, alpha=0.9), np.uint8),
}


def swap_results() -> list[Frame]:
    pipeline, source = ENGINE.pipeline(SWAP), read_frame(SOURCE)
    results = []
    for photo in PHOTOS:
        target = read_frame(photo)
        try:
            results.append(pipeline.run_image([source], target))
        except NoFaceDetected:
            results.append(target)
    return results


def read_ours(frame: Frame) -> Payload | None:
    return decode_any((watermark_scores(view, LENGTH) for view in candidate_views(frame)), KEY)


class LegacyPayload:
    """The payload before the MAC (the baseline): installation id (16) + serial (24) +
    CRC-24/OpenPGP (24), Chase-decoded over the 10 least certain bits, as it shipped."""

    @staticmethod
    def crc24(data: bytes) -> int:
        crc = 0xB704CE
        for byte in data:
            crc ^= byte << 16
            for _ in range(8):
                crc <<= 1
                if crc & 0x1000000:
                    crc ^= 0x864CFB
        return crc & 0xFFFFFF

    @classmethod
    def encode(cls, installation: int, serial: int) -> npt.NDArray[np.uint8]:
        body = (installation << 24) | serial
        word = (body << 24) | cls.crc24(body.to_bytes(5, "big"))
        return np.array([(word >> (63 - i)) & 1 for i in range(64)], dtype=np.uint8)

    @classmethod
    def decode(cls, scores: npt.NDArray[np.float64]) -> tuple[int, int] | None:
        word = int("".join(str(int(b)) for b in (scores > 0.5)), 2)
        doubt = np.argsort(np.abs(scores - 0.5), kind="stable")[:10]
        for mask in sorted(range(1 << 10), key=lambda m: (bin(m).count("1"), m)):
            trial = word
            for position, index in enumerate(doubt):
                if mask >> position & 1:
                    trial ^= 1 << (63 - int(index))
            body = trial >> 24
            if cls.crc24(body.to_bytes(5, "big")) == trial & 0xFFFFFF:
                return body >> 24, body & 0xFFFFFF
        return None

    @classmethod
    def read(cls, frame: Frame) -> tuple[int, int] | None:
        for view in candidate_views(frame):
            found = cls.decode(watermark_scores(view, LENGTH))
            if found is not None:
                return found
        return None


class PackageMethod:
    """invisible-watermark's dwtDct / dwtDctSvd as documented: full resolution, 64 bits."""

    def __init__(self, name: str) -> None:
        self.name = name
        module = package_module("dwtDctSvd" if name == "dwtDctSvd" else "maxDct")
        self.cls = module.EmbedDwtDctSvd if name == "dwtDctSvd" else module.EmbedMaxDct

    def embed(self, frame: Frame, bits: npt.NDArray[np.uint8]) -> Frame:
        marked = self.cls(watermarks=[int(b) for b in bits], wmLen=LENGTH).encode(frame.copy())
        return np.asarray(np.clip(marked, 0, 255), dtype=np.uint8)

    def read(self, frame: Frame, bits: npt.NDArray[np.uint8]) -> bool:
        read_bits = np.asarray(self.cls(watermarks=[], wmLen=LENGTH).decode(frame), np.uint8)
        return bool(np.array_equal(read_bits, bits))


class BlindWatermark:
    """blind-watermark 0.4.4 as documented (DWT-DCT-SVD at full resolution, 64 bits,
    single process, its k-means bit extraction)."""

    name = "blind-watermark"

    def __init__(self) -> None:
        from blind_watermark import WaterMark, bw_notes

        bw_notes.close()  # the package prints a notice on first use otherwise
        self.cls = WaterMark

    def embed(self, frame: Frame, bits: npt.NDArray[np.uint8]) -> Frame:
        marker = self.cls(password_wm=1, password_img=1)
        marker.read_img(img=frame)
        marker.read_wm([bool(b) for b in bits], mode="bit")
        return np.asarray(np.clip(np.rint(marker.embed()), 0, 255), dtype=np.uint8)

    def read(self, frame: Frame, bits: npt.NDArray[np.uint8]) -> bool:
        reader = self.cls(password_wm=1, password_img=1)
        soft = reader.extract(embed_img=frame, wm_shape=LENGTH, mode="bit")
        return bool(np.array_equal(np.asarray(soft) >= 0.5, bits.astype(bool)))


def survival(results: list[Frame], with_packages: bool = True) -> None:
    names = list(TRANSFORMS)
    ours = dict.fromkeys(names, 0)
    legacy = dict.fromkeys(names, 0)
    psnr, embed_ms, legacy_psnr = [], [], []
    packages: list[PackageMethod | BlindWatermark] = (
        [PackageMethod("dwtDct"), PackageMethod("dwtDctSvd"), BlindWatermark()]
        if with_packages
        else []
    )
    theirs = {p.name: dict.fromkeys(names, 0) for p in packages}
    their_psnr: dict[str, list[float]] = {p.name: [] for p in packages}
    their_ms: dict[str, list[float]] = {p.name: [] for p in packages}
    for serial, result in enumerate(results, start=1):
        bits = encode_payload(KEY, serial)
        start = time.perf_counter()
        marked = embed_watermark(result, bits)
        embed_ms.append((time.perf_counter() - start) * 1000)
        psnr.append(cv2.PSNR(result, marked))
        saved = jpeg(marked, 95)
        old = embed_watermark(result, LegacyPayload.encode(INSTALLATION, serial))
        legacy_psnr.append(cv2.PSNR(result, old))
        old_saved = jpeg(old, 95)
        for name, transform in TRANSFORMS.items():
            ours[name] += read_ours(transform(saved)) == Payload(serial)
            legacy[name] += LegacyPayload.read(transform(old_saved)) == (INSTALLATION, serial)
        for package in packages:
            start = time.perf_counter()
            their = package.embed(result, bits)
            their_ms[package.name].append((time.perf_counter() - start) * 1000)
            their_psnr[package.name].append(cv2.PSNR(result, their))
            their_saved = jpeg(their, 95)
            for name, transform in TRANSFORMS.items():
                theirs[package.name][name] += package.read(transform(their_saved), bits)
    count = len(results)
    print(f"\nwatermark recovery over {count} results (exact 64-bit payload)  [{load_average()}]")
    header = f"{'':22}" + "".join(f"{n:>17}" for n in names) + f"{'PSNR dB':>10}{'embed ms':>10}"
    print(header)

    def row(label: str, hits: dict[str, int], db: list[float], ms: list[float]) -> None:
        cells = "".join(f"{f'{hits[n]}/{count} {hits[n] / count:.0%}':>17}" for n in names)
        print(f"{label:22}{cells}{statistics.mean(db):>10.1f}{statistics.median(ms):>10.0f}")

    row("facegate (serial+MAC)", ours, psnr, embed_ms)
    row("before: id+serial+CRC", legacy, legacy_psnr, embed_ms)
    for package in packages:
        name = package.name
        row(f"package {name}", theirs[name], their_psnr[name], their_ms[name])


SIZE_TRANSFORMS: dict[str, Callable[[Frame], Frame]] = {
    "JPEG 70": TRANSFORMS["JPEG 70"],
    "resize 50%": lambda f: jpeg(TRANSFORMS["resize 50%"](f), 90),
    "crop 10% centre": lambda f: jpeg(crop_centre(f), 90),
}


def survival_by_size(results: list[Frame], widths: list[int], serials: int = 4) -> None:
    rng = np.random.default_rng(7)
    print(f"\nwatermark recovery by result width ({serials} random serials a result)")
    print(f"{'width':>8}" + "".join(f"{n:>17}" for n in SIZE_TRANSFORMS))
    for width in widths:
        hits, count = dict.fromkeys(SIZE_TRANSFORMS, 0), 0
        for result in results:
            height = round(result.shape[0] * width / result.shape[1])
            scaled = np.asarray(
                cv2.resize(result, (width, height), interpolation=cv2.INTER_AREA), np.uint8
            )
            for serial in rng.integers(0, 1 << 24, serials):
                saved = jpeg(embed_watermark(scaled, encode_payload(KEY, int(serial))), 95)
                count += 1
                for name, transform in SIZE_TRANSFORMS.items():
                    hits[name] += read_ours(transform(saved)) == Payload(int(serial))
        cells = "".join(f"{f'{hits[n]}/{count} {hits[n] / count:.0%}':>17}" for n in hits)
        print(f"{width:>8}{cells}", flush=True)


def false_detections(results: list[Frame], folder: Path, clips: int) -> None:
    frames = [read_frame(p) for p in PHOTOS] + results
    for photo in PHOTOS[:clips]:
        clip = folder / f"{photo.stem}.mp4"
        make_face_clip(clip, photo, ClipSpec(audio=False))
        with av.open(str(clip)) as container:
            frames += [
                np.asarray(f.to_ndarray(format="bgr24"), np.uint8)
                for f in container.decode(video=0)
            ]
        clip.unlink()
    found = [read_ours(frame) for frame in frames]
    anything = sum(p is not None for p in found)
    before = [LegacyPayload.read(frame) for frame in frames]
    crc = sum(p is not None for p in before)
    named = sum(p is not None and p[0] == INSTALLATION for p in before)
    print(
        f"\nfalse detections on unmarked pictures: {anything} of {len(frames)} with a MAC "
        f"that verifies ({len(PHOTOS)} photos, {len(results)} swap results, "
        f"{len(frames) - len(PHOTOS) - len(results)} frames of {clips} test clips); "
        f"before (CRC-24): {crc} passing the CRC, {named} naming the installation "
        f"[{load_average()}]"
    )


def image_cost(folder: Path, runs: int) -> None:
    """An image job's engine work (what ``EngineRunner`` does: decode the uploads, swap,
    encode the JPEG result) unmarked and marked, alternated in one run so both see the same
    machine; the watermark and the signature timed alone beside them."""
    keys = create_keys(folder / "keys")
    target_bytes = cv2.imencode(".jpg", cv2.resize(read_frame(TARGET), (1920, 1080)))[1].tobytes()
    source_bytes = SOURCE.read_bytes()
    limits = ImageLimits()
    pipeline = ENGINE.pipeline(SWAP)
    bits = encode_payload(KEY, 1)
    definition = manifest_definition("urn:facegate:face:bench", ["face_swapper"])

    def job(marked: bool) -> bytes:
        target = load_image(target_bytes, limits).frame
        source = load_image(source_bytes, limits).frame
        frame = pipeline.run_image([source], target)
        if marked:
            frame = embed_watermark(frame, bits)
        data = encode_image(frame, "jpeg", 90)
        return sign_bytes(keys, data, "jpeg", definition) if marked else data

    job(True)  # warm-up
    plain, marked = [], []
    for _ in range(runs):
        plain.append(median_seconds(lambda: job(False), 1))
        marked.append(median_seconds(lambda: job(True), 1))
    base, with_marks = statistics.median(plain), statistics.median(marked)
    target = load_image(target_bytes, limits).frame
    mark = median_seconds(lambda: embed_watermark(target, bits), runs)
    data = encode_image(target, "jpeg", 90)
    sign = median_seconds(lambda: sign_bytes(keys, data, "jpeg", definition), runs)
    print(
        f"\nper 1080p image job (decode, swap, encode): {base * 1000:.0f} ms unmarked "
        f"(baseline), {with_marks * 1000:.0f} ms marked: +{with_marks / base - 1:.1%}; alone: "
        f"watermark {mark * 1000:.1f} ms + C2PA signature {sign * 1000:.1f} ms = "
        f"{(mark + sign) / base:.1%} of the unmarked job  [{load_average()}]"
    )


def reencode(src: Path, dst: Path, bitrate: int, start: float = 0.0, seconds: float = 0.0) -> None:
    with av.open(str(src)) as source, av.open(str(dst), "w") as out:
        stream_in = source.streams.video[0]
        stream = out.add_stream("libx264", rate=stream_in.average_rate)
        stream.width, stream.height = stream_in.width, stream_in.height
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = bitrate
        for frame in source.decode(video=0):
            t = float(frame.time or 0.0)
            if t < start or (seconds and t >= start + seconds):
                continue
            fresh = av.VideoFrame.from_ndarray(frame.to_ndarray(format="bgr24"), format="bgr24")
            for packet in stream.encode(fresh):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def video_cost(folder: Path, seconds: float) -> None:
    keys = create_keys(folder / "video-keys")
    clip = folder / "clip.mp4"
    make_face_clip(clip, TARGET, ClipSpec(seconds=seconds, width=1280, height=720, audio=False))
    source = read_frame(SOURCE)
    bits = encode_payload(KEY, 7)
    timings: dict[str, float] = {}
    for label, finish in (("plain", None), ("marked", VideoWatermark(bits)), ("plain2", None)):
        dst = folder / f"{label}.mp4"
        start = time.perf_counter()
        result = ENGINE.pipeline(SWAP).run_video([source], clip, dst, finish_frame=finish)
        timings[label] = result.frames / (time.perf_counter() - start)
    plain = (timings["plain"] + timings["plain2"]) / 2
    marked_path = folder / "marked.mp4"
    definition = manifest_definition("urn:facegate:face:bench", ["face_swapper"])
    start = time.perf_counter()
    sign_file(keys, marked_path, "mp4", definition)
    sign = time.perf_counter() - start
    print(
        f"\nper 720p video ({seconds:g} s): {plain:.1f} fps unmarked (baseline, mean of a run "
        f"before and after), {timings['marked']:.1f} fps with the watermark: "
        f"{timings['marked'] / plain:.2f}x the fps; C2PA signature of the result "
        f"{sign * 1000:.0f} ms  [{load_average()}]"
    )
    size = marked_path.stat().st_size
    rate = round(size * 8 / seconds)
    for label, bitrate, start_s, cut in (
        ("whole clip, H.264 at half the bitrate", rate // 2, 0.0, 0.0),
        ("whole clip, H.264 at a quarter of the bitrate", rate // 4, 0.0, 0.0),
        (
            "3 s from the middle, H.264 at half the bitrate",
            rate // 2,
            max(0.0, seconds / 2 - 1.5),
            3.0,
        ),
    ):
        copy = folder / "copy.mp4"
        reencode(marked_path, copy, bitrate, start_s, cut)
        with av.open(str(copy)) as container:
            frames = sum(1 for _ in container.decode(video=0))
            fps = float(container.streams.video[0].average_rate or 30)
        found = read_video_watermark(copy, frames, fps, KEY)
        ok = found.payload == Payload(7)
        print(
            f"  re-encoded, {label} ({bitrate // 1000} kb/s, {frames} frames): "
            f"payload {'recovered' if ok else 'NOT recovered'} from {found.frames_read} frames"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=3, help="test clips scanned for 2.")
    parser.add_argument("--video-seconds", type=float, default=4.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--only", default="survival,false,image,video", help="parts to run (comma-separated)"
    )
    parser.add_argument(
        "--widths", default="256,320,400,480,640", help="result widths for the sizes part"
    )
    parser.add_argument(
        "--no-packages", action="store_true", help="1. without the packages' methods"
    )
    args = parser.parse_args()
    print(like_a_facegate_process(), f"[{load_average()}]")
    with tempfile.TemporaryDirectory(prefix="facegate-provenance-") as scratch:
        folder = Path(scratch)
        parts = set(args.only.split(","))
        if parts & {"survival", "sizes", "false"}:
            results = swap_results()
            if "survival" in parts:
                survival(results, with_packages=not args.no_packages)
            if "sizes" in parts:
                survival_by_size(results, [int(w) for w in args.widths.split(",")])
            if "false" in parts:
                false_detections(results, folder, args.clips)
        if "image" in parts:
            image_cost(folder, args.runs)
        if "video" in parts:
            video_cost(folder, args.video_seconds)


if __name__ == "__main__":
    main()
