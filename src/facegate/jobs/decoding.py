"""An uploaded image's full decode, run beside the rest of its submission.

The decode is the one check that reads every byte of an image (damage shows only there) and
the largest part of a submission's CPU. Its answer is needed only before the job's row
commits: the size, format and pixel limits come from the header, read first. So a
submission reads the header, starts the decode on this module's threads, writes the input
and runs its write transaction meanwhile, and waits for the decode before it commits: a
damaged image is still refused at submission (the transaction rolls back, the written input
is deleted), but the decode no longer adds its time to the request's. Pillow releases the
GIL while it decodes, so the two run at once on two cores.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from facegate.engine.image import ImageInfo, ImageLimits, verify_image

#: Decodes at once per process: more would only queue for the same cores.
DECODE_THREADS = 2
#: Only images up to this size are decoded beside the write: the write transaction may wait
#: for the decode at its end (on SQLite holding the write lock), so the wait must stay short
#: (~2 ms for a 256 KB JPEG here, about the transaction's own time); larger images are
#: decoded before the transaction opens, as the batch route does.
DECODE_BESIDE_MAX_BYTES = 256 * 1024
_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (the process that made it, the pool)


def _executor() -> ThreadPoolExecutor:
    """This process's pool (a forked child makes its own: the parent's threads are gone)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (
                os.getpid(),
                ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="upload-decode"),
            )
        return _pool[1]


def decode_beside(data: bytes, limits: ImageLimits) -> Future[ImageInfo]:
    """``verify_image(data, limits)`` on the decode threads; ``.result()`` raises what it
    raises (``CorruptMedia`` for a damaged image)."""
    return _executor().submit(verify_image, data, limits)
