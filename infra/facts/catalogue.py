"""Instance facts known offline, for every EC2 instance type, and the prices we have read.

`pulumi up` takes an instance type's facts from EC2 (infra.facts.instance_facts); this table answers offline (the
mocks, the preview, the local run). The facts are data/instance-types.tsv, generated from EC2's own data as
Karpenter publishes it (infra.facts.generate names the sources; tests check it against them). Network cards = EFA
interfaces a node gets and the `vpc.amazonaws.com/efa` count a pod must request. Prices: on-demand, us-east-1,
Linux, USD per hour, from the table Karpenter v1.14.1 generates from the AWS Pricing API (data/prices-us-east-1.tsv,
generated on PRICES_AS_OF; infra.facts.generate): list prices, not what a reservation or a Savings Plan costs, and
not re-read in this repository's (offline) CI. A type without a price there (most are HPC types or sold only in
other regions) has an unknown price, and the cost estimate says so.
"""

import csv
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

PRICES_AS_OF = "2026-07-06"
TABLE = Path(__file__).resolve().parent / "data" / "instance-types.tsv"
PRICE_TABLE = TABLE.with_name("prices-us-east-1.tsv")


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


def _prices(table: Path = PRICE_TABLE) -> dict[str, float]:
    lines = [line for line in table.read_text().splitlines() if not line.startswith("#")]
    return {row["instance_type"]: float(row["usd_per_hour"]) for row in csv.DictReader(lines, delimiter="\t")}


PRICES = _prices()
"""On-demand, us-east-1, Linux, USD per hour (PRICES_AS_OF), by instance type."""


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
