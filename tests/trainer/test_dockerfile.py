"""The image definition agrees with the trainer's dependency set (it cannot be built here: no Docker engine)."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from eks_ddp.workloads.image import BUILD_ARGS, Accelerator

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "trainer" / "Dockerfile").read_text()
CUDA_DOCKERFILE = (ROOT / "trainer" / "Dockerfile.cuda").read_text()
BOTH = pytest.mark.parametrize("dockerfile", [DOCKERFILE, CUDA_DOCKERFILE], ids=["cpu", "cuda"])
REQUIREMENTS = [line.split("#")[0].strip() for line in (ROOT / "trainer" / "requirements.txt").read_text().splitlines()]
REQUIREMENTS = [line for line in REQUIREMENTS if line]


@BOTH
def test_torch_pin_matches_the_requirements(dockerfile: str) -> None:
    match = re.search(r"^ARG TORCH_VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert match is not None and f"torch=={match.group(1)}" in REQUIREMENTS


@BOTH
def test_runs_as_the_non_root_user_the_pods_and_the_volume_expect(dockerfile: str) -> None:
    from eks_ddp.infra.storage.shared_claim import SHARED_UID

    users = re.findall(r"^USER (\S+)$", dockerfile, re.MULTILINE)
    assert users and users[-1] == f"{SHARED_UID}:{SHARED_UID}" and f"useradd --uid {SHARED_UID} " in dockerfile
    assert "pip install -r /opt/eks-ddp/requirements.txt" in dockerfile


def test_the_gpu_image_has_cuda_nccl_and_the_efa_plugin() -> None:
    """The CPU wheel has no CUDA and no NCCL; without libfabric's EFA provider and aws-ofi-nccl, NCCL
    falls back to TCP sockets: the GPU image is a CUDA base, the matching CUDA wheel and the EFA installer."""
    cuda = re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:(\d+)\.(\d+)\.\d+-cudnn-runtime-ubuntu\S+$", CUDA_DOCKERFILE, re.M)
    index = re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cu(\d+)$", CUDA_DOCKERFILE, re.M)
    assert cuda and index and index.group(1) == cuda.group(1) + cuda.group(2)  # cu130 on a CUDA 13.0 base
    old_gpus = BUILD_ARGS[Accelerator.CUDA126]  # Volta and Pascal: the cu126 wheel on a CUDA 12.6 base
    assert old_gpus["TORCH_INDEX_URL"].endswith("/cu126") and ":12.6." in old_gpus["CUDA_IMAGE"]
    assert set(old_gpus) <= set(re.findall(r"^ARG (\w+)=", CUDA_DOCKERFILE, re.M))
    assert re.search(r"^ARG EFA_INSTALLER_VERSION=\d+\.\d+\.\d+$", CUDA_DOCKERFILE, re.M)
    assert "./efa_installer.sh -y -g -d --skip-kmod --skip-limit-conf --no-verify" in CUDA_DOCKERFILE
    assert "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib" in CUDA_DOCKERFILE  # where NCCL finds the plugin
    assert "assert torch.version.cuda" in CUDA_DOCKERFILE and "whl/cpu" not in CUDA_DOCKERFILE


def test_installs_the_trainer_set_only() -> None:
    """No Pulumi SDK in the image: the trainer never imports one, and every scale-up pulls the image."""
    assert not any(line.lower().startswith(("pulumi", "pyyaml", "docker")) for line in REQUIREMENTS)
    assert "pip install -r /opt/eks-ddp/requirements.txt" in DOCKERFILE and "pip install ." not in DOCKERFILE
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]["trainer"] == {
        "file": ["trainer/requirements.txt"]
    }
    assert not any(dependency.startswith("torch") for dependency in project["project"]["dependencies"])
    assert any(line.startswith("pulumi==") for line in (ROOT / "requirements.txt").read_text().splitlines())


def test_the_trainer_imports_nothing_outside_its_set() -> None:
    """What `python -m eks_ddp.trainer` loads: no Pulumi, no YAML, none of the program's packages."""
    probe = (
        "import sys, eks_ddp.trainer.cli, eks_ddp.trainer.training, eks_ddp.trainer.prepare, "
        "eks_ddp.trainer.evaluation; print(' '.join(sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    outside = ("pulumi", "pulumi_aws", "yaml", "docker", "eks_ddp.infra", "eks_ddp.workloads", "eks_ddp.stack")
    assert [name for name in loaded if name.startswith(outside + ("eks_ddp.policy", "eks_ddp.provider"))] == []
