"""Where EC2 tells a node's place in its network: the instance types with a topology, and the labels EKS gives them.

EC2's instance topology (DescribeInstanceTopology) describes, for some instance types only, the network nodes an
instance hangs under, top layer first (EC2 User Guide, "Prerequisites for Amazon EC2 topology", instance types, read
2026-11); EKS puts them on the node as `topology.k8s.aws/network-node-layer-<n>` labels (EKS User Guide, "Place
distributed AI/ML workloads with network topology labels"). Layer 3 is the bottom layer of every type here but
p6-b200 and p6-b300, which have a fourth: nodes sharing their layer-3 node are the closest a job can ask for on all
of them.
"""

NETWORK_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{layer}" for layer in (1, 2, 3))
"""The layers every type below has, top (broadest) first."""
CLOSEST_LAYER = NETWORK_LAYERS[-1]
"""The layer a job's pods are placed under together."""

_SIZES = {
    "g6e": ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"),
    "g7e": ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge"),
    "hpc6a": ("48xlarge",),
    "hpc6id": ("32xlarge",),
    "hpc7g": ("4xlarge", "8xlarge", "16xlarge"),
    "hpc7a": ("12xlarge", "24xlarge", "48xlarge", "96xlarge"),
    "hpc8a": ("96xlarge",),
    "p3dn": ("24xlarge",),
    "p4d": ("24xlarge",),
    "p4de": ("24xlarge",),
    "p5": ("48xlarge",),
    "p5e": ("48xlarge",),
    "p5en": ("48xlarge",),
    "p6e-gb200": ("36xlarge",),
    "p6-b200": ("48xlarge",),
    "p6-b300": ("48xlarge",),
    "trn1": ("2xlarge", "32xlarge"),
    "trn1n": ("32xlarge",),
    "trn2": ("48xlarge",),
    "trn2u": ("48xlarge",),
}
WITH_TOPOLOGY = frozenset(f"{family}.{size}" for family, sizes in _SIZES.items() for size in sizes)
"""The instance types EC2 describes the network topology of (and so EKS labels with NETWORK_LAYERS)."""


def has_topology(instance_type: str) -> bool:
    return instance_type in WITH_TOPOLOGY
