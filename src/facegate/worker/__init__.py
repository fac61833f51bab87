"""Workers: the loop that claims and runs jobs, the worker process, runners and probes.
A worker reaches the database only through facegate.queue."""
