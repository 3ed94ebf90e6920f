"""`python -m stack.local --stack dev`: the stack's PyTorchJob, run on this machine.

The job is rendered by the same function the PyTorchJob component applies; each
replica's container command then runs as a local process with the environment
the training operator injects (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and
torchrun's PET_* variables). Only five things change, each printed: the claim's
mount path maps to a local directory, the dataset becomes the offline `digits`,
torchrun's processes per pod and their threads fit this machine (the trainer keeps
the job's global batch, so the run is the cluster's), and the socket interface
becomes loopback; a GPU pod's `--device cuda` becomes `auto` (CUDA if this machine has it). Every
replica's init containers run first, side by side (the root step that hands the
claim's directories to the trainer's user included; `prepare-data` is skipped,
the offline dataset needs no download), and, when run as root, every container
runs as the pod's user on a claim directory that belongs to root (stack.local_pods).
Then the EvaluationJob runs the same way (its wait for training is skipped: here
the steps run in order).
"""

import argparse
import dataclasses
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.efa_node_group import node_labels
from infra.errors import InvalidArgument
from infra.instance_facts import offline
from stack import stack_file
from stack.config import ConfigError, parse
from stack.local_pods import (
    InitStep,
    init_steps,
    localize,
    pod_user,
    run_init_steps,
    user_home,
    wait_for_pods,
)
from stack.project_config import StackFileError
from workloads import batch_jobs, pytorchjob
from workloads.target import NodeTarget
from workloads.training_pod import SHARED_MOUNT

OFFLINE_DATASET = "digits"
LOCAL_DEVICE = "auto"


@dataclass(frozen=True)
class Replica:
    kind: str
    index: int
    command: list[str]
    env: dict[str, str]


def render_for(stack: str, project_dir: Path = stack_file.ROOT) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stack's PyTorchJob and EvaluationJob manifests, exactly as the stack renders them."""
    values, region = stack_file.load(stack, project_dir)
    config = parse(values, region)
    if config.job is None:
        raise ConfigError("eks-ddp:job", None, f"Pulumi.{stack}.yaml defines no job to run")
    spec = next(group for group in config.platform.get("node_groups", []) if group["name"] == config.job.node_group)
    instance = offline(spec["instance_type"])
    efa = spec.get("efa", True)
    target = NodeTarget(
        instance,
        instance.network_cards if efa else 0,
        node_labels(instance, efa, spec.get("labels", {})),
        [dict(t) for t in spec.get("taints", [])],
    )
    # Without shared storage the pods' /shared is scratch space and results go to S3; here one local
    # directory plays both (no S3 in the demo), so the job is rendered as if it had a claim.
    job = config.job.job if config.job.job.claim_name else dataclasses.replace(config.job.job, claim_name="scratch")
    return pytorchjob.render(job, target), batch_jobs.render_evaluation(job, target)


def _localize(command: list[str], shared: Path) -> list[str]:
    """Map the claim's mount path, pick the offline dataset, and find the executables here."""
    local = [localize(argument, shared) for argument in command]
    if "--dataset" in local:
        local[local.index("--dataset") + 1] = OFFLINE_DATASET
    if "--device" in local:  # a GPU pod's `--device cuda`: here, CUDA when this machine has it, else the CPU
        local[local.index("--device") + 1] = LOCAL_DEVICE
    executables = {"torchrun": str(Path(sys.executable).with_name("torchrun")), "python": sys.executable}
    return [executables.get(local[0], local[0]), *local[1:]]


def _pods(manifest: dict[str, Any]) -> list[tuple[str, int]]:
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    return [("Master", 0)] + [("Worker", index) for index in range(specs.get("Worker", {}).get("replicas", 0))]


def processes_per_pod(manifest: dict[str, Any]) -> int:
    """torchrun's processes per pod here: the cluster's (one per GPU), but no more than this machine's CPUs
    shared among the pods. The trainer keeps the job's global batch whatever the count (gradient accumulation)."""
    return max(1, min(int(manifest["spec"]["nprocPerNode"]), (os.cpu_count() or 1) // len(_pods(manifest))))


def describe_ranks(manifest: dict[str, Any]) -> str:
    """How many ranks run here, and how that differs from the cluster: never "2 replicas" while starting 16."""
    pods, here, there = len(_pods(manifest)), processes_per_pod(manifest), int(manifest["spec"]["nprocPerNode"])
    scaled = (
        "" if here == there else f"; {there} per pod in the cluster (one per GPU), scaled to {os.cpu_count()} CPUs here"
    )
    return f"{pods} replicas x {here} process(es) per pod = {pods * here} ranks{scaled}"


def replicas(manifest: dict[str, Any], shared: Path, port: int) -> list[Replica]:
    """One local process (torchrun) per pod, with the operator's environment for a static job."""
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    ordered = _pods(manifest)
    world, processes = len(ordered), processes_per_pod(manifest)
    threads = max(1, (os.cpu_count() or 1) // (world * processes))
    result = []
    for rank, (kind, index) in enumerate(ordered):
        container = specs[kind]["template"]["spec"]["containers"][0]
        env = {variable["name"]: variable["value"] for variable in container.get("env", [])}
        env.update(
            OMP_NUM_THREADS=str(threads),
            GLOO_SOCKET_IFNAME="lo",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            WORLD_SIZE=str(world),
            RANK=str(rank),
            PET_MASTER_ADDR="127.0.0.1",
            PET_MASTER_PORT=str(port),
            PET_NNODES=str(world),
            PET_NODE_RANK=str(rank),
            PET_NPROC_PER_NODE=str(processes),
            PYTHONUNBUFFERED="1",
        )
        result.append(Replica(kind, index, _localize(container["command"], shared), env))
    return result


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(stack: str, workdir: Path, project_dir: Path = stack_file.ROOT) -> int:
    job, evaluation = render_for(stack, project_dir)
    if "elasticPolicy" in job["spec"]:
        raise ConfigError(
            "eks-ddp:job.elasticMinReplicas",
            job["spec"]["elasticPolicy"]["minReplicas"],
            "the local run covers static jobs",
        )
    shared = workdir / "shared"
    shared.mkdir(parents=True, exist_ok=True)  # the claim's root: this process's, root's when run as root
    name = job["metadata"]["name"]
    processes = replicas(job, shared, _free_port())
    pods = [job["spec"]["pytorchReplicaSpecs"][replica.kind]["template"]["spec"] for replica in processes]
    user = pod_user(pods[0], workdir)
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    base.update(user_home(workdir, user))
    print(
        f"Running PyTorchJob {name} of stack {stack} locally: {describe_ranks(job)} (dataset -> {OFFLINE_DATASET}, "
        f"{SHARED_MOUNT} -> {shared}, OMP_NUM_THREADS={processes[0].env['OMP_NUM_THREADS']}, sockets on lo"
        f"{', --device cuda -> ' + LOCAL_DEVICE if '--device' in processes[0].command else ''})"
    )
    steps = [init_steps(pod, shared, skipped={"prepare-data"}) for pod in pods]
    print(
        f"Init containers, side by side in {len(pods)} pods: {_describe(steps[0])}; prepare-data skipped (offline dataset); "
        f"containers run as {user.describe()} on {shared} (owner uid {shared.stat().st_uid})"
    )
    if run_init_steps(steps, base, user):
        print(f"error: an init container of PyTorchJob {name} failed", file=sys.stderr)
        return 1
    print(f"$ {' '.join(processes[0].command)}", flush=True)
    running = [
        subprocess.Popen(
            user.wrap(replica.command),
            env={**base, **replica.env},
            stdout=None if replica.kind == "Master" else subprocess.DEVNULL,
            stderr=None if replica.kind == "Master" else subprocess.PIPE,
            text=True,
        )
        for replica in processes
    ]
    codes = wait_for_pods(running, pods[0].get("terminationGracePeriodSeconds", 30))
    if any(codes):
        for replica, process, code in zip(processes, running, codes, strict=True):
            if code and process.stderr is not None:
                sys.stderr.write(f"--- {replica.kind}-{replica.index} exited {code}:\n{process.stderr.read()[-3000:]}")
        print(f"error: PyTorchJob {name} failed (exit codes {codes})", file=sys.stderr)
        return 1
    pod = evaluation["spec"]["template"]["spec"]
    command = _localize(pod["containers"][0]["command"], shared)
    print(
        f"\nRunning Job {evaluation['metadata']['name']} locally (wait-for-training skipped: training has finished):"
        f"\n$ {' '.join(command)}",
        flush=True,
    )
    if run_init_steps([init_steps(pod, shared, skipped={"wait-for-training"})], base, user):
        return 1
    return subprocess.run(user.wrap(command), env=base).returncode


def _describe(steps: list[InitStep]) -> str:
    return ", ".join(f"{step.name}{' (as root)' if step.as_root else ''}" for step in steps) or "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stack.local", description="Run a stack's PyTorchJob and EvaluationJob on this machine."
    )
    parser.add_argument("--stack", default="dev")
    parser.add_argument(
        "--workdir", type=Path, help="where the claim's files go (default runs/local/<stack>, emptied first)"
    )
    parser.add_argument(
        "--project-dir", type=Path, default=stack_file.ROOT, help="directory with Pulumi.yaml and the stack files"
    )
    args = parser.parse_args(argv)
    workdir = args.workdir or Path("runs") / "local" / args.stack
    if args.workdir is None and workdir.exists():
        shutil.rmtree(workdir)  # the default directory belongs to this command
    try:
        return run(args.stack, workdir, args.project_dir)
    except (FileNotFoundError, ConfigError, InvalidArgument, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
