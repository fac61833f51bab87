"""Tenant models as a service: what is installed for a tenant, uploads of private ONNX models
(``/v1/models``), and the model request a tenant's job runs with."""
