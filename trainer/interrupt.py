"""Turning SIGTERM (node drain, spot interruption, pod deletion) into a checkpoint and a retryable exit."""

import signal
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeAlias

# Kubeflow's ExitCode restart policy retries exit codes 128-255; 128+SIGTERM is also
# what a killed process reports, so every restart policy treats it as retryable.
RETRYABLE_EXIT_CODE = 128 + signal.SIGTERM

Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What `signal.signal` takes and returns (typeshed's `_HANDLER`, which the signal module does not define)."""


class TerminationRequested(Exception):
    """Raised after the checkpoint is written, to exit with RETRYABLE_EXIT_CODE."""


class StopSignals:
    """Records SIGTERM/SIGINT instead of dying, so the loop can stop at a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Handler] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum

    @property
    def requested(self) -> bool:
        return self.received is not None

    def __enter__(self) -> "StopSignals":
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
