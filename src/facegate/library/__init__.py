"""A tenant's face library: source faces saved once (the image, the chosen face, its
prepared swap source and identity embedding, a name, labels, its consent record) and
referenced by id from jobs instead of being uploaded again."""
