"""Instance facts known offline: what node groups and job sizing need, with dated prices.

`pulumi up` takes an instance type's facts from EC2 (infra.facts.instance_facts); this table
answers offline (the mocks, the preview, the local run) and prices the cost estimate.
Network cards = EFA interfaces a node gets and the `vpc.amazonaws.com/efa` count a pod
must request. Prices: on-demand, us-east-1, Linux, USD per hour, as published around
PRICES_AS_OF; they were not re-read from the AWS price list in this repository's
(offline) CI, so verify them before quoting. Tests compare the cards and EFA support
with EC2's and the EFA device plugin's data (../shared/reference/).
"""

from dataclasses import dataclass
from enum import Enum

PRICES_AS_OF = "2026-11"


class Architecture(str, Enum):
    """An instance type's CPU architecture, in EC2's spelling."""

    ARM64 = "arm64"
    """Graviton."""
    X86_64 = "x86_64"
    """Intel and AMD."""


@dataclass(frozen=True)
class InstanceType:
    name: str
    architecture: Architecture
    vcpus: int
    memory_gib: float
    network_cards: int
    gpus: int
    hourly_usd: float | None
    """On-demand list price; None when unknown (a type EC2 described but the catalogue lacks)."""
    efa: bool = False
    """Whether the type supports EFA."""
    gpu_model: str = ""
    """The accelerator's name (A100, H100, ...); empty without GPUs."""
    assumed: str = ""
    """What was guessed because neither EC2 nor the catalogue answered (empty when nothing was)."""

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


ARM, X86 = Architecture.ARM64, Architecture.X86_64
EFA, NO_EFA = True, False


def _row(
    name: str,
    architecture: Architecture,
    vcpus: int,
    memory_gib: int,
    network_cards: int,
    gpus: int,
    hourly_usd: float,
    efa: bool,
    gpu_model: str = "",
) -> tuple[str, InstanceType]:
    return name, InstanceType(name, architecture, vcpus, memory_gib, network_cards, gpus, hourly_usd, efa, gpu_model)


INSTANCE_TYPES = dict(
    [
        # Graviton3 / Graviton3E / Graviton4 with EFA: one network card each.
        _row("c7g.16xlarge", ARM, 64, 128, 1, 0, 2.32, EFA),
        _row("c7g.metal", ARM, 64, 128, 1, 0, 2.32, EFA),
        _row("c7gd.16xlarge", ARM, 64, 128, 1, 0, 2.903, EFA),
        _row("c7gn.16xlarge", ARM, 64, 128, 1, 0, 3.994, EFA),
        _row("c7gn.metal", ARM, 64, 128, 1, 0, 3.994, EFA),
        _row("c8g.24xlarge", ARM, 96, 192, 1, 0, 3.829, EFA),
        _row("c8g.48xlarge", ARM, 192, 384, 1, 0, 7.658, EFA),
        _row("hpc7g.4xlarge", ARM, 16, 128, 1, 0, 1.683, EFA),
        _row("hpc7g.8xlarge", ARM, 32, 128, 1, 0, 1.683, EFA),
        _row("hpc7g.16xlarge", ARM, 64, 128, 1, 0, 1.683, EFA),
        # x86 with EFA, no GPU.
        _row("c5n.18xlarge", X86, 72, 192, 1, 0, 3.888, EFA),
        # NVIDIA GPUs with EFA.
        _row("p3dn.24xlarge", X86, 96, 768, 1, 8, 31.212, EFA, "V100"),
        _row("p4d.24xlarge", X86, 96, 1152, 4, 8, 32.773, EFA, "A100"),
        _row("p4de.24xlarge", X86, 96, 1152, 4, 8, 40.966, EFA, "A100"),
        _row("p5.48xlarge", X86, 192, 2048, 32, 8, 55.04, EFA, "H100"),
        _row("p5e.48xlarge", X86, 192, 2048, 32, 8, 63.296, EFA, "H200"),
        _row("p5en.48xlarge", X86, 192, 2048, 16, 8, 63.296, EFA, "H200"),
        _row("g5.8xlarge", X86, 32, 128, 1, 1, 2.448, EFA, "A10G"),
        _row("g6.8xlarge", X86, 32, 128, 1, 1, 2.014, EFA, "L4"),
        # No EFA: system nodes and the workshops' CPU nodes.
        _row("m7g.large", ARM, 2, 8, 1, 0, 0.0816, NO_EFA),
        _row("m7g.xlarge", ARM, 4, 16, 1, 0, 0.1632, NO_EFA),
        _row("t4g.large", ARM, 2, 8, 1, 0, 0.0672, NO_EFA),
        _row("t4g.small", ARM, 2, 2, 1, 0, 0.0168, NO_EFA),
        _row("m5.large", X86, 2, 8, 1, 0, 0.096, NO_EFA),
        _row("m5.xlarge", X86, 4, 16, 1, 0, 0.192, NO_EFA),
        _row("c5.2xlarge", X86, 8, 16, 1, 0, 0.34, NO_EFA),
        _row("c5.4xlarge", X86, 16, 32, 1, 0, 0.68, NO_EFA),
    ]
)
EFA_INSTANCE_TYPES = {name: facts for name, facts in INSTANCE_TYPES.items() if facts.efa}


def lookup(name: str) -> InstanceType | None:
    return INSTANCE_TYPES.get(name)
