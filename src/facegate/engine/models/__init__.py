"""Models: the store (name/tag -> verified files), the inference pool (shared sessions) and the
FaceFusion-format pre/post-processing around each model's ``forward_<model>()``."""
