"""What a program's resources cost per hour while its job runs, from the catalogue's list prices.

Read from what the program registers, not from eks-ddp's config, so a user's own program is priced the same way: EKS
control planes, NAT gateways, FSx for Lustre (a file system, or a claim on an FSx StorageClass), and each node
source's nodes: a managed group at its desired size, or more where the training pods need more, which the Cluster
Autoscaler would add; a Karpenter NodePool at the nodes the training pods need, since it keeps none idle. A training
pod takes a node of its own (workloads.target sizes it to the node's room), on the first source that admits it; the
cluster tests check that count against the nodes Karpenter itself launches (tests/cluster/test_karpenter.py).
On-demand, us-east-1, USD, as Karpenter's generated table had them on infra.facts.catalogue.PRICES_AS_OF (not re-read
from the AWS price list here; other regions differ): verify before quoting. Data transfer, storage I/O, S3 and
CloudWatch usage are not included.
"""

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.instance_facts import offline
from eks_ddp.engine_models.base import (
    Deployment,
    NodeSource,
    admits,
    launcher_of,
    located,
    node_sources,
    training_templates,
)

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
FSX_PROVISIONER = "fsx.csi.aws.com"
CONTROL_PLANES = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
GIB = {"Gi": 1, "Ti": 1024}


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    unit_hourly: float
    priced: bool = True
    """False where the price is unknown: the line counts as 0 and the total leaves it out."""

    @property
    def hourly(self) -> float:
        return self.quantity * self.unit_hourly


def estimate(deployment: Deployment) -> list[Line]:
    """One line per priced item; a type the catalogue does not price, or an FSx kind it does not know, gets a line
    that says so and counts as 0."""
    clusters = sum(len(deployment.of_type(type_)) for type_ in CONTROL_PLANES)
    lines = [Line("EKS control plane", clusters, EKS_CONTROL_PLANE_HOURLY)] if clusters else []
    lines += _nodes(deployment)
    gateways = len(deployment.of_type("aws:ec2/natGateway:NatGateway"))
    lines += [Line("NAT gateways", gateways, NAT_GATEWAY_HOURLY)] if gateways else []
    return lines + _fsx(deployment)


def training_nodes(deployment: Deployment) -> Counter[str]:
    """Nodes each source (by urn) holds for the training pods: one per pod, on the first source that admits it."""
    sources, needed = node_sources(deployment), Counter[str]()
    for template, count in training_templates(deployment):
        source = next((s for s in sources if admits(s, template.get("spec", {}))), None)
        if source is not None:
            needed[source.registration.urn] += count
    return needed


def _nodes(deployment: Deployment) -> list[Line]:
    needed = training_nodes(deployment)
    lines = []
    for source in node_sources(deployment):
        count, how = _node_count(source, needed[source.registration.urn])
        price = offline(source.instance_type).hourly_usd
        item = f"{located(source.registration)} ({source.instance_type}, {how})"
        lines.append(Line(item, count, price or 0.0, price is not None))
    return lines


def _node_count(source: NodeSource, needed: int) -> tuple[int, str]:
    if launcher_of(source) == NodeLauncher.KARPENTER:
        return needed, "Karpenter, while pods need them"
    desired = int(source.scaling.get("desiredSize", 0))
    return (needed, "scaled up for the pods") if needed > desired else (desired, "desired size")


def _fsx(deployment: Deployment) -> list[Line]:
    """Dynamically provisioned file systems (a claim on an FSx StorageClass) and ones the program creates."""
    classes = {
        r.inputs["metadata"].get("name"): r.inputs.get("parameters") or {}
        for r in deployment.kubernetes_objects()
        if r.inputs["kind"] == "StorageClass" and r.inputs.get("provisioner") == FSX_PROVISIONER
    }
    objects = deployment.kubernetes_objects()
    claims = [r.inputs.get("spec", {}) for r in objects if r.inputs["kind"] == "PersistentVolumeClaim"]
    lines = [
        _fsx_line(classes[claim["storageClassName"]], _gib(claim["resources"]["requests"]["storage"]))
        for claim in claims
        if claim.get("storageClassName") in classes
    ]
    for system in deployment.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        capacity = system.inputs.get("storageCapacity")  # absent when restored from a backup: the backup's size
        line = _fsx_line(system.inputs, float(capacity or 0))
        lines.append(line if capacity else replace(line, priced=False))
    return lines


def _fsx_line(parameters: dict[str, Any], gib: float) -> Line:
    kind = str(parameters.get("deploymentType") or "SCRATCH_2")
    throughput = parameters.get("perUnitStorageThroughput")
    per_gib = FSX_GIB_MONTH.get((kind, int(throughput) if kind == "PERSISTENT_2" and throughput else None))
    item = f"FSx for Lustre {kind} (GiB)"
    if per_gib is None:
        return Line(item, gib, 0.0, priced=False)
    return Line(item, gib, per_gib / HOURS_PER_MONTH)


def _gib(quantity: str) -> float:
    """A claim's storage request (`1200Gi`, `2.4Ti`) in GiB."""
    for suffix, factor in GIB.items():
        if quantity.endswith(suffix):
            return float(quantity.removesuffix(suffix)) * factor
    raise ValueError(f"storage request {quantity!r}: give Gi or Ti")
