"""Process-group setup from the torchrun contract and the few collectives the trainer uses.

Only the variables torchrun guarantees are read, so one image runs under plain
torchrun, a PyTorchJob (static Master+Worker or elastic) and a TrainJob. Without
torchrun (no WORLD_SIZE) the trainer is a single process with no process group,
and every collective here is a no-op.
"""

import datetime
import gc
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from eks_ddp.trainer.errors import PeerLost, UsageError

T = TypeVar("T")


@dataclass(frozen=True)
class Topology:
    """Where this process sits in the job, as torchrun describes it."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    restart_count: int = 0
    node_rank: int = 0
    """The pod's (torchrun's node's) rank: torchrun's GROUP_RANK, 0 without torchrun."""
    local_world_size: int = 1
    """Processes in this pod (torchrun's node): torchrun's LOCAL_WORLD_SIZE."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_node_main(self) -> bool:
        """The first process of its pod: the one that speaks for the pod (its metrics port)."""
        return self.local_rank == 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> "Topology":
        def read(name: str, default: int, minimum: int) -> int:
            raw = environ.get(name)
            if raw is None or raw == "":
                return default
            try:
                value = int(raw)
            except ValueError:
                raise UsageError(f"environment variable {name}={raw!r} is not an integer") from None
            if value < minimum:
                raise UsageError(f"environment variable {name}={value} must be >= {minimum}")
            return value

        topology = cls(
            rank=read("RANK", 0, 0),
            local_rank=read("LOCAL_RANK", 0, 0),
            world_size=read("WORLD_SIZE", 1, 1),
            restart_count=read("TORCHELASTIC_RESTART_COUNT", 0, 0),
            node_rank=read("GROUP_RANK", 0, 0),
            local_world_size=read("LOCAL_WORLD_SIZE", 1, 1),
        )
        if topology.rank >= topology.world_size:
            raise UsageError(f"environment variable RANK={topology.rank} must be < WORLD_SIZE={topology.world_size}")
        if topology.world_size > 1:
            for name in ("MASTER_ADDR", "MASTER_PORT"):
                if not environ.get(name):
                    raise UsageError(
                        f"environment variable {name} is not set but WORLD_SIZE={topology.world_size}; launch with torchrun"
                    )
        return topology


DEVICES = ("auto", "cpu", "cuda")


def pick_device(topology: Topology, requested: str = "auto") -> torch.device:
    """CUDA device LOCAL_RANK when there is a GPU (or `--device cuda`), else the CPU.

    A pod that was given GPUs asks for cuda: finding none is a broken image or node (a CPU wheel, no
    driver), and training on its CPUs instead would be slow and silent, so it stops with one line.
    """
    if requested == "cuda" and not torch.cuda.is_available():
        build = (
            f"torch {torch.__version__} was built without CUDA" if torch.version.cuda is None else "no GPU is visible"
        )
        raise UsageError(f"--device cuda: {build}; run an image with CUDA on a GPU node, or use --device cpu")
    if requested != "cpu" and torch.cuda.is_available():
        return torch.device("cuda", topology.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def backend_for(device: torch.device) -> str:
    """The process group's backend: gloo for CPU tensors always, NCCL for CUDA tensors on GPUs.

    NCCL serves CUDA tensors only (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp refuses others,
    "No backend type associated with device type cpu"), and the trainer sums CPU tensors too (epoch
    totals, the stop vote): one group with a backend per device type serves both.
    """
    return "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"


def served_devices(backend: str) -> set[str]:
    """Device types a backend string serves (c10d's `device:backend` list; a bare name serves its own)."""
    bare = {"gloo": {"cpu", "cuda"}, "nccl": {"cuda"}}
    if ":" not in backend:
        return bare.get(backend, set())
    return {pair.split(":")[0] for pair in backend.split(",")}


def start(topology: Topology, device: torch.device, timeout: datetime.timedelta) -> None:
    """Set intra-op threads and join the process group (`backend_for` the device).

    The timeout bounds every collective, so it must outlast the slowest checkpoint
    write: minutes, never seconds.
    """
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads:
        try:
            torch.set_num_threads(max(1, int(threads)))
        except ValueError:
            raise UsageError(f"environment variable OMP_NUM_THREADS={threads!r} is not an integer") from None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    pin_to_own_cpu(topology, device)
    if topology.world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend=backend_for(device), timeout=timeout)


def pin_to_own_cpu(topology: Topology, device: torch.device) -> set[int] | None:
    """Where the ranks of a pod on CPUs are exactly as many as the CPUs it may use, keep each on its own CPU: the
    CPU it pinned itself to, or None where it did not.

    The kernel otherwise moves the ranks and their collective threads (created after this, so pinned with them)
    between the CPUs, and each move leaves a rank's working set in another core's cache. Measured on this project's
    2-core VM (fp32 limited to AVX2, 2 ranks, 6,000 CIFAR-format images, 4 runs alternated with the previous
    commit): 1.004-1.031x images/s (median 1.012x). A pod that may use more CPUs than it has ranks (on EKS, every
    pod but those the static CPU manager gives whole CPUs to), and a rank on a GPU, are left to the kernel.
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if device.type != "cpu" or topology.local_world_size < 2 or topology.local_world_size != len(cpus):
        return None
    own = {cpus[topology.local_rank]}
    os.sched_setaffinity(0, own)
    return own


def stop() -> None:
    """Leave the process group; call it only after dropping the DDP wrapper (see `training.train`).

    Freed after the group is destroyed, DDP's C++ reducer drops the gloo group's last reference with
    the GIL held (pybind11 `class_<Reducer, shared_ptr<Reducer>>`, unlike the backends' own no-GIL
    destructor holders in torch/csrc/distributed/c10d/init.cpp): `~ProcessGroupGloo` then joins its
    worker thread, which may still be freeing its last finished work and need the GIL for a tensor's
    Python object. That deadlock, seen with gdb on torch 2.13.0 (pytorch/pytorch#56297 describes the
    class), kept about 1 finished rank in 25 alive until torchrun's exit barrier gave up. Destroyed
    here, the group goes with its Python object, whose destructor releases the GIL; `gc.collect`
    first frees a wrapper caught in a reference cycle.
    """
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def broadcast_object(value: T) -> T:
    """Rank 0's value on every rank (pickled; for small things such as a checkpoint)."""
    if not dist.is_initialized():
        return value
    box: list[T] = [value]  # rank 0's value replaces each other rank's in place
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_sum_(tensor: torch.Tensor) -> torch.Tensor:
    """Sum `tensor` over all ranks in place (and return it)."""
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank if `flag` is true on any rank: lets all ranks stop at the same step."""
    if not dist.is_initialized():
        return flag
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class StopVote:
    """Whether any rank was asked to stop, agreed on every step without stalling the step.

    Each step posts this rank's flag in an asynchronous MAX all-reduce of a CPU tensor (gloo serves
    it on every device, see `backend_for`) and reads the previous step's result, finished long
    before: every rank stops at the same step, one step after the signal, and the accelerator is
    never synchronised for it.
    """

    def __init__(self) -> None:
        self.pending: tuple[torch.Tensor, dist.Work] | None = None

    def poll(self, flag: bool) -> bool:
        """Post `flag`; True on every rank when a rank posted True one poll earlier."""
        if not dist.is_initialized():
            return flag
        decided = self.settle()
        value = torch.tensor([int(flag)])
        work = dist.all_reduce(value, op=dist.ReduceOp.MAX, async_op=True)
        assert work is not None  # async_op=True always returns the work handle
        self.pending = (value, work)
        return decided

    def settle(self) -> bool:
        """The outcome of the last post (False when none is pending); call it on every rank alike."""
        if self.pending is None:
            return False
        value, work = self.pending
        self.pending = None
        work.wait()
        return bool(value.item())


def broadcast_buffers_(module: torch.nn.Module) -> None:
    """Give every rank rank 0's buffers (batch-norm running statistics) in place."""
    if dist.is_initialized():
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)


# What the transports say when the rank at the other end is gone, and nothing else: gloo's
# tcp pair (gloo/transport/tcp/pair.cc), NCCL's ncclRemoteError, the collective timeout of
# gloo and of the NCCL watchdog, and the c10d store losing its master.
_PEER_GONE = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "remote process exited",
    "ncclremoteerror",
    "timed out waiting",
    "watchdog caught collective operation timeout",
)


def is_peer_loss(error: BaseException) -> bool:
    """Whether a failed collective means another rank vanished (retryable), not a bug or bad configuration."""
    message = str(error).lower()
    return isinstance(error, dist.DistNetworkError) or any(sign in message for sign in _PEER_GONE)


@contextmanager
def peers_guarded() -> Iterator[None]:
    """Turn a collective that failed because a peer died into PeerLost, a clear and retryable error.

    Only transport failures count: a configuration error (an NCCL invalid usage, a CPU tensor
    on an NCCL group) or a bug surfaces as itself, not as a lost peer to retry forever.
    """
    try:
        yield
    except (dist.DistError, RuntimeError) as error:
        if not dist.is_initialized() or not is_peer_loss(error):
            raise
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PeerLost(
            f"lost contact with another rank ({message}); rerun the job to resume from the last checkpoint"
        ) from error
