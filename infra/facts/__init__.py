"""What the components know offline: instance types, what a node offers pods, and every pinned version."""
