"""Errors a user can act on: printed as one line, never as a traceback."""

import argparse
from typing import NoReturn

USAGE_EXIT_CODE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump) so logs stay readable; the trainer's and the stack tools'
    command lines use it."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT_CODE, f"error: {message} (see {self.prog} --help)\n")


class UsageError(Exception):
    """Bad input: names the flag or file, the bad value and what is allowed."""


class CheckpointError(Exception):
    """A checkpoint that cannot be used (corrupt, truncated, or from another run)."""


class PeerLost(Exception):
    """Another rank vanished mid-collective (node lost, pod killed): retry from the last checkpoint."""


class DownloadError(Exception):
    """A dataset file could not be fetched or did not match its published checksum."""
