"""What a stack costs per hour while it runs, from the catalogue's list prices.

On-demand, us-east-1, USD, as published around infra.catalogue.PRICES_AS_OF (not re-read from the
AWS price list here): verify before quoting. Data transfer, storage I/O, S3 and
CloudWatch usage are not included.
"""

from dataclasses import dataclass

from infra.cluster import DEFAULT_SYSTEM_INSTANCE_TYPE
from infra.instance_facts import offline
from infra.network import NatGateways
from infra.platform import AutoscalerKind, StorageKind, TrainingPlatformArgs

HOURS_PER_MONTH = 730
EKS_CONTROL_PLANE_HOURLY = 0.10  # standard support
NAT_GATEWAY_HOURLY = 0.045  # plus $0.045 per GB processed
FSX_GIB_MONTH = {
    ("SCRATCH_2", None): 0.140,
    ("PERSISTENT_2", 125): 0.145,
    ("PERSISTENT_2", 250): 0.210,
    ("PERSISTENT_2", 500): 0.340,
    ("PERSISTENT_2", 1000): 0.600,
}


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    unit_hourly: float

    @property
    def hourly(self) -> float:
        return self.quantity * self.unit_hourly


def estimate(platform: TrainingPlatformArgs) -> list[Line]:
    """One line per priced item: nodes at desired size, control plane, NAT gateways, FSx; a type the
    catalogue does not price gets a line that says so."""
    system_type = platform.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE)
    lines = [Line("EKS control plane", 1, EKS_CONTROL_PLANE_HOURLY)]
    nodes = [(f"system nodes ({system_type})", system_type, platform.get("system_node_count", 2))]
    # Karpenter keeps no idle nodes: its nodes cost only while pods need them, counted here at the desired size.
    karpenter = platform.get("autoscaler") == AutoscalerKind.KARPENTER
    counted = "Karpenter, only while pods need them; desired size" if karpenter else "desired size"
    for group in platform.get("node_groups", []):
        desired, instance_type = group.get("desired_size", group.get("min_size", 0)), group["instance_type"]
        nodes.append((f"{group.get('name')} nodes ({instance_type}, {counted})", instance_type, desired))
    for item, instance_type, count in nodes:
        price = offline(instance_type).hourly_usd
        lines.append(Line(item if price is not None else f"{item}: price unknown, counted as 0", count, price or 0.0))
    network = platform.get("network", {})
    zones = len(network.get("availability_zones", [])) or network.get("availability_zone_count", 2)
    if "existing_vpc_id" not in network:
        gateways = zones if network.get("nat_gateways") == NatGateways.ONE_PER_ZONE else 1
        lines.append(Line("NAT gateways", gateways, NAT_GATEWAY_HOURLY))
    if platform.get("storage", StorageKind.FSX) == StorageKind.FSX:
        fsx = platform.get("fsx", {})
        kind = fsx.get("deployment_type", "SCRATCH_2")
        per_gib = FSX_GIB_MONTH[(kind, fsx.get("per_unit_storage_throughput") if kind == "PERSISTENT_2" else None)]
        lines.append(Line(f"FSx for Lustre {kind} (GiB)", fsx.get("capacity_gib", 1200), per_gib / HOURS_PER_MONTH))
    return lines
