"""EFA-capable instance types: what the node groups and job sizing need to know.

Network cards = EFA interfaces a node gets and the `vpc.amazonaws.com/efa` count a
pod must request. Prices: on-demand, us-east-1, Linux, USD per hour, as published
around PRICES_AS_OF; they were not re-read from the AWS price list in this
repository's (offline) CI, so verify them before quoting.
"""

from dataclasses import dataclass
from enum import Enum

PRICES_AS_OF = "2026-11"


class Architecture(str, Enum):
    ARM64 = "arm64"
    X86_64 = "x86_64"


@dataclass(frozen=True)
class InstanceType:
    name: str
    architecture: Architecture
    vcpus: int
    memory_gib: int
    network_cards: int
    gpus: int
    hourly_usd: float

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


def _types(*rows: tuple[str, Architecture, int, int, int, int, float]) -> dict[str, InstanceType]:
    return {row[0]: InstanceType(*row) for row in rows}


ARM, X86 = Architecture.ARM64, Architecture.X86_64
EFA_INSTANCE_TYPES = _types(
    # Graviton3 / Graviton3E / Graviton4: one network card each.
    ("c7g.16xlarge", ARM, 64, 128, 1, 0, 2.32),
    ("c7g.metal", ARM, 64, 128, 1, 0, 2.32),
    ("c7gd.16xlarge", ARM, 64, 128, 1, 0, 2.903),
    ("c7gn.16xlarge", ARM, 64, 128, 1, 0, 3.994),
    ("c7gn.metal", ARM, 64, 128, 1, 0, 3.994),
    ("c8g.24xlarge", ARM, 96, 192, 1, 0, 3.829),
    ("c8g.48xlarge", ARM, 192, 384, 1, 0, 7.658),
    ("hpc7g.4xlarge", ARM, 16, 128, 1, 0, 1.683),
    ("hpc7g.8xlarge", ARM, 32, 128, 1, 0, 1.683),
    ("hpc7g.16xlarge", ARM, 64, 128, 1, 0, 1.683),
    # NVIDIA GPUs.
    ("p4d.24xlarge", X86, 96, 1152, 4, 8, 32.773),
    ("p4de.24xlarge", X86, 96, 1152, 4, 8, 40.966),
    ("p5.48xlarge", X86, 192, 2048, 32, 8, 55.04),
    ("p5e.48xlarge", X86, 192, 2048, 32, 8, 63.296),
    ("p5en.48xlarge", X86, 192, 2048, 16, 8, 63.296),
    ("g5.8xlarge", X86, 32, 128, 1, 1, 2.448),
    ("g6.8xlarge", X86, 32, 128, 1, 1, 2.014),
)

# Small types for the `system` node group (no EFA).
SYSTEM_INSTANCE_TYPES = _types(
    ("m7g.large", ARM, 2, 8, 1, 0, 0.0816),
    ("m7g.xlarge", ARM, 4, 16, 1, 0, 0.1632),
    ("t4g.large", ARM, 2, 8, 1, 0, 0.0672),
)


def lookup(name: str) -> InstanceType | None:
    return EFA_INSTANCE_TYPES.get(name) or SYSTEM_INSTANCE_TYPES.get(name)
