"""Face swapping algorithms behind the ``face_swapper`` processor.

``backend`` is the port (``SwapBackend`` + registry); ``mesh_warp`` is the built-in
geometric backend, assembled from ``warp`` (piecewise-affine remap), ``symmetry`` (pose
fill), ``masks``, ``color`` (frequency separation + colour match) and ``blend``;
``occlusion`` finds what stays in front of a target face (for every backend).
"""
