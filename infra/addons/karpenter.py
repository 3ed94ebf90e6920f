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
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.aws.iam import (
    DEFAULT_ROLE_ACCESS,
    RoleAccess,
    cluster_inputs,
    node_role,
    policy,
    policy_file,
    role_access,
    service_account_role,
)
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
CONTROLLER_POLICIES = ("node-lifecycle", "iam-integration", "eks-integration", "interruption", "resource-discovery")
"""The controller's managed policies, by their names in policies/karpenter-controller.json."""


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


POLICIES = Path(__file__).resolve().parent / "policies"


def controller_policies(
    cluster: str, region: str, account: str, partition: str, node_role_arn: str, queue_arn: str
) -> dict[str, dict[str, Any]]:
    """The controller's five policies of the CloudFormation template (aws/karpenter-provider-aws v1.14.1,
    website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml), by name, with its
    conditions unchanged: policies/karpenter-controller.json, its placeholders written as the template's `!Sub`
    writes them (`${AWS::Region}`, `${ClusterName}`, `${KarpenterNodeRole.Arn}`, ...).

    One change: the public SSM parameters' ARN is written with `*` for the (empty) account, which matches them
    the same way and is the form IAM's reference (and parliament) expects.
    """
    values = {
        "AWS::Partition": partition,
        "AWS::Region": region,
        "AWS::AccountId": account,
        "ClusterName": cluster,
        "KarpenterNodeRole.Arn": node_role_arn,
        "KarpenterInterruptionQueue.Arn": queue_arn,
    }
    return policy_file(POLICIES / "karpenter-controller.json", values)


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


def node_access(
    name: str, parent: pulumi.Resource, cluster: str, tags: dict[str, str], after: list[pulumi.Resource]
) -> tuple[aws.iam.Role, aws.eks.AccessEntry]:
    """The role every Karpenter node gets, and the EC2_LINUX access entry that lets its nodes join the cluster.

    The cluster is named by a plain string: the entry waits for it through `after`, what the component waits for, on
    the entry itself (a component's depends_on does not reach its children: engine_models/dependencies).
    """
    role = node_role(f"{name}-node-role", parent, tags)
    entry = aws.eks.AccessEntry(
        f"{name}-node-access",
        cluster_name=cluster,
        principal_arn=role.arn,
        type="EC2_LINUX",
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=after),
    )
    return role, entry


def interruption_queue(name: str, parent: pulumi.Resource, tags: dict[str, str]) -> aws.sqs.Queue:
    """The SQS queue, with its TLS-only policy and the EventBridge rules (INTERRUPTION_EVENTS) that feed it."""
    child = pulumi.ResourceOptions(parent=parent)
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
    return queue


def controller_policy_attachments(
    name: str,
    parent: pulumi.Resource,
    role: aws.iam.Role,
    cluster: str,
    node_role_arn: pulumi.Output[str],
    queue_arn: pulumi.Output[str],
    tags: dict[str, str],
) -> list[aws.iam.RolePolicyAttachment]:
    """Each of controller_policies as a managed policy, attached to the controller's role."""
    child = pulumi.ResourceOptions(parent=parent)
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    facts = pulumi.Output.all(
        aws.get_region_output(opts=invoke).region,
        aws.get_caller_identity_output(opts=invoke).account_id,
        aws.get_partition_output(opts=invoke).partition,
        node_role_arn,
        queue_arn,
    )
    documents = facts.apply(lambda values: controller_policies(cluster, *values))
    attachments = []
    for policy_name in CONTROLLER_POLICIES:
        managed = aws.iam.Policy(
            f"{name}-{policy_name}",
            tags=tags,
            opts=child,
            policy=documents.apply(lambda docs, key=policy_name: json.dumps(docs[key])),
        )
        attachments.append(
            aws.iam.RolePolicyAttachment(f"{name}-{policy_name}", role=role.name, policy_arn=managed.arn, opts=child)
        )
    return attachments


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
        access = role_access(args.get("access", DEFAULT_ROLE_ACCESS), COMPONENT)
        cluster_facts = cluster_inputs(COMPONENT, access, args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags, cluster, after = dict(args.get("tags", {})), args["cluster_name"], waits_for(opts)
        nodes, entry = node_access(name, self, cluster, tags, after)
        queue = interruption_queue(name, self, tags)
        account = (NAMESPACE, SERVICE_ACCOUNT)
        granted = service_account_role(f"{name}-role", self, access, cluster_facts, account, tags, after)
        attachments = controller_policy_attachments(name, self, granted.role, cluster, nodes.arn, queue.arn, tags)
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
            [*after, *attachments, *granted.ready],
        )
        # A node class that names the role waits for its access entry too: a node launched before it cannot join.
        self.node_role_name = pulumi.Output.all(nodes.name, entry.urn).apply(lambda values: values[0])
        self.queue_name, self.role_arn = queue.name, granted.role.arn
        self.register_outputs(
            {"node_role_name": self.node_role_name, "queue_name": self.queue_name, "role_arn": self.role_arn}
        )
