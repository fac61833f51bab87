"""Model infrastructure: the store (name/tag -> verified files), its manifests and built-ins,
tag pins and A/B splits, the inference pool (shared sessions) and the hub that joins them."""
