"""Live face swap over WebRTC: a tenant's camera stream in, the swapped stream back."""
