"""The preview and the rehearsal run a user's own Pulumi program (its directory or its file), not eks-ddp's.

Each runs in its own process from the program's directory, as `pulumi up` would: the example has its own `infra`
package, which must not meet this repository's in the test process.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from eks_ddp.tools.pulumi_program import Program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_program"


def _tool(module: str, *args: str, cwd: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", f"eks_ddp.tools.{module}", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_users_program_previews_with_its_tree_cost_and_manifests(tmp_path: Path) -> None:
    done = _tool("preview", "--stack", "prod", "--manifests", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Program research-training, stack prod:")
    assert "\neksddp:index:TrainJob  llm\n" in done.stdout and "Node groups" not in done.stdout  # not eks-ddp's config
    assert "54.894  NodeGroup research-gpu-nodes (p4de.24xlarge, scaled up for the pods): 2 x 27.4471" in done.stdout
    assert (tmp_path / "trainjob-training-llm.yaml").is_file()


def test_a_users_program_is_rehearsed_from_elsewhere_by_its_path() -> None:
    done = _tool("rehearsal", "--program", str(EXAMPLE), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "research-training prod: 17 rules, idempotence, every rule holds" in done.stderr


def test_a_program_file_runs_without_a_project(tmp_path: Path) -> None:
    program = tmp_path / "platform.py"
    program.write_text(
        "from eks_ddp.infra.platform import TrainingPlatform\n"
        "TrainingPlatform('solo', {'network': {'availability_zones': ['us-east-1a', 'us-east-1b']}, 'storage': 'none'})\n"
    )
    done = _tool("preview", "--program", str(program), "--stack", "any", "--manifests", str(tmp_path / "m"), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Program platform, stack any:") and "EKS control plane: 1 x 0.1000" in done.stdout


def test_a_directory_without_a_project_is_one_line(tmp_path: Path) -> None:
    done = _tool("preview", "--program", str(tmp_path), cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --program {tmp_path}: no Pulumi.yaml there (a Pulumi program's directory has one)"
    with pytest.raises(FileNotFoundError, match=r"__main__.py not found \(the file `pulumi up` would run\)"):
        (tmp_path / "Pulumi.yaml").write_text("name: empty\nruntime: python\n")
        Program.at(tmp_path)
