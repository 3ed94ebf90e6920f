"""Your own training code (`eks-ddp:job.script`): deployed under mocks from your image with everything the node
group implies, refused in one line when it cannot run, and trained for real by the local run (Pulumi.own-code.yaml
and examples/own_training/train.py)."""

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from tests.conftest import ROOT
from tests.stack.registered import registered

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/own-training:1"
KINDS = {"v1": "PyTorchJob", "v2": "ClusterTrainingRuntime", "none": "Job"}


def _trainer_pod(operator: str) -> tuple[dict[str, Any], list[str]]:
    """The training pod as its engine builds it (v2: the runtime's, with the TrainJob's image and command)."""
    values, region = stack_file.load("own-code")
    registrations = registered({**values, "trainingOperator": operator}, region, "own-code")
    components = [r.type.rsplit(":", 1)[-1] for r in registrations if r.type.startswith("eksddp:index:")]
    manifest = next(r.inputs for r in registrations if r.inputs.get("kind") == KINDS[operator] and "train" in r.name)
    spec = manifest["spec"]
    if operator == "v1":
        return spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"], components
    if operator == "none":
        return spec["template"]["spec"], components
    pod = spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    trainer = next(r.inputs for r in registrations if r.inputs.get("kind") == "TrainJob")["spec"]["trainer"]
    pod["containers"][0].update(image=trainer["image"], command=trainer["command"])
    return pod, components


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_your_image_runs_your_script_with_everything_the_group_implies(operator: str) -> None:
    pod, components = _trainer_pod(operator)
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert container["command"] == ["torchrun", "examples/own_training/train.py", "--epochs", "30"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["LOG_LEVEL"] == "info"
    assert re.fullmatch(r"/shared/runs/own-training/[0-9a-f]{10}", env["EKS_DDP_OUTPUT_DIR"])
    assert env["EKS_DDP_CHECKPOINT_DIR"].startswith("/shared/checkpoints/own-training/")
    assert env["EKS_DDP_METRICS_PORT"] == "9300" and env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "105"
    assert {v["name"] for v in pod["volumes"]} >= {"dshm", "shared"}
    assert container["resources"]["requests"]["cpu"] and pod["terminationGracePeriodSeconds"] == 120
    assert [c["name"] for c in pod["initContainers"]] == ["volume-permissions"]  # no bundled prepare-data
    assert "EvaluationJob" not in components and "DataPrepJob" not in components
    assert "TrainerImage" not in components  # the stack builds nothing: the image is yours


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"image": None},
            "eks-ddp:job.script: 'examples/own_training/train.py' is not allowed; it runs in your own "
            "image: set eks-ddp:image to an image that contains it (the image the stack builds holds only the bundled "
            "trainer)",
        ),
        (
            {"job.script": None},
            "eks-ddp:job.args: ['--epochs', '30'] is not allowed; it goes with job.script: set job.script too",
        ),
        (
            {"job.env": {"MASTER_PORT": "1"}},
            "eks-ddp:job.env: {'MASTER_PORT': '1'} is not allowed; MASTER_PORT are set "
            "by the engines, torchrun or the pod: use other names",
        ),
        (
            {"job.evaluate": True},
            "eks-ddp:job.evaluate: True is not allowed; it runs the bundled trainer: a job with "
            "its own script prepares and evaluates in that script; leave it unset",
        ),
    ],
)
def test_code_that_cannot_run_is_one_line_naming_the_key(change: dict[str, Any], message: str) -> None:
    values, region = stack_file.load("own-code")
    values = {**values, "job": dict(values["job"])}
    for key, value in change.items():
        target, name = (values["job"], key.split(".")[1]) if key.startswith("job.") else (values, key)
        if value is None:
            target.pop(name)
            if name == "script":
                values["job"].pop("env")
        else:
            target[name] = value
    with pytest.raises(ConfigError) as error:
        parse(values, region)
    assert str(error.value) == message


def test_the_local_run_trains_the_example_script(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "eks_ddp.tools.local", "--stack", "own-code", "--workdir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("own script: test accuracy"))
    accuracy = float(line.split()[4])
    assert accuracy >= 0.93, line
    assert list(tmp_path.glob("shared/runs/own-training/*/model.pt"))
    print(f"\n{line}")
