"""Errors a user can act on: printed as one line, never as a traceback."""


class UsageError(Exception):
    """Bad input: names the flag or file, the bad value and what is allowed."""


class CheckpointError(Exception):
    """A checkpoint that cannot be used (corrupt, truncated, or from another run)."""


class PeerLost(Exception):
    """Another rank vanished mid-collective (node lost, pod killed): retry from the last checkpoint."""


class DownloadError(Exception):
    """A dataset file could not be fetched or did not match its published checksum."""
