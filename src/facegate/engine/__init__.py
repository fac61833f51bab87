"""The face processing engine: a library that knows nothing of tenants or HTTP.

Frames are BGR uint8 numpy arrays (OpenCV convention), shape (H, W, 3).
"""
