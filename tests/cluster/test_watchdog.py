"""tests/cluster/watchdog.py: a command past its bound is stopped, and the report says what was running."""

import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pulumi.automation import CommandError
from pulumi.automation._cmd import CommandResult

from tests.cluster import watchdog
from tests.cluster.kubectl import Kubectl

NO_CLUSTER = Kubectl(Path("/nonexistent/kubectl"), Path("/nonexistent/kubeconfig"))
CROWD = 120
"""Idle threads beside the test's, as a test worker holding the Pulumi SDK's thread pools has: more than the 100 that
faulthandler's dump stops at, which left this test's own thread out of the report in CI."""


def _quit_as_go_does() -> None:
    """SIGQUIT ends the stand-in, as Go's runtime ends the CLI (printing its goroutines) whatever its parent ignored
    (os/signal: only SIGHUP and SIGINT stay ignored); a test worker may ignore SIGQUIT, and its children would too."""
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _run_as_the_automation_api_would(executable: Path, seconds: str) -> None:
    """The process run to its end; a non-zero exit raised as the Automation API raises it."""
    done = subprocess.run([str(executable), seconds], capture_output=True, text=True, timeout=60,
                          preexec_fn=_quit_as_go_does)
    if done.returncode:
        raise CommandError(CommandResult(done.stdout, done.stderr or f"exit {done.returncode}", done.returncode))


def test_a_command_past_its_bound_is_stopped_and_reported(tmp_path: Path) -> None:
    cli = tmp_path / "pulumi"  # a stand-in that hangs: `sleep`, named as the CLI is
    shutil.copy(shutil.which("sleep") or "/bin/sleep", cli)
    report = tmp_path / "hung.txt"
    idle = threading.Event()
    crowd = [threading.Thread(target=idle.wait, daemon=True) for _ in range(CROWD)]
    for thread in crowd:
        thread.start()
    started = time.monotonic()
    try:
        with pytest.raises(watchdog.Hung, match=f"pulumi up of dev ran past 1 s: {report}"):
            with watchdog.bounded("pulumi up of dev", 1.0, [cli], NO_CLUSTER, report):
                _run_as_the_automation_api_would(cli, "30")
    finally:
        idle.set()
    assert time.monotonic() - started < 1.0 + 2 * watchdog.QUIT_S + 5
    text = report.read_text()
    assert text.startswith("pulumi up of dev: still running after 1 s")
    assert "test_a_command_past_its_bound_is_stopped_and_reported" in text  # this thread's stack, waiting
    assert "== kubectl get all -A -o wide\n(FileNotFoundError" in text  # no cluster: said, not raised
    assert "== the CLI's output and goroutines" in text


def test_a_command_within_its_bound_is_left_alone(tmp_path: Path) -> None:
    cli = tmp_path / "pulumi"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", cli)
    report = tmp_path / "hung.txt"
    with pytest.raises(CommandError):  # its own failure stays its own
        with watchdog.bounded("pulumi up of dev", 30.0, [cli], NO_CLUSTER, report):
            _run_as_the_automation_api_would(cli, "not-a-number")
    with watchdog.bounded("pulumi up of dev", 30.0, [cli], NO_CLUSTER, report):
        _run_as_the_automation_api_would(cli, "0.1")
    assert not report.exists()
