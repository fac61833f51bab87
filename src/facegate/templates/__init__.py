"""Job templates: a tenant's saved processor pipeline, options and face mapping (saved faces
by name), validated once at save and used by jobs and batches (``template``)."""
