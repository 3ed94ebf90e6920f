"""Instance facts known offline, for every EC2 instance type, and the prices we have read.

`pulumi up` takes an instance type's facts from EC2 (infra.facts.instance_facts); this table answers offline (the
mocks, the preview, the local run). The facts are data/instance-types.tsv, generated from EC2's own data as
Karpenter publishes it (infra.facts.generate names the sources; tests check it against them). Network cards = EFA
interfaces a node gets and the `vpc.amazonaws.com/efa` count a pod must request. Prices: on-demand, us-east-1,
Linux, USD per hour, as published around PRICES_AS_OF, for the types the stacks and tests use; they were not
re-read from the AWS price list in this repository's (offline) CI, so verify them before quoting. Any other type's
price is unknown, and the cost estimate says so.
"""

import csv
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

PRICES_AS_OF = "2026-11"
TABLE = Path(__file__).resolve().parent / "data" / "instance-types.tsv"


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
    """On-demand list price; None when unknown."""
    efa: bool = False
    """Whether the type supports EFA."""
    gpu_model: str = ""
    """The accelerator's name (A100, H100, ...); empty without GPUs."""
    gpu_maker: str = ""
    """Who makes its GPUs, in EC2's words lower-cased (nvidia, amd, habana); empty without GPUs."""
    neuron_devices: int = 0
    """AWS Trainium or Inferentia devices."""

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


# On-demand, us-east-1, Linux, USD per hour (PRICES_AS_OF).
PRICES = {
    "c7g.16xlarge": 2.32,
    "c7g.metal": 2.32,
    "c7gd.16xlarge": 2.903,
    "c7gn.16xlarge": 3.994,
    "c7gn.metal": 3.994,
    "c8g.24xlarge": 3.829,
    "c8g.48xlarge": 7.658,
    "hpc7g.4xlarge": 1.683,
    "hpc7g.8xlarge": 1.683,
    "hpc7g.16xlarge": 1.683,
    "c5n.18xlarge": 3.888,
    "p3dn.24xlarge": 31.212,
    "p4d.24xlarge": 32.773,
    "p4de.24xlarge": 40.966,
    "p5.48xlarge": 55.04,
    "p5e.48xlarge": 63.296,
    "p5en.48xlarge": 63.296,
    "g5.8xlarge": 2.448,
    "g6.8xlarge": 2.014,
    "m7g.large": 0.0816,
    "m7g.xlarge": 0.1632,
    "t4g.large": 0.0672,
    "t4g.small": 0.0168,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "c5.2xlarge": 0.34,
    "c5.4xlarge": 0.68,
}


def _load(table: Path = TABLE) -> dict[str, InstanceType]:
    lines = [line for line in table.read_text().splitlines() if not line.startswith("#")]
    types = {}
    for row in csv.DictReader(lines, delimiter="\t"):
        name = row["instance_type"]
        types[name] = InstanceType(
            name,
            Architecture(row["architecture"]),
            int(row["vcpus"]),
            int(row["memory_mib"]) / 1024,
            int(row["network_cards"]),
            int(row["gpus"]),
            PRICES.get(name),
            row["efa"] == "1",
            row["gpu_model"],
            row["gpu_maker"],
            int(row["neuron_devices"]),
        )
    return types


INSTANCE_TYPES = _load()
EFA_INSTANCE_TYPES = {name: facts for name, facts in INSTANCE_TYPES.items() if facts.efa}


def lookup(name: str) -> InstanceType | None:
    return INSTANCE_TYPES.get(name)
