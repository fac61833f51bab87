"""Jobs: endpoints, submission service, repository, schemas and the job model."""
