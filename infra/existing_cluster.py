"""A Kubernetes cluster made elsewhere (eksctl, Terraform, CDK, SageMaker HyperPod) as the platform's target.

The platform then deploys only the cluster half: device plugins, operators, monitoring, the checks and the job. Given
a kubeconfig, AWS is asked nothing and nothing is created in it, so the parts that live in AWS (the model bucket and
its role, the autoscalers' roles, the EKS node monitoring agent, CloudWatch, new file systems) are refused in one line
each. Given an EKS cluster's name, the kubeconfig is EKS's own (endpoint and certificate from `DescribeCluster`,
credentials from `aws eks get-token`), and the parts that need no new VPC resources can be made beside it.

Its node groups exist already: each is described by what it is (instance type, labels, taints, sizes, EFA), and
its nodes must carry the labels eks-ddp places pods by, as its own groups do (`eks-ddp/node-group: <name>`, and
`vpc.amazonaws.com/efa.present` on EFA groups; docs/your-project.md).
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.efa_node_group import TrainingNodes
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.node_group import NodeGroup, NodeGroupShape

COMPONENT = "TrainingPlatform"


class ExistingClusterArgs(TypedDict):
    """Where the cluster is: a kubeconfig, or an EKS cluster's name (exactly one)."""

    kubeconfig: NotRequired[str]
    """A kubeconfig file's path, or its contents: the cluster it names is the target and AWS is asked nothing."""
    context: NotRequired[str]
    """With `kubeconfig`: the context to use (default: its current context)."""
    eks_cluster_name: NotRequired[str]
    """An EKS cluster's name, in the stack's region: its kubeconfig comes from EKS."""


def validate(args: ExistingClusterArgs) -> None:
    given = [key for key in ("kubeconfig", "eks_cluster_name") if args.get(key)]
    if len(given) != 1:
        raise InvalidArgument(
            COMPONENT,
            "existing_cluster",
            dict(args),
            "give exactly one of {} (a path or its contents) and {}",
            ["existing_cluster.kubeconfig", EKS_NAME],
        )
    if "context" in args and "kubeconfig" not in args:
        raise InvalidArgument(COMPONENT, "existing_cluster.context", args["context"], "it goes with kubeconfig")


EKS_NAME = "existing_cluster.eks_cluster_name"
"""The argument that names an EKS cluster: what AWS-side parts need (`aws_side_problem` refers to it as `{}`)."""


def aws_side_problem(args: ExistingClusterArgs) -> str | None:
    """Why AWS-side parts cannot be made for this target (None when they can: an EKS cluster given by name), with
    `{}` for the argument that would allow them (EKS_NAME)."""
    if args.get("eks_cluster_name"):
        return None
    return "the cluster is given by kubeconfig, so nothing is made in AWS; give {}"


Describe = Callable[[str], InstanceType]


def facts_for(args: ExistingClusterArgs | None, describe: Describe) -> Describe:
    """Where an instance type's facts come from for this target: the catalogue's when it is reached without AWS
    (instance_facts.offline), else `describe`."""
    return instance_facts.offline if args is not None and aws_side_problem(args) else describe


def eks_kubeconfig(name: str, region: pulumi.Input[str], parent: pulumi.Resource) -> pulumi.Output[str]:
    """A kubeconfig for the EKS cluster `name`, as `aws eks update-kubeconfig` writes it (a secret)."""
    cluster = aws.eks.get_cluster_output(name=name, opts=pulumi.InvokeOutputOptions(parent=parent))

    def kubeconfig(endpoint: str, authority: str, at: str) -> str:
        user = {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", name, "--region", at, "--output", "json"],
        }}
        return json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": authority}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        })

    authority = cluster.certificate_authorities.apply(lambda found: found[0].data)
    return pulumi.Output.secret(pulumi.Output.all(cluster.endpoint, authority, region).apply(lambda v: kubeconfig(*v)))


def provider(name: str, args: ExistingClusterArgs, region: pulumi.Input[str], parent: pulumi.Resource,
             ) -> tuple[k8s.Provider, pulumi.Output[str]]:
    """The target's Kubernetes provider (server-side apply, as the platform's own cluster's) and its kubeconfig."""
    eks_name = args.get("eks_cluster_name")
    kubeconfig = (
        eks_kubeconfig(eks_name, region, parent) if eks_name else pulumi.Output.secret(args.get("kubeconfig", ""))
    )
    made = k8s.Provider(
        f"{name}-k8s",
        kubeconfig=kubeconfig,
        context=args.get("context"),
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return made, kubeconfig


@dataclass(frozen=True)
class ClusterFacts:
    """What the platform's AWS-side parts read of an EKS cluster, whoever made it."""

    vpc_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    """The EKS cluster security group, which every node carries."""
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]


def eks_facts(name: str, parent: pulumi.Resource) -> ClusterFacts:
    """An EKS cluster's facts from EKS and IAM (its OIDC provider must exist for IRSA, as `eksctl utils
    associate-iam-oidc-provider` makes it)."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    cluster = aws.eks.get_cluster_output(name=name, opts=invoke)
    issuer = cluster.identities.apply(lambda found: found[0].oidcs[0].issuer)
    oidc = aws.iam.get_open_id_connect_provider_output(url=issuer, opts=invoke)
    return ClusterFacts(
        vpc_id=cluster.vpc_config.vpc_id,
        security_group_id=cluster.vpc_config.cluster_security_group_id,
        oidc_provider_arn=oidc.arn,
        oidc_issuer=issuer,
    )


class ExistingNodeGroup(TrainingNodes):
    """A node group that exists already: the facts its jobs are placed and sized by, and nothing created.

    Its description is the component's input `described`, in a managed node group's words (`instanceType`, `labels`,
    `taints`, `scalingConfig`, and `efaDevices` per node): so the state records what the stack assumed of the group,
    a changed description shows in `pulumi preview --diff`, and the offline tools (cost, rehearsal, the local
    cluster's nodes) read it as they read a group the stack makes."""

    def __init__(self, name: str, args: NodeGroupShape, opts: pulumi.ResourceOptions | None = None) -> None:
        group = NodeGroup.of(args)
        instance = instance_facts.describe(group.instance_type)  # EC2's, or the catalogue's (from_catalogue)
        self._take_shape(args, group, instance, NodeLauncher.MANAGED_NODE_GROUP)
        described = {
            "instanceType": self.instance_type,
            "labels": self.labels,
            "taints": [dict(t) for t in self.taints],
            "efaDevices": self.efa_interfaces,
            "scalingConfig": {"minSize": group.min_size, "maxSize": group.max_size, "desiredSize": group.desired_size},
        }
        # Nested: Pulumi sets each input key as an Output attribute, which would hide `labels` and `taints`.
        super().__init__(DESCRIBED_GROUP, name, {"described": described}, opts)
        self.security_group_id = self.placement_group_name = None
        self.register_outputs({})


DESCRIBED_GROUP = "eksddp:index:ExistingNodeGroup"
