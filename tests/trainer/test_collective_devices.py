"""Every collective the trainer issues gets a tensor its process group serves (NCCL serves CUDA tensors only).

A sitecustomize wraps torch.distributed's collectives in each rank of a real 2-rank run and records
each tensor's device with the group's backend. On this CPU machine the group is gloo; the GPU pods'
group is `backend_for(cuda)`, which must serve the same CPU tensors (epoch totals, accuracy counts,
the stop vote) as well as CUDA ones: with the former `nccl`, every multi-GPU run died at the end of
its first epoch.
"""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer.distributed import Topology, backend_for, pick_device, served_devices
from eks_ddp.trainer.errors import UsageError
from tests.conftest import ROOT, trainer_command, trainer_env

RECORDER = """
import json, os

from eks_ddp.trainer.startup import frozen_imports

with frozen_imports():  # torch's import, frozen as the trainer's own (this runs first, in every process)
    import torch.distributed as dist

LOG = os.environ["COLLECTIVES_LOG"]


def _wrap(name):
    original = getattr(dist, name)

    def recorded(*args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if hasattr(a, "device")]
        group = kwargs.get("group")
        with open(f"{LOG}.{os.getpid()}", "a") as log:
            log.write(json.dumps({"call": name, "devices": [t.device.type for t in tensors],
                                  "backend": str(dist.get_backend(group))}) + "\\n")
        return original(*args, **kwargs)

    setattr(dist, name, recorded)


for _name in ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "reduce"):
    _wrap(_name)
"""


def test_every_collective_tensor_is_served_by_its_group_here_and_on_gpus(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(RECORDER)
    env = {**trainer_env(), "PYTHONPATH": f"{hooks}:{ROOT}", "COLLECTIVES_LOG": str(tmp_path / "calls")}
    args = ["train", "--dataset", "digits", "--epochs", "2", "--batch-size", "32"]
    args += ["--output-dir", str(tmp_path / "run")]
    completed = subprocess.run(trainer_command(args, 2), env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    calls = [json.loads(line) for log in tmp_path.glob("calls.*") for line in log.read_text().splitlines()]
    assert {call["call"] for call in calls} >= {"all_reduce", "broadcast"}  # the stop vote, the epoch sums, the buffers
    unserved = [call for call in calls if not set(call["devices"]) <= served_devices(call["backend"])]
    assert unserved == []
    used = {device for call in calls for device in call["devices"]}
    assert used == {"cpu"}
    assert used | {"cuda"} <= served_devices(backend_for(torch.device("cuda")))
    assert not served_devices("nccl") >= used  # the rule the former backend broke


@pytest.mark.parametrize(
    ("built_with", "reason"),
    [(None, r"torch .* was built without CUDA"), ("13.0", "no GPU is visible")],
    ids=["cpu-wheel", "cuda-wheel-no-gpu"],
)
def test_a_pod_given_gpus_stops_with_one_line_when_cuda_is_absent(
    monkeypatch: pytest.MonkeyPatch, built_with: str | None, reason: str
) -> None:
    """Either wheel on a node without a GPU: the CPU-only one (an image built wrong) or PyPI's CUDA one (no driver)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", built_with)
    with pytest.raises(UsageError, match=rf"^--device cuda: {reason}; run an image with CUDA on a GPU node"):
        pick_device(Topology(), "cuda")
    assert pick_device(Topology(), "auto").type == "cpu"
