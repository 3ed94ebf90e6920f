"""A training job as the components take it (TrainingJobSpec) and as they read it (TrainingJob), and its rules.

The spec is plain data, the multi-language schema; `resolve` gives the frozen job with each default on its field.
`problems` is every rule a job must keep on the group it runs on, in one place: the components raise them with the
argument's path (`job.replicas`), the stack with its key (`eks-ddp:job.replicas`).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, NotRequired, TypedDict

import pulumi

from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.workloads.target import too_small

# The bundled trainer's `train --dataset` and `prepare-data --dataset` choices (workloads know its command line, not
# its code).
SHARED_MOUNT = "/shared"
"""Where every pod of a job mounts its claim (or scratch space): data, runs and checkpoints live under it."""
DATASETS = ("digits", "mnist", "cifar10", "synthetic")
DOWNLOADABLE_DATASETS = ("mnist", "cifar10")
MAX_NODE_LOSSES = 10


# Names the engines, torchrun or the pod template set: user code may not override them.
RESERVED_ENV = re.compile(
    r"(PET_|MASTER_|TORCHELASTIC_|TORCH_ELASTIC_|EKS_DDP_|FI_|NCCL_|WORLD_SIZE$|RANK$|LOCAL_RANK$)"
)


@dataclass(frozen=True)
class UserCode:
    """A UserCodeSpec resolved (the fields mean what the spec's say): what the pod template runs."""

    script: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def launch(self) -> list[str]:
        """What torchrun runs: the script, or `-m` and the module."""
        module = self.script.removeprefix("-m").strip()
        return ["-m", module] if self.script.startswith("-m") else [self.script]

    def problems(self) -> dict[str, str]:
        """Why the code cannot run as given, by field (`script`, `env`); empty when it can."""
        found = {}
        if not self.script.strip() or self.script.strip() == "-m":
            found["script"] = "name a Python file in the image, or -m and a module"
        env = self._env_problem()
        if env:
            found["env"] = env
        return found

    def _env_problem(self) -> str | None:
        reserved = sorted(name for name, _ in self.env if RESERVED_ENV.match(name))
        if reserved:
            return f"{', '.join(reserved)} are set by the engines, torchrun or the pod: use other names"
        invalid = sorted(name for name, _ in self.env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name))
        return f"{', '.join(invalid)} are not environment variable names" if invalid else None


@dataclass(frozen=True)
class TrainingJob:
    """A TrainingJobSpec with its defaults filled in (`resolve`): what the renderers read. The fields mean what the
    spec's say."""

    name: str
    namespace: str
    image: pulumi.Input[str]
    dataset: str = "mnist"
    epochs: int = 10
    batch_size: int = 128
    replicas: int = 2
    elastic_min_replicas: int | None = None
    max_restarts: int = 3
    claim_name: str | None = "shared"
    service_account: str | None = "trainer"
    checkpoint_every: int = 50
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    node_losses: int = 1
    code: UserCode | None = None
    preflight: bool = True
    artifact_bucket: pulumi.Input[str] | None = None
    queue: str | None = None
    queue_placement: str | None = None

    @property
    def elastic(self) -> bool:
        return self.elastic_min_replicas is not None

    def paths(self, run: str) -> dict[str, str]:
        """Data (per dataset), and the run's checkpoints and model (per job and run: `run_id`) on the claim."""
        return {
            "data": f"{SHARED_MOUNT}/data/{self.dataset}",
            "output": f"{SHARED_MOUNT}/runs/{self.name}/{run}",
            "checkpoints": f"{SHARED_MOUNT}/checkpoints/{self.name}/{run}",
        }


def validate_name(name: str) -> str | None:
    """Why `name` cannot name the job, or None.

    Every name the operators derive stays a 63-character DNS label: the PyTorchJob's services
    `<name>-worker-<i>`, JobSet's pods `<name>-node-0-<i>-<5 random>` (workloads.trainjob checks the
    exact length for the job's node count), the Indexed Job's pods `<name>-<i>-<5 random>`.
    """
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
        return "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"
    if len(name) > 48:
        return "must be at most 48 characters so `<name>-worker-<index>` stays a 63-character service name"
    return None


class UserCodeSpec(TypedDict):
    """The user's own training code in the job's image, run by torchrun instead of the bundled trainer.

    Everything the node group implies (GPU and EFA requests, processes per pod, /dev/shm, the claim, tolerations,
    the NCCL/EFA environment, the restart budget, the grace period) is derived as for the bundled trainer.
    """

    script: str
    """A Python file in the image (relative to its working directory, or absolute), or `-m package.module`."""
    args: NotRequired[Sequence[str]]
    """Its arguments."""
    env: NotRequired[Mapping[str, str]]
    """Extra environment variables; the engines' and torchrun's own names (PET_*, NCCL_*, FI_*, RANK...) are refused."""


class TrainingJobSpec(TypedDict):
    """What to train and how many pods: a job component's `job` (every unset field takes the default it names)."""

    name: str
    """The job's name: a DNS label, unique in its namespace."""
    namespace: str
    """The namespace its objects go in (the platform's training namespace)."""
    image: pulumi.Input[str]
    """Container image with the bundled trainer, or with the user's code when `code` is set."""
    dataset: NotRequired[str]
    """The bundled trainer's dataset: digits, mnist (default), cifar10 or synthetic."""
    epochs: NotRequired[int]
    """Passes over the training set (default 10)."""
    batch_size: NotRequired[int]
    """Images per rank per step (default 128)."""
    replicas: NotRequired[int]
    """Pods in all, one per node (default 2; elastic: the most)."""
    elastic_min_replicas: NotRequired[int]
    """Makes the job elastic (training operator v1 only) with at least this many pods."""
    max_restarts: NotRequired[int]
    """torchrun's restarts of the workers in a pod (default 3)."""
    claim_name: NotRequired[str | None]
    """The ReadWriteMany claim mounted at /shared (default `shared`; null: scratch space, then set artifact_bucket)."""
    service_account: NotRequired[str | None]
    """The pods' ServiceAccount (default `trainer`, the bucket's IRSA role; null: the namespace's default)."""
    checkpoint_every: NotRequired[int]
    """Steps between checkpoints (default 50)."""
    extra_args: NotRequired[Sequence[str]]
    """More arguments for the bundled trainer's `train` command."""
    node_losses: NotRequired[int]
    """Node losses (spot interruptions, failed nodes) the job survives before its operator fails it (default 1)."""
    code: NotRequired[UserCodeSpec]
    """The user's own training code instead of the bundled trainer."""
    preflight: NotRequired[bool]
    """GPU pods check their GPUs (DCGM level 1) and EFA devices before training (default true)."""
    artifact_bucket: NotRequired[pulumi.Input[str]]
    """S3 bucket the run uploads its results and checkpoints to and resumes from (the platform's model bucket)."""
    queue: NotRequired[str]
    """The Kueue LocalQueue the job waits in until all its pods fit (TrainingPlatform.submission; default: none, the
    job starts at once)."""
    queue_placement: NotRequired[str]
    """With `queue`: `required` or `preferred` to have all pods under one EC2 network node (TrainingPlatform.submission
    says which applies to the group)."""


def user_code(spec: UserCodeSpec) -> UserCode:
    """The user's code resolved: what the pod template runs, and what says whether it can run (`problems`)."""
    return UserCode(spec["script"], tuple(spec.get("args", ())), tuple(sorted(spec.get("env", {}).items())))


def resolve(spec: TrainingJobSpec) -> TrainingJob:
    """The job with every default filled in: what the renderers read."""
    fields: dict[str, Any] = {key: value for key, value in spec.items() if key not in ("code", "extra_args")}
    code = spec.get("code")
    return TrainingJob(
        **fields, extra_args=tuple(spec.get("extra_args", ())), code=user_code(code) if code is not None else None
    )


class Problem(NamedTuple):
    """A rule a job breaks: the field (a TrainingJobSpec path, `code.script`), its value, and what is allowed."""

    field: str
    value: object
    allowed: str


def problems(job: TrainingJob, group: str, max_pods: int, instance: InstanceType) -> list[Problem]:
    """Every rule `job` breaks on the group named `group` (at most `max_pods` nodes of `instance`), in the order a
    reader fixes them: the job's own fields, then the group's room."""
    found = [Problem("name", job.name, problem) for problem in [validate_name(job.name)] if problem]
    if job.dataset not in DATASETS:
        found.append(Problem("dataset", job.dataset, f"use one of {', '.join(DATASETS)}"))
    for name in ("epochs", "batch_size", "replicas", "checkpoint_every"):
        if getattr(job, name) < 1:
            found.append(Problem(name, getattr(job, name), "use a whole number >= 1"))
    if not 0 <= job.node_losses <= MAX_NODE_LOSSES:
        found.append(Problem("node_losses", job.node_losses, f"use 0 to {MAX_NODE_LOSSES} node losses"))
    found += [Problem(f"code.{name}", getattr(job.code, name), text) for name, text in _code_problems(job).items()]
    if instance.neuron_devices and job.code is None:
        found.append(Problem("code.script", None, f"node group {group} has {instance.neuron_devices} Neuron devices "
                             f"({instance.name}), which the bundled trainer does not run on: give your Neuron training "
                             "code, in an image with the Neuron SDK"))
    small = too_small(instance)
    if small:
        found.append(Problem("node_group", group, small))
    if job.replicas > max_pods:
        where = f"node group {group}" if group else "the node group"
        found.append(Problem("replicas", job.replicas, f"{where} holds at most {max_pods} pods, one per node"))
    return found + _elastic_problems(job)


def _code_problems(job: TrainingJob) -> dict[str, str]:
    return job.code.problems() if job.code is not None else {}


def _elastic_problems(job: TrainingJob) -> list[Problem]:
    """An elastic job's minimum, and the pod counts it may run on: each must share the full job's global batch evenly
    (the trainer keeps it on fewer pods, trainer/sampling.py), or a resize would be refused at run time."""
    minimum = job.elastic_min_replicas
    if minimum is None:
        return []
    if not 1 <= minimum <= job.replicas:
        return [Problem("elastic_min_replicas", minimum, f"use 1 to replicas ({job.replicas})")]
    batch, replicas = job.batch_size, job.replicas
    uneven = [pods for pods in range(minimum, replicas) if batch * replicas % pods]
    if not uneven:
        return []
    return [
        Problem(
            "elastic_min_replicas",
            minimum,
            f"{uneven[-1]} pods cannot share the job's global batch ({batch} per pod x {replicas} pods) evenly; use "
            f"{uneven[-1] + 1} or more, or a batch size that {uneven[-1]} pods can share",
        )
    ]
