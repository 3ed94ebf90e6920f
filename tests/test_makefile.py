"""The Makefile a new user meets first: a plain `make` lists what it can do, and the set-up refuses a Python older
than the README's minimum in one line, before it creates anything."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    """make in this repository; PYTHON=false so that a target needing the environment fails at once, never builds."""
    return subprocess.run(
        ["make", "--no-print-directory", "PYTHON=false", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_a_plain_make_and_make_help_list_every_described_target(tmp_path: Path) -> None:
    described = re.findall(r"^## ([a-z-]+): (.+)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert {"demo", "preview", "rehearse", "test", "help"} <= {name for name, _ in described}
    plain, help_ = _make(f"VENV={tmp_path}/venv"), _make("help")
    assert plain.returncode == 0 and plain.stdout == help_.stdout, plain.stdout + plain.stderr
    listed = {line.split(maxsplit=1)[0]: line.split(maxsplit=1)[1] for line in help_.stdout.splitlines()[1:]}
    assert listed == dict(described)
    assert not (tmp_path / "venv").exists()


def test_the_set_up_refuses_an_older_python_in_one_line(tmp_path: Path) -> None:
    old = tmp_path / "python3"
    old.write_text('#!/bin/sh\necho "Python 3.11.2"\n')  # Debian 12's
    old.chmod(0o755)
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", "--no-print-directory", f"PYTHON={old}", f"VENV={venv}", f"{venv}/.installed-eks-ddp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == "", done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"PYTHON={old} is Python 3.11.2; the set-up needs Python 3.11.4 or later" in done.stderr
    assert not venv.exists()
