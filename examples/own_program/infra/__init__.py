"""This project's own settings: a package named `infra`, as many Pulumi projects have, beside eks-ddp's."""

from eks_ddp.infra.aws.efa_node_group import NodeGroupShape

GPU_WORKERS: NodeGroupShape = {
    "name": "gpu",
    "instance_type": "p4de.24xlarge",
    "availability_zone": "us-east-1a",
    "min_size": 0,
    "max_size": 2,
    "desired_size": 0,
}
"""Two p4de.24xlarge nodes at most (8 A100 and 4 EFA interfaces each), none while nothing trains."""
