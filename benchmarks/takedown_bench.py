"""A takedown's scan and removal, in-process on SQLite and local files: ``--person`` jobs
(default 50) whose source is one person's photo (three photos of woman_a, each job's a
different resize and JPEG quality) and ``--others`` jobs (default 20) of other people, over
two tenants, written directly. Each round scans them with the person's descriptor as the
service does (sources reduced to 640 px before they are described) and as it would without
the reduction (the baseline), alternating the order (A B, B A, ...) so drift on a shared
machine hits both; then the removal of the matched jobs is timed once.

    .venv/bin/python benchmarks/takedown_bench.py [--person 50] [--others 20] [--rounds 2]

Measured on the shared 2-core development VM while other test runs used it (load 12 to 15),
50 + 20 jobs, 2 rounds: 640 px 78.6 s then 38.6 s, full size 51.7 s then 41.9 s (0.92, best
of each: the photos are at most 1024 px, so the reduction saves little; dlib's descriptor,
one image at a time, is most of it); 50/50 found and 0/20 others in every run; the removal of
the 50 jobs 1.15 s, no copy left. The same scan took 24 s in the test on a quieter machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import cv2

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.principal import Principal
from facegate.storage.local import LocalStore
from facegate.storage.tenant import TenantStore
from facegate.takedown.matching import DESCRIBE_SIDE, describe_image, scan
from facegate.takedown.repository import TakedownRepository
from facegate.takedown.service import open_case, remove_case
from facegate.takedown.tables import TakedownMatch
from facegate.tenancy.schemas import TenantSpec
from facegate.tenancy.service import TenancyService

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.takedown.takedownkit import add_job

PERSON = [
    "woman_a_selfie_frontal_01.jpg",
    "woman_a_frontal_blue_wall_02.jpg",
    "woman_a_fullbody_small_face_03.jpg",
]
OTHERS = [
    "man_frontal_glasses.jpg",
    "man_frontal_beard_closeup.jpg",
    "woman_b_frontal_dark_background.jpg",
    "woman_astronaut_frontal.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "woman_angled_looking_up.jpg",
    "small_face_man_on_stage.jpg",
]


def variant(name: str, index: int) -> bytes:
    image = cv2.imread(str(FACES / name))
    scale = 0.6 + 0.4 * ((index * 7) % 11) / 10
    resized = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(".jpg", resized, [cv2.IMWRITE_JPEG_QUALITY, 75 + index % 21])
    assert ok
    return encoded.tobytes()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--person", type=int, default=50)
    parser.add_argument("--others", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(like_a_facegate_process())
    engine = engine_runtime()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/facegate.db"
        migrate(url)
        sessions = create_session_factory(create_engine_from_url(url))
        store = TenantStore(LocalStore(Path(tmp) / "storage"))
        with session_scope(sessions) as session:
            for tenant in ("alpha", "beta"):
                TenancyService(session).create_tenant(TenantSpec.model_validate({"id": tenant}))
            person = [
                add_job(session, store, ("alpha", "beta")[i % 2], source=variant(PERSON[i % 3], i))
                for i in range(args.person)
            ]
            for i in range(args.others):
                add_job(session, store, ("alpha", "beta")[i % 2], source=variant(OTHERS[i % 7], i))
        probe = describe_image(engine, (FACES / PERSON[0]).read_bytes())
        sides: list[tuple[str, int | None]] = [
            (f"{DESCRIBE_SIDE} px", DESCRIBE_SIDE),
            ("full", None),
        ]
        times: dict[str, list[float]] = {label: [] for label, _ in sides}
        found: dict[str, int] = {}
        for round_ in range(args.rounds):
            for label, side in sides if round_ % 2 == 0 else sides[::-1]:
                with session_scope(sessions, read_only=True) as session:
                    started = time.perf_counter()
                    result = scan(
                        session, store, engine, probe, ["alpha", "beta"], describe_side=side
                    )
                    times[label].append(time.perf_counter() - started)
                matched = {m.item_id for m in result.matches}
                found[label] = len(matched & set(person))
                assert len(matched - set(person)) == 0, f"{label}: another person matched"
                print(
                    f"round {round_ + 1} {label:>7}: {times[label][-1]:6.2f} s, "
                    f"{found[label]}/{len(person)} found, 0/{args.others} others"
                )
        for label, values in times.items():
            print(f"{label:>7}: " + ", ".join(f"{v:.2f}" for v in values) + " s")
        new, base = min(times[sides[0][0]]), min(times["full"])
        print(f"scan {sides[0][0]} / full: {new / base:.2f} (best of {args.rounds})")
        admin = Principal(tenant_id="platform", scopes=frozenset({"admin"}), actor="bench")
        with session_scope(sessions) as session:
            case = open_case(session, "bench", tenant_id="alpha", job_id=person[0])
            rows = [
                TakedownMatch(case_id=case.id, item_id=job, kind="job", tenant_id=t, distance=0.3)
                for job, t in zip(
                    person, [("alpha", "beta")[i % 2] for i in range(len(person))], strict=True
                )
            ]
            TakedownRepository(session).replace_matches(case.id, rows)
            started = time.perf_counter()
            outcome = remove_case(session, store, admin, case.id)
        print(
            f"removal of {outcome['removed']['jobs']} jobs: {time.perf_counter() - started:.2f} s, "
            f"copies left {outcome['copies_left']}; load {load_average()}"
        )


if __name__ == "__main__":
    main()
