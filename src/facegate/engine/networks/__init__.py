"""Per-network code: the FaceFusion-format pre/post-processing around each model's
``forward_<model>()``, the I/O contracts an uploaded model must meet, and the ONNX swap
backends."""
