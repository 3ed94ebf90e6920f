"""Turning SIGTERM (node drain, spot interruption, pod deletion) into a checkpoint and a retryable exit."""

import signal
from types import FrameType, TracebackType

# Kubeflow's ExitCode restart policy retries exit codes 128-255; 128+SIGTERM is also
# what a killed process reports, so every restart policy treats it as retryable.
RETRYABLE_EXIT_CODE = 128 + signal.SIGTERM


class TerminationRequested(Exception):
    """Raised after the checkpoint is written, to exit with RETRYABLE_EXIT_CODE."""


class StopSignals:
    """Records SIGTERM/SIGINT instead of dying, so the loop can stop at a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

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
            signal.signal(signum, handler)  # type: ignore[arg-type]
