"""Batch jobs: one source (uploaded, or faces of the library) × many targets in one
submission. Each item is an ordinary job, so fair scheduling, the tenant's caps, moderation,
marking and metering apply to it as to any job; the batch adds progress across items,
cancel, a streamed ZIP of the results and the ``batch.completed`` webhook."""
