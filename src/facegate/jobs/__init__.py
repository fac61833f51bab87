"""Jobs: model, repository, fair claim, leases, the worker loop and the reaper."""
