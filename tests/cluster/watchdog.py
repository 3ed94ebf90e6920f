"""A bound on one Pulumi command of the tests, and what was going on when it was exceeded.

A `pulumi up` that hangs would otherwise hold a test until pytest's timeout, which says only where the test waited.
Past the bound, `bounded` writes a report (every Python thread's stack, the inline program's included; the cluster's
objects and events), then sends SIGQUIT to the provider plugins and the Pulumi CLI, whose Go runtimes print every
goroutine to their stderr and exit: the CLI shows a plugin's stderr in its output, and the Automation API keeps the
CLI's output and stderr in the CommandError, which the report ends with. The caller gets `Hung`, naming the report.
"""

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pulumi.automation import CommandError

from tests.cluster.kubectl import Kubectl


QUIT_S = 2.0
"""Time for a Go process to print its goroutines and for the CLI to pass a plugin's on."""


class Hung(Exception):
    """A Pulumi command ran past its bound; the report says what every part was doing."""


def processes_of(executable: Path) -> list[int]:
    """The pids of the running processes started from `executable` (as named on their command line)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if argv0 == str(executable):
            pids.append(int(entry.name))
    return pids


def _threads() -> str:
    """Every thread's stack, the most recent call last (faulthandler's dump stops at 100 threads, and a test worker
    holding the SDK's thread pools has more)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "".join(f"\nThread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame))}"
                   for ident, frame in sys._current_frames().items())


def _report(path: Path, what: str, seconds: float, kubectl: Kubectl) -> None:
    with path.open("w") as out:
        out.write(f"{what}: still running after {seconds:.0f} s ({time.strftime('%H:%M:%S')})\n\n")
        out.write("== every Python thread of the test process\n")
        out.write(_threads())
        for args in (("get", "all", "-A", "-o", "wide"), ("get", "events", "-A", "--sort-by=.lastTimestamp")):
            out.write(f"\n== kubectl {' '.join(args)}\n")
            try:
                out.write(kubectl.run(*args, timeout=30))
            except Exception as error:  # noqa: BLE001 - a report of a hang must not hang or fail on its own
                out.write(f"({type(error).__name__}: {error})\n")


@contextmanager
def bounded(what: str, seconds: float, executables: list[Path], kubectl: Kubectl, report: Path) -> Iterator[None]:
    """Run the block; past `seconds`, write `report` and stop the processes of `executables` with SIGQUIT, in turn
    (the plugins before the CLI that shows their output), turning the CommandError that follows into Hung."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        _report(report, what, seconds, kubectl)
        for executable in executables:
            for pid in processes_of(executable):
                os.kill(pid, signal.SIGQUIT)
            time.sleep(QUIT_S)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except CommandError as error:
        if not fired.is_set():
            raise
        timer.join()
        with report.open("a") as out:
            out.write(f"\n== the CLI's output and goroutines\n{error}\n")
        raise Hung(f"{what} ran past {seconds:.0f} s: {report}") from error
    finally:
        timer.cancel()
