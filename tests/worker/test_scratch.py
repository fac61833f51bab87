"""A worker process's scratch folder: held while its owner lives, reclaimed once the owner
was SIGKILLed (a real process), never while it lives."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from facegate.worker.scratch import PREFIX, ScratchSpace, reclaim

HOLDER = """
import sys, time
from pathlib import Path
from facegate.worker.scratch import ScratchSpace
space = ScratchSpace(Path(sys.argv[1]))
path = space.open()
(space.job_folder("facegate-video-") / "target").write_bytes(b"partial")
print("PATH", path, flush=True)
time.sleep(120)
"""


def test_a_killed_owners_folder_is_reclaimed_and_a_live_one_is_not(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        while not line.startswith("PATH "):  # the worker's own log lines come first
            line = holder.stdout.readline()
        theirs = Path(line.removeprefix("PATH ").strip())
        mine = ScratchSpace(tmp_path)
        own = mine.open()
        assert list(theirs.glob("facegate-video-*/target"))
        assert reclaim(tmp_path) == []  # both owners alive
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert theirs.exists()  # a SIGKILL cleans up nothing
        assert reclaim(tmp_path) == [theirs]
        assert not theirs.exists()
        assert own.exists()
        job = mine.job_folder("facegate-video-")
        assert job.parent == own
        mine.close()
        assert not own.exists()
        assert list(tmp_path.glob(f"{PREFIX}*")) == []
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_opening_a_worker_scratch_reclaims_the_dead_ones(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}gone"
    dead.mkdir()
    (dead / ".owner").write_text("1\n")  # nobody holds its lock
    space = ScratchSpace(tmp_path)
    space.open()
    assert not dead.exists()
    space.close()


def test_an_unopened_space_uses_the_temporary_directory(tmp_path: Path) -> None:
    folder = ScratchSpace(tmp_path).job_folder("facegate-video-")
    try:
        assert folder.parent != tmp_path  # not inside any worker's folder
        assert folder.name.startswith("facegate-video-")
    finally:
        folder.rmdir()
