"""Stopping a recorded process stops its whole group, not only its leader: a restart loop's shell ends at the first
SIGTERM while the manager it started may go on (Kueue v0.17.0 did, orphaned, at 60 % of a CPU)."""

import os
import shlex
import subprocess
import time
from pathlib import Path

from tests.cluster.control_plane import stop_recorded


def test_a_member_that_outlives_its_groups_leader_is_killed(tmp_path: Path) -> None:
    # The leader, like the restart loop, ends on SIGTERM; its child ignores SIGTERM, like a manager still shutting down.
    script = "trap '' TERM; echo $$ > child; exec sleep 60"
    leader = subprocess.Popen(["/bin/sh", "-c", f"/bin/sh -c {shlex.quote(script)} & wait"], cwd=tmp_path,
                              start_new_session=True)
    (tmp_path / "pids").write_text(f"{leader.pid} manager\n")
    deadline = time.monotonic() + 10
    while not (tmp_path / "child").exists() or not (tmp_path / "child").read_text().strip():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int((tmp_path / "child").read_text())
    assert stop_recorded(tmp_path, grace_s=0.5) == ["manager"]
    deadline = time.monotonic() + 5
    while True:
        try:
            os.kill(child, 0)
            state = Path(f"/proc/{child}/stat").read_text().split()[2]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, f"pid {child} still runs after stop_recorded (state {state})"
        time.sleep(0.05)
    leader.wait(timeout=5)  # reaped already by stop_recorded, as its child
