"""The job queue as a port: the fair claim, leases, the reaper, notifications and worker
heartbeats, on SQLite, PostgreSQL or in memory."""
