"""Karpenter: the controller that launches training nodes for pending pods, with its IAM and interruption queue.

Ported from aws/karpenter-provider-aws v1.14.1,
website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml: the node role (here the
one every managed group gets, infra.aws.iam.node_role, with an EC2_LINUX access entry so its nodes may join), the
controller's policies (node lifecycle, IAM integration, EKS integration, interruption, resource discovery; the
zonal-shift policy is left out with `enableZonalShift` off), the SQS queue with its TLS-only policy, and the
EventBridge rules that feed it. The chart (versions.KARPENTER_CHART, which installs the CRDs) runs on the system
nodes, which stay a managed node group: Karpenter must not launch the nodes it runs on.
"""

import json
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.aws.iam import RoleAccess, cluster_inputs, node_role, policy, role_access, service_account_role
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "Karpenter"
NAMESPACE, SERVICE_ACCOUNT = "kube-system", "karpenter"

# EventBridge detail types that reach the queue: (source, detail-type), as in the CloudFormation template.
INTERRUPTION_EVENTS = {
    "scheduled-change": ("aws.health", "AWS Health Event"),
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "instance-state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "reservation-interruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}
QUEUE_RETENTION_SECONDS = 300  # an interruption warning older than five minutes is of no use


class KarpenterArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    cluster_name: str
    """The EKS cluster's name (the chart's settings and every IAM condition use it)."""
    access: NotRequired[RoleAccess]
    """How the controller gets its role: pod-identity (default, EKS Pod Identity, as Karpenter's own getting-started
    guide gives it: aws/karpenter-provider-aws website/content/en/v1.0/getting-started/getting-started-with-karpenter
    scripts/step02-create-cluster.sh, `podIdentityAssociations`) or irsa."""
    oidc_provider_arn: NotRequired[pulumi.Input[str]]
    """The cluster's IAM OIDC provider, with access irsa."""
    oidc_issuer: NotRequired[pulumi.Input[str]]
    """The cluster's OIDC issuer, with access irsa."""
    system_node_count: int
    """System nodes: the controller runs one replica per node (its chart requires them on distinct hosts)."""
    node_repair: NotRequired[bool]
    """Replace nodes whose node monitoring agent reports them unhealthy (Karpenter's `nodeRepair` gate, alpha in
    1.14.1; default false)."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


def _arn(partition: str, service: str, region: str, account: str, resource: str) -> str:
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


def controller_policies(
    cluster: str, region: str, account: str, partition: str, node_role_arn: str, queue_arn: str
) -> dict[str, dict[str, Any]]:
    """The controller's five policies of the CloudFormation template, by name, with its conditions unchanged.

    One change: the public SSM parameters' ARN is written with `*` for the (empty) account, which matches them
    the same way and is the form IAM's reference (and parliament) expects.
    """
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    nodepool = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    requested = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    ec2 = lambda *kinds: [_arn(partition, "ec2", region, "*", f"{kind}/*") for kind in kinds]  # noqa: E731
    created = ec2("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    profiles = _arn(partition, "iam", "", account, "instance-profile/*")
    node_class = "karpenter.k8s.aws/ec2nodeclass"
    in_region = {"aws:ResourceTag/topology.kubernetes.io/region": region}
    return {
        "node-lifecycle": policy(
            [
                {
                    "Sid": "AllowScopedEC2InstanceAccessActions",
                    "Effect": "Allow",
                    "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                    "Resource": [
                        f"arn:{partition}:ec2:{region}::image/*",
                        f"arn:{partition}:ec2:{region}::snapshot/*",
                        *ec2("security-group", "subnet", "capacity-reservation", "placement-group"),
                    ],
                },
                {
                    "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                    "Effect": "Allow",
                    "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                    "Resource": ec2("launch-template"),
                    "Condition": {"StringEquals": owned, "StringLike": nodepool},
                },
                {
                    "Sid": "AllowScopedEC2InstanceActionsWithTags",
                    "Effect": "Allow",
                    "Resource": created,
                    "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                    "Condition": {
                        "StringEquals": requested,
                        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                    },
                },
                {
                    "Sid": "AllowScopedResourceCreationTagging",
                    "Effect": "Allow",
                    "Resource": created,
                    "Action": "ec2:CreateTags",
                    "Condition": {
                        "StringEquals": {
                            **requested,
                            "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                        },
                        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                    },
                },
                {
                    "Sid": "AllowScopedResourceTagging",
                    "Effect": "Allow",
                    "Resource": ec2("instance"),
                    "Action": "ec2:CreateTags",
                    "Condition": {
                        "StringEquals": owned,
                        "StringLike": nodepool,
                        "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                        "ForAllValues:StringEquals": {
                            "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                        },
                    },
                },
                {
                    "Sid": "AllowScopedDeletion",
                    "Effect": "Allow",
                    "Resource": ec2("instance", "launch-template"),
                    "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                    "Condition": {"StringEquals": owned, "StringLike": nodepool},
                },
            ]
        ),
        "iam-integration": policy(
            [
                {
                    "Sid": "AllowPassingInstanceRole",
                    "Effect": "Allow",
                    "Resource": node_role_arn,
                    "Action": "iam:PassRole",
                    "Condition": {
                        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
                    },
                },
                {
                    "Sid": "AllowScopedInstanceProfileCreationActions",
                    "Effect": "Allow",
                    "Resource": profiles,
                    "Action": ["iam:CreateInstanceProfile"],
                    "Condition": {
                        "StringEquals": {**requested, "aws:RequestTag/topology.kubernetes.io/region": region},
                        "StringLike": {f"aws:RequestTag/{node_class}": "*"},
                    },
                },
                {
                    "Sid": "AllowScopedInstanceProfileTagActions",
                    "Effect": "Allow",
                    "Resource": profiles,
                    "Action": ["iam:TagInstanceProfile"],
                    "Condition": {
                        "StringEquals": {
                            **owned,
                            **in_region,
                            **requested,
                            "aws:RequestTag/topology.kubernetes.io/region": region,
                        },
                        "StringLike": {f"aws:ResourceTag/{node_class}": "*", f"aws:RequestTag/{node_class}": "*"},
                    },
                },
                {
                    "Sid": "AllowScopedInstanceProfileActions",
                    "Effect": "Allow",
                    "Resource": profiles,
                    "Action": [
                        "iam:AddRoleToInstanceProfile",
                        "iam:RemoveRoleFromInstanceProfile",
                        "iam:DeleteInstanceProfile",
                    ],
                    "Condition": {
                        "StringEquals": {**owned, **in_region},
                        "StringLike": {f"aws:ResourceTag/{node_class}": "*"},
                    },
                },
            ]
        ),
        "eks-integration": policy(
            [
                {
                    "Sid": "AllowAPIServerEndpointDiscovery",
                    "Effect": "Allow",
                    "Action": "eks:DescribeCluster",
                    "Resource": _arn(partition, "eks", region, account, f"cluster/{cluster}"),
                },
            ]
        ),
        "interruption": policy(
            [
                {
                    "Sid": "AllowInterruptionQueueActions",
                    "Effect": "Allow",
                    "Resource": queue_arn,
                    "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                },
            ]
        ),
        "resource-discovery": policy(
            [
                {
                    "Sid": "AllowRegionalReadActions",
                    "Effect": "Allow",
                    "Resource": "*",
                    "Action": [
                        f"ec2:Describe{what}"
                        for what in (
                            "CapacityReservations",
                            "Images",
                            "Instances",
                            "InstanceStatus",
                            "InstanceTypeOfferings",
                            "InstanceTypes",
                            "LaunchTemplates",
                            "PlacementGroups",
                            "SecurityGroups",
                            "SpotPriceHistory",
                            "Subnets",
                        )
                    ],
                    "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
                },
                {
                    "Sid": "AllowSSMReadActions",
                    "Effect": "Allow",
                    "Action": "ssm:GetParameter",
                    "Resource": f"arn:{partition}:ssm:{region}:*:parameter/aws/service/*",
                },
                {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
                {
                    "Sid": "AllowUnscopedInstanceProfileListAction",
                    "Effect": "Allow",
                    "Resource": "*",
                    "Action": "iam:ListInstanceProfiles",
                },
                {
                    "Sid": "AllowInstanceProfileReadActions",
                    "Effect": "Allow",
                    "Resource": profiles,
                    "Action": "iam:GetInstanceProfile",
                },
            ]
        ),
    }


def queue_policy(queue_arn: str) -> dict[str, Any]:
    """EventBridge (and SQS itself) may send to the queue; nothing reaches it without TLS."""
    return {
        "Id": "EC2InterruptionPolicy",
        **policy(
            [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                },
                {
                    "Sid": "DenyHTTP",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
            ]
        ),
    }


def chart_values(
    cluster: str,
    queue_name: pulumi.Input[str],
    annotations: dict[str, pulumi.Output[str]] | None,
    pod_annotations: dict[str, str],
    replicas: int,
    node_repair: bool = False,
) -> dict[str, Any]:
    """The chart's values: its settings, the service account's annotations (IRSA's role; none with EKS Pod
    Identity), the pods' (which way, iam.ROLE_ACCESS_ANNOTATION), and the controller on the system nodes.

    The chart's pods require distinct hosts (a required pod anti-affinity on kubernetes.io/hostname) and Helm
    waits for all of them (atomic): more replicas than system nodes would fail the install.
    """
    return {
        "settings": {
            "clusterName": cluster,
            "interruptionQueue": queue_name,
            "featureGates": {"nodeRepair": node_repair},
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT, "annotations": annotations or {}},
        "podAnnotations": pod_annotations,
        "replicas": replicas,
        "nodeSelector": SYSTEM_LABEL,
    }


class Karpenter(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """The release; node classes and node pools must depend on it (it installs their CRDs)."""
    node_role_name: pulumi.Output[str]
    """The role every Karpenter node gets (an EC2NodeClass's `role`); it resolves once the role's access entry
    exists, so what takes it waits for the entry."""
    queue_name: pulumi.Output[str]
    """The interruption queue."""
    role_arn: pulumi.Output[str]
    """The controller's role."""

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        access = role_access(args.get("access", RoleAccess.POD_IDENTITY), COMPONENT)
        cluster_facts = cluster_inputs(COMPONENT, access, args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags, cluster = dict(args.get("tags", {})), args["cluster_name"]
        nodes = node_role(f"{name}-node-role", self, tags)
        # The cluster is named by a plain string: the entry waits for it through what the component waits for, on
        # the entry itself (a component's depends_on does not reach its children: engine_models/dependencies).
        entry = aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=cluster,
            principal_arn=nodes.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
        )
        queue = aws.sqs.Queue(
            f"{name}-interruptions",
            message_retention_seconds=QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruptions-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(queue_policy(arn))),
            opts=child,
        )
        for rule_name, (source, detail_type) in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{rule_name}",
                tags=tags,
                opts=child,
                event_pattern=json.dumps({"source": [source], "detail-type": [detail_type]}),
            )
            aws.cloudwatch.EventTarget(f"{name}-{rule_name}-target", rule=rule.name, arn=queue.arn, opts=child)

        account = (NAMESPACE, SERVICE_ACCOUNT)
        granted = service_account_role(f"{name}-role", self, access, cluster_facts, account, tags, waits_for(opts))
        role = granted.role
        invoke = pulumi.InvokeOutputOptions(parent=self)
        facts = pulumi.Output.all(
            aws.get_region_output(opts=invoke).region,
            aws.get_caller_identity_output(opts=invoke).account_id,
            aws.get_partition_output(opts=invoke).partition,
            nodes.arn,
            queue.arn,
        )
        documents = facts.apply(lambda values: controller_policies(cluster, *values))
        attachments = []
        for policy_name in (
            "node-lifecycle",
            "iam-integration",
            "eks-integration",
            "interruption",
            "resource-discovery",
        ):
            managed = aws.iam.Policy(
                f"{name}-{policy_name}",
                tags=tags,
                opts=child,
                policy=documents.apply(lambda docs, key=policy_name: json.dumps(docs[key])),
            )
            attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{policy_name}", role=role.name, policy_arn=managed.arn, opts=child
                )
            )

        replicas = min(2, args["system_node_count"])
        repair = args.get("node_repair", False)
        values = chart_values(cluster, queue.name, granted.annotations, granted.pod_annotations, replicas, repair)
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.KARPENTER_CHART,
            NAMESPACE,
            values,
            [*waits_for(opts), *attachments, *granted.ready],
        )
        # A node class that names the role waits for its access entry too: a node launched before it cannot join.
        self.node_role_name = pulumi.Output.all(nodes.name, entry.urn).apply(lambda values: values[0])
        self.queue_name, self.role_arn = queue.name, role.arn
        self.register_outputs(
            {"node_role_name": self.node_role_name, "queue_name": self.queue_name, "role_arn": self.role_arn}
        )
