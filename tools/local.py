"""`python -m eks_ddp.tools.local --stack dev`: the stack's training job, run on this machine.

The job is rendered by the same functions its component applies (a PyTorchJob, a
TrainJob on its runtime, or an Indexed Job, per `eks-ddp:trainingOperator`); each
pod's container command then runs as a local process with the environment its
engine gives it (the training operator's MASTER_* and PET_* variables, or an elastic
PyTorchJob's PET_RDZV_* and PET_NNODES=min:max for torchrun's c10d rendezvous, the
Trainer's torch plugin's, or the Indexed Job's own, its completion index
resolved). Only six things change, each printed: the rendezvous address becomes
127.0.0.1 on a free port, the claim's mount path maps to a local directory, the
dataset becomes the offline `digits`,
torchrun's processes per pod and their threads fit this machine (the trainer keeps
the job's global batch, so the run is the cluster's), the socket interface
becomes loopback, and each pod's metrics port a free one of its own on 127.0.0.1; a GPU
pod's `--device cuda` becomes `auto` (CUDA if this machine has it). Every
replica's init containers run first, side by side (the root step that hands the
claim's directories to the trainer's user included; `prepare-data` is skipped,
the offline dataset needs no download), and, when run as root, every container
runs as the pod's user on a claim directory that belongs to root (stack.local_pods).
Then the EvaluationJob runs the same way (its wait for training is skipped: here
the steps run in order). Every input is checked before a file is touched, and a
failed run never costs the last good run's results (keeping_the_last_good_run).
"""

import contextlib
import copy
import dataclasses
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.instance_facts import offline
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.tools.local_pods import (
    InitStep,
    init_steps,
    localize,
    pod_user,
    security_note,
    run_init_steps,
    user_home,
    wait_for_pods,
)
from eks_ddp.stack.project_config import StackFileError
from eks_ddp.trainer.errors import OneLineParser
from eks_ddp.trainer.startup import freeze_imports
from eks_ddp.workloads import batch_jobs, indexed_job, preflight, pytorchjob, security, trainjob
from eks_ddp.workloads.target import NodeTarget, target_of
from eks_ddp.workloads.training_pod import COMPLETION_INDEX, SHARED_MOUNT, TrainingJob

OFFLINE_DATASET = "digits"
LOCAL_DEVICE = "auto"


@dataclass(frozen=True)
class Replica:
    index: int
    command: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class EngineJob:
    """A training job's pods as its engine creates them, in rank order, the engine's variables in its container."""

    kind: str
    name: str
    pods: list[dict[str, Any]]


def engine_job(operator: OperatorKind, job: TrainingJob, target: NodeTarget) -> EngineJob:
    """The pods the stack's operator would run: the PyTorchJob's, the TrainJob's JobSet's or the Indexed Job's."""
    if operator == OperatorKind.V1:
        return EngineJob(pytorchjob.KIND, job.name, pytorchjob.pod_specs(pytorchjob.render(job, target)))
    if operator == OperatorKind.V2:
        pod = trainjob.pod_spec(trainjob.render(job, target), trainjob.render_runtime(job, target))
        return EngineJob(trainjob.KIND, job.name, [copy.deepcopy(pod) for _ in range(job.replicas)])
    _, indexed = indexed_job.render(job, target)
    pods = [copy.deepcopy(indexed["spec"]["template"]["spec"]) for _ in range(job.replicas)]
    return EngineJob("Indexed Job", job.name, pods)


@dataclass(frozen=True)
class LocalJob:
    """The stack's training job as the local run renders it, and the nodes it targets."""

    operator: OperatorKind
    job: TrainingJob
    target: NodeTarget
    evaluate: bool


def local_job(stack: str, project_dir: Path = stack_file.ROOT, override: dict[str, str] | None = None) -> LocalJob:
    values, region = stack_file.load(stack, project_dir, override)
    config = parse(values, region)
    if config.job is None:
        raise ConfigError("eks-ddp:job", None, f"Pulumi.{stack}.yaml defines no job to run")
    job = config.job.resolved
    launched = job.code.launch() if job.code else []  # [script], or ["-m", module]
    if len(launched) == 1 and not Path(launched[0]).is_file():
        raise ConfigError(
            "eks-ddp:job.script",
            launched[0],
            f"the local run starts it from {Path.cwd()}, where there is no such file (in the cluster it comes from "
            "eks-ddp:image); copy your script here to run the job locally",
        )
    spec = config.job_shape({group.get("name", ""): group for group in config.platform.get("node_groups", [])})
    target = target_of(spec, offline(spec["instance_type"]))
    # Without shared storage the pods' /shared is scratch space and results go to S3; here one local
    # directory plays both (no S3 in the demo), so the job is rendered as if it had a claim.
    job = job if job.claim_name else dataclasses.replace(job, claim_name="scratch")
    return LocalJob(config.operator, job, target, config.job.evaluate)


def render_for(
    stack: str, project_dir: Path = stack_file.ROOT, override: dict[str, str] | None = None
) -> tuple[EngineJob, dict[str, Any] | None]:
    """The stack's training pods and EvaluationJob (None when the stack evaluates nothing: its own code does),
    exactly as the stack renders them."""
    local = local_job(stack, project_dir, override)
    evaluation = batch_jobs.render_evaluation(local.job, local.target) if local.evaluate else None
    return engine_job(local.operator, local.job, local.target), evaluation


def _localize(command: list[str], shared: Path) -> list[str]:
    """Map the claim's mount path, pick the offline dataset, and find the executables here."""
    local = [localize(argument, shared) for argument in command]
    if "--dataset" in local:
        local[local.index("--dataset") + 1] = OFFLINE_DATASET
    if "--device" in local:  # a GPU pod's `--device cuda`: here, CUDA when this machine has it, else the CPU
        local[local.index("--device") + 1] = LOCAL_DEVICE
    # The pod's metrics port, on loopback here (replicas gives each pod a port of its own).
    if "--metrics-port" in local:
        local += ["--metrics-address", "127.0.0.1"]
    executables = {"torchrun": str(Path(sys.executable).with_name("torchrun")), "python": sys.executable}
    return [executables.get(local[0], local[0]), *local[1:]]


def _engine_variable(job: EngineJob, name: str) -> str:
    """A variable the engine gives the job's first pod."""
    return next(e["value"] for e in job.pods[0]["containers"][0].get("env", []) if e["name"] == name)


def cluster_processes(job: EngineJob) -> int:
    """torchrun's processes per pod in the cluster, as the engine gives them (PET_NPROC_PER_NODE)."""
    return int(_engine_variable(job, "PET_NPROC_PER_NODE"))


def processes_per_pod(job: EngineJob) -> int:
    """torchrun's processes per pod here: the cluster's (one per GPU), but no more than this machine's CPUs
    shared among the pods. The trainer keeps the job's global batch whatever the count (gradient accumulation)."""
    return max(1, min(cluster_processes(job), (os.cpu_count() or 1) // len(job.pods)))


def describe_ranks(job: EngineJob) -> str:
    """How many ranks run here, and how that differs from the cluster: never "2 replicas" while starting 16."""
    pods, here, there = len(job.pods), processes_per_pod(job), cluster_processes(job)
    scaled = (
        "" if here == there else f"; {there} per pod in the cluster (one per GPU), scaled to {os.cpu_count()} CPUs here"
    )
    nodes = _engine_variable(job, "PET_NNODES")
    elastic = f"; elastic: torchrun's c10d rendezvous admits {nodes.replace(':', ' to ')} pods" if ":" in nodes else ""
    return f"{pods} replicas x {here} process(es) per pod = {pods * here} ranks{scaled}{elastic}"


def local_env(variables: list[dict[str, Any]], index: int, port: int, processes: int, pods: int) -> dict[str, str]:
    """The pod's variables here: the rendezvous (static or elastic) on 127.0.0.1:`port`, this machine's process
    count, and the Job controller's completion index where a variable reads it (the only field reference a
    training pod uses)."""
    local = {
        "MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "PET_MASTER_PORT": str(port),
        "PET_NPROC_PER_NODE": str(processes),
        "WORLD_SIZE": str(pods * processes),
        "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}",  # an elastic job's rendezvous, on Worker-0's port in the cluster
    }
    env = {}
    for variable in variables:
        if variable in security.SCRATCH_ENV:  # HOME on the pod's scratch volume: user_home's directory stands in
            continue
        name = variable["name"]
        if "valueFrom" in variable:
            path = variable["valueFrom"].get("fieldRef", {}).get("fieldPath")
            if path != COMPLETION_INDEX:
                raise ValueError(f"{name} reads {variable['valueFrom']}, which the local run cannot give")
            env[name] = str(index)
        else:
            env[name] = local.get(name, variable["value"])
    return env


def replicas(job: EngineJob, shared: Path, port: int) -> list[Replica]:
    """One local process (torchrun) per pod, with the variables its engine gives it, pointed at this machine. In the
    cluster each pod serves its metrics port on its own address; here the pods share loopback, so each serves a free
    port of its own (one port for all would leave every pod but one warning that it is taken)."""
    pods, processes = len(job.pods), processes_per_pod(job)
    threads = max(1, (os.cpu_count() or 1) // (pods * processes))
    metrics_ports = _free_ports(pods)
    result = []
    for index, pod in enumerate(job.pods):
        container = pod["containers"][0]
        env = {
            name: localize(value, shared)
            for name, value in local_env(container.get("env", []), index, port, processes, pods).items()
        }
        env.update(OMP_NUM_THREADS=str(threads), GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
        command = _localize(container["command"], shared)
        if "--metrics-port" in command:
            command[command.index("--metrics-port") + 1] = str(metrics_ports[index])
        result.append(Replica(index, command, env))
    return result


def metrics_ports(processes: list[Replica]) -> str:
    """Where the pods serve their metrics here, for the first line: ', metrics on 127.0.0.1:41003, 41007'."""
    ports = [p.command[p.command.index("--metrics-port") + 1] for p in processes if "--metrics-port" in p.command]
    return f", metrics on 127.0.0.1:{', '.join(ports)}" if ports else ""


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports free on loopback (each probe holds its port until all are chosen)."""
    with contextlib.ExitStack() as probes:
        sockets = [probes.enter_context(socket.socket()) for _ in range(count)]
        for probe in sockets:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in sockets]


def _free_port() -> int:
    return _free_ports(1)[0]


def run(stack: str, workdir: Path, project_dir: Path = stack_file.ROOT, override: dict[str, str] | None = None) -> int:
    """The stack's job and evaluation, run in `workdir`; 0 when both succeed."""
    job, evaluation = render_for(stack, project_dir, override)
    return run_rendered(stack, workdir, job, evaluation)


def run_rendered(stack: str, workdir: Path, job: EngineJob, evaluation: dict[str, Any] | None) -> int:
    """A job and evaluation already rendered (every input checked), run in `workdir`."""
    shared = workdir / "shared"
    shared.mkdir(parents=True, exist_ok=True)  # the claim's root: this process's, root's when run as root
    processes = replicas(job, shared, _free_port())
    user = pod_user(job.pods[0], workdir)
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    base.update(user_home(workdir, user))
    print(
        f"Running {job.kind} {job.name} of stack {stack} locally: {describe_ranks(job)} (dataset -> {OFFLINE_DATASET}, "
        f"{SHARED_MOUNT} -> {shared}, rendezvous on 127.0.0.1, OMP_NUM_THREADS={processes[0].env['OMP_NUM_THREADS']}, "
        f"sockets on lo{', --device cuda -> ' + LOCAL_DEVICE if '--device' in processes[0].command else ''}"
        f"{metrics_ports(processes)})"
    )
    skipped = {"prepare-data", preflight.CONTAINER, preflight.QUARANTINE}
    steps = [init_steps(pod, shared, skipped=skipped) for pod in job.pods]
    checked = any(c["name"] == preflight.CONTAINER for c in job.pods[0].get("initContainers", []))
    print(
        f"Init containers, side by side in {len(job.pods)} pods: {_describe(steps[0])}; prepare-data skipped "
        f"(offline dataset){'; gpu-preflight and its quarantine skipped (no GPUs or EFA here)' if checked else ''}; "
        f"containers run as {user.describe()} on {shared} (owner uid {shared.stat().st_uid})"
    )
    print(f"Security context: {security_note(user)}")
    if run_init_steps(steps, base, user):
        print(f"error: an init container of {job.kind} {job.name} failed", file=sys.stderr)
        return 1
    print(f"$ {' '.join(processes[0].command)}", flush=True)
    running = [
        subprocess.Popen(
            user.wrap(replica.command),
            env={**base, **replica.env},
            stdout=None if replica.index == 0 else subprocess.DEVNULL,
            stderr=None if replica.index == 0 else subprocess.PIPE,
            text=True,
        )
        for replica in processes
    ]
    codes = wait_for_pods(running, job.pods[0].get("terminationGracePeriodSeconds", 30))
    if any(codes):
        for replica, process, code in zip(processes, running, codes, strict=True):
            if code and process.stderr is not None:
                sys.stderr.write(f"--- pod {replica.index} exited {code}:\n{process.stderr.read()[-3000:]}")
        print(f"error: {job.kind} {job.name} failed (exit codes {codes})", file=sys.stderr)
        return 1
    if evaluation is None:
        return 0
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
    parser = OneLineParser(
        prog="python -m eks_ddp.tools.local", description="Run a stack's PyTorchJob and EvaluationJob on this machine."
    )
    parser.add_argument("--stack", default="dev")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where the claim's files go (default runs/local/<stack>, replaced when the run succeeds; a failed run "
        "goes to runs/local/<stack>.failed)",
    )
    parser.add_argument(
        "--project-dir", type=Path, default=stack_file.ROOT, help="directory with Pulumi.yaml and the stack files"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a stack key for this run, as `pulumi up --config` does (repeatable)",
    )
    args = parser.parse_args(argv)
    try:  # every input is checked before any file is touched
        job, evaluation = render_for(args.stack, args.project_dir, stack_file.overrides(args.config))
    except (FileNotFoundError, ConfigError, InvalidArgument, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.workdir is not None:
        return run_rendered(args.stack, args.workdir, job, evaluation)
    return keeping_the_last_good_run(
        Path("runs") / "local" / args.stack, lambda workdir: run_rendered(args.stack, workdir, job, evaluation)
    )


def _beside(workdir: Path, suffix: str) -> Path:
    return workdir.with_name(f"{workdir.name}.{suffix}")


def _move(source: Path, target: Path) -> None:
    """`source` (when there is one) to `target`, in place of what `target` held."""
    if source.exists():
        shutil.rmtree(target, ignore_errors=True)
        source.rename(target)


def keeping_the_last_good_run(workdir: Path, body: Callable[[Path], int]) -> int:
    """`body` run in a fresh `workdir` (the default one, which belongs to this command), without ever losing the
    last good run there: it waits in `<workdir>.previous` and is dropped only when the new run succeeds; a failed
    or interrupted run goes to `<workdir>.failed` (replacing an older failed one) and the good run comes back.

    A `.previous` found at the start is a good run whose successor was killed before it could put it back."""
    previous, failed = _beside(workdir, "previous"), _beside(workdir, "failed")
    if previous.exists():
        _move(workdir, failed)
        previous.rename(workdir)
    _move(workdir, previous)
    code = 1
    try:
        code = body(workdir)
    finally:
        if code == 0:
            shutil.rmtree(previous, ignore_errors=True)
        else:
            _move(workdir, failed)
            _move(previous, workdir)
            kept = f"; {workdir} keeps the last good run" if workdir.exists() else ""
            print(f"the failed run's files: {failed}{kept}", file=sys.stderr)
    return code


if __name__ == "__main__":
    freeze_imports()  # the Pulumi SDKs' objects, never examined again by the collector
    raise SystemExit(main())
