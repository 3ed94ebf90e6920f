"""The checks of the policy pack, as pure functions over resource inputs.

Each resource rule takes the engine's view of one resource (type and camelCase
inputs) and returns what is wrong with it; the pack (policy/pack.py) wraps them
for `pulumi preview --policy-pack policy`, and tests call them directly. Inputs
unknown during a preview (computed by the cloud) are skipped, never guessed.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.addons.kueue import QUEUE_LABEL
from eks_ddp.infra.aws.cluster import GROUP_LABEL, SYSTEM_LABEL
from eks_ddp.infra.facts import catalogue

Props = Mapping[str, Any]
NODE_CLASS, NODE_POOL = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "kubernetes:karpenter.sh/v1:NodePool"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    types: tuple[str, ...]
    check: Callable[[str, Props], list[str]]


def _document(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return value if isinstance(value, dict) else None


def _statements(document: dict[str, Any] | None) -> list[dict[str, Any]]:
    statements = (document or {}).get("Statement", [])
    return [statements] if isinstance(statements, dict) else [s for s in statements if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def bucket_public_access_blocked(_: str, props: Props) -> list[str]:
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    return [f"{flag} must be true" for flag in flags if props.get(flag) is not True]


def bucket_encrypted(_: str, props: Props) -> list[str]:
    rules = props.get("rules") or []
    algorithms = [
        rule.get("applyServerSideEncryptionByDefault", {}).get("sseAlgorithm")
        for rule in rules
        if isinstance(rule, dict)
    ]
    return (
        []
        if any(algorithm in ("aws:kms", "aws:kms:dsse", "AES256") for algorithm in algorithms)
        else ["no default server-side encryption"]
    )


def bucket_tls_only(_: str, props: Props) -> list[str]:
    if "policy" not in props:
        return []
    for statement in _statements(_document(props["policy"])):
        condition = statement.get("Condition", {}).get("Bool", {})
        if statement.get("Effect") == "Deny" and str(condition.get("aws:SecureTransport")).lower() == "false":
            return []
    return ["the bucket policy does not deny requests without TLS (aws:SecureTransport false)"]


def launch_template_hardened(_: str, props: Props) -> list[str]:
    problems = []
    if (props.get("metadataOptions") or {}).get("httpTokens") != "required":
        problems.append("IMDSv2 is not required (metadataOptions.httpTokens must be 'required')")
    for mapping in props.get("blockDeviceMappings") or []:
        ebs = mapping.get("ebs") or {}
        if ebs and str(ebs.get("encrypted")).lower() != "true":
            problems.append(f"EBS volume {mapping.get('deviceName')} is not encrypted")
    return problems


OPEN = {"0.0.0.0/0", "::/0"}


def no_open_ingress(resource_type: str, props: Props) -> list[str]:
    if resource_type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        open_to = {props.get("cidrIpv4"), props.get("cidrIpv6")} & OPEN
        return [f"ingress from {cidr}" for cidr in sorted(str(cidr) for cidr in open_to)]
    problems = []
    for rule in props.get("ingress") or []:
        for cidr in [*(rule.get("cidrBlocks") or []), *(rule.get("ipv6CidrBlocks") or [])]:
            if cidr in OPEN:
                problems.append(f"ingress from {cidr}")
    return problems


def eks_encrypted_and_logged(resource_type: str, props: Props) -> list[str]:
    problems = []
    if resource_type == "eks:index:Cluster":
        encrypted = bool(props.get("encryptionConfigKeyArn"))
    else:
        encrypted = bool(props.get("encryptionConfig"))
    if not encrypted:
        problems.append("secrets encryption with a KMS key is not configured")
    if not props.get("enabledClusterLogTypes"):
        problems.append("control-plane logging is off")
    return problems


def _condition_keys(statement: dict[str, Any]) -> set[str]:
    """The keys a statement's conditions test, whatever the operator (StringEquals, StringLike, ...)."""
    conditions = (statement.get("Condition") or {}).values()
    return {key for operator in conditions if isinstance(operator, dict) for key in operator}


def oidc_trust_conditions(_: str, props: Props) -> list[str]:
    problems = []
    for statement in _statements(_document(props.get("assumeRolePolicy"))):
        federated = _as_list((statement.get("Principal") or {}).get("Federated", []))
        if not any("oidc-provider" in str(principal) for principal in federated):
            continue
        keys = _condition_keys(statement)
        for suffix in (":sub", ":aud"):
            if not any(key.endswith(suffix) for key in keys):
                problems.append(f"a role trusted through an OIDC provider has no `{suffix[1:]}` condition")
    return problems


POD_IDENTITY_TAGS = ("aws:RequestTag/kubernetes-namespace", "aws:RequestTag/kubernetes-service-account")


def pod_identity_trust_scoped(_: str, props: Props) -> list[str]:
    """EKS Pod Identity assumes a role for any association in the account that names it: only conditions on the session
    tags it sets confine the role to one namespace's service account (EKS user guide, pod-id-role.html)."""
    problems = []
    for statement in _statements(_document(props.get("assumeRolePolicy"))):
        if "pods.eks.amazonaws.com" not in _as_list((statement.get("Principal") or {}).get("Service", [])):
            continue
        keys = _condition_keys(statement)
        problems += [
            f"a role trusted by EKS Pod Identity has no `{tag}` condition"
            for tag in POD_IDENTITY_TAGS
            if tag not in keys
        ]
    return problems


def no_wildcard_admin(_: str, props: Props) -> list[str]:
    for statement in _statements(_document(props.get("policy"))):
        if (
            statement.get("Effect") == "Allow"
            and "*" in _as_list(statement.get("Action"))
            and "*" in _as_list(statement.get("Resource"))
        ):
            return ['a statement allows "Action": "*" on "Resource": "*"']
    return []


def ecr_scanned_and_immutable(_: str, props: Props) -> list[str]:
    problems = []
    if (props.get("imageScanningConfiguration") or {}).get("scanOnPush") is not True:
        problems.append("images are not scanned on push")
    if props.get("imageTagMutability") != "IMMUTABLE":
        problems.append("image tags are mutable")
    return problems


POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def namespace_pod_security(_: str, props: Props) -> list[str]:
    """Without the label a namespace admits privileged pods (Pod Security Admission's default level)."""
    level = ((props.get("metadata") or {}).get("labels") or {}).get(POD_SECURITY_ENFORCE)
    if level in ("baseline", "restricted"):
        return []
    return [f"{POD_SECURITY_ENFORCE} is {level or 'unset'}: the namespace admits privileged pods"]


EFA_LABEL = "vpc.amazonaws.com/efa.present"


def _efa_unrequested(kind: str, pod: Props) -> list[str]:
    """A pod on EFA nodes must request the interfaces, or NCCL falls back to TCP."""
    if (pod.get("nodeSelector") or {}).get(EFA_LABEL) != "true":
        return []
    return [
        f"{kind} runs on EFA nodes without requesting vpc.amazonaws.com/efa (NCCL would fall back to TCP)"
        for container in pod.get("containers") or []
        if not ((container.get("resources") or {}).get("limits") or {}).get("vpc.amazonaws.com/efa")
    ]


def pytorchjob_sane(_: str, props: Props) -> list[str]:
    spec = props.get("spec") or {}
    problems = []
    if str(spec.get("nprocPerNode", "auto")) == "auto":
        problems.append("nprocPerNode is 'auto' (on CPU nodes torchrun then starts one process per host vCPU)")
    for kind, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
        pod = ((replica or {}).get("template") or {}).get("spec") or {}
        if not any(container.get("name") == "pytorch" for container in pod.get("containers") or []):
            problems.append(f"{kind} has no container named pytorch")
        problems += _efa_unrequested(kind, pod)
    return problems


def trainjob_sane(_: str, props: Props) -> list[str]:
    if "numProcPerNode" in ((props.get("spec") or {}).get("trainer") or {}):
        return []
    return [
        "numProcPerNode is unset (the Trainer's torch plugin then starts one process per requested CPU on CPU nodes)"
    ]


def training_runtime_sane(_: str, props: Props) -> list[str]:
    jobs = ((((props.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")) or []
    problems = []
    for job in jobs:
        pod = ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        problems += _efa_unrequested(f"replicated job {job.get('name')}", pod)
    return problems


RESOURCE_RULES: Sequence[ResourceRule] = (
    ResourceRule(
        "s3-public-access-blocked",
        "S3 public access blocks block everything.",
        ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",),
        bucket_public_access_blocked,
    ),
    ResourceRule(
        "s3-encrypted",
        "S3 buckets encrypt by default.",
        ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",),
        bucket_encrypted,
    ),
    ResourceRule(
        "s3-tls-only",
        "S3 bucket policies deny requests without TLS.",
        ("aws:s3/bucketPolicy:BucketPolicy",),
        bucket_tls_only,
    ),
    ResourceRule(
        "launch-template-hardened",
        "Launch templates require IMDSv2 and encrypt EBS.",
        ("aws:ec2/launchTemplate:LaunchTemplate",),
        launch_template_hardened,
    ),
    ResourceRule(
        "no-open-ingress",
        "No security group ingress from 0.0.0.0/0 or ::/0.",
        ("aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"),
        no_open_ingress,
    ),
    ResourceRule(
        "eks-encrypted-and-logged",
        "EKS clusters encrypt secrets and log the control plane.",
        ("eks:index:Cluster", "aws:eks/cluster:Cluster"),
        eks_encrypted_and_logged,
    ),
    ResourceRule(
        "iam-oidc-trust-conditions",
        "Roles trusted through OIDC pin `sub` and `aud`.",
        ("aws:iam/role:Role",),
        oidc_trust_conditions,
    ),
    ResourceRule(
        "iam-no-wildcard-admin",
        'No "Action": "*" on "Resource": "*".',
        ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy"),
        no_wildcard_admin,
    ),
    ResourceRule(
        "ecr-scanned-and-immutable",
        "ECR repositories scan on push and have immutable tags.",
        ("aws:ecr/repository:Repository",),
        ecr_scanned_and_immutable,
    ),
    ResourceRule(
        "iam-pod-identity-trust-scoped",
        "Roles trusted by EKS Pod Identity are scoped to a namespace and service account.",
        ("aws:iam/role:Role",),
        pod_identity_trust_scoped,
    ),
    ResourceRule(
        "namespace-pod-security",
        "Namespaces enforce the baseline or restricted Pod Security Standard.",
        ("kubernetes:core/v1:Namespace",),
        namespace_pod_security,
    ),
    ResourceRule(
        "pytorchjob-sane",
        "PyTorchJobs name a `pytorch` container, set nprocPerNode, and request EFA on EFA nodes.",
        ("kubernetes:kubeflow.org/v1:PyTorchJob",),
        pytorchjob_sane,
    ),
    ResourceRule(
        "trainjob-sane",
        "TrainJobs set numProcPerNode.",
        ("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",),
        trainjob_sane,
    ),
    ResourceRule(
        "training-runtime-efa",
        "Training runtimes request EFA on EFA nodes.",
        ("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",),
        training_runtime_sane,
    ),
)


@dataclass(frozen=True)
class StackResource:
    """What a stack rule needs of each resource: during a preview, ids are unknown,
    so resources are linked through the properties that reference them."""

    type: str
    name: str
    urn: str
    props: Props
    property_dependencies: Mapping[str, Sequence[str]]

    def referenced(self, prop: str) -> set[str]:
        return set(self.property_dependencies.get(prop, ()))


POD_OWNERS = (
    "kubernetes:batch/v1:Job",
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:core/v1:Pod",
)
"""The objects the stack applies itself that make pods (charts' own are the charts' to guard)."""


def pods_denied_by_default(resources: Sequence[StackResource]) -> list[str]:
    """No pod without a NetworkPolicy: each object that makes pods sits in a namespace with a policy that selects every
    pod for both directions, so what no other policy allows is denied (workloads/network_policy.py default-deny)."""
    denying = {
        (r.props.get("metadata") or {}).get("namespace")
        for r in resources
        if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
        and not (r.props.get("spec") or {}).get("podSelector")
        and {"Ingress", "Egress"} <= set((r.props.get("spec") or {}).get("policyTypes") or [])
    }
    return [
        f"{r.type.rsplit(':', 1)[1]} {r.name}: namespace {namespace} has no NetworkPolicy that denies its pods' "
        "traffic by default"
        for r in resources
        if r.type in POD_OWNERS and (namespace := (r.props.get("metadata") or {}).get("namespace")) not in denying
    ]


LOCAL_QUEUE = f"kubernetes:{kueue.API}:LocalQueue"
TRAINING_KINDS = (
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
)


def _on_a_training_group(resource: StackResource) -> bool:
    """A training job, or a Job whose pods select a node group other than the system one (an Indexed training Job,
    the EFA check)."""
    if resource.type in TRAINING_KINDS:
        return True
    if resource.type != "kubernetes:batch/v1:Job":
        return False
    selector = (((resource.props.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    system = SYSTEM_LABEL[GROUP_LABEL]
    return selector.get(GROUP_LABEL, system) != system


def training_jobs_queued(resources: Sequence[StackResource]) -> list[str]:
    """With queues in the stack (Kueue's LocalQueues), every job on a training group waits in one of them: a job
    outside a queue starts at once and takes nodes the queue's quota counts as free."""
    queues = {((r.props.get("metadata") or {}).get("namespace"), (r.props.get("metadata") or {}).get("name"))
              for r in resources if r.type == LOCAL_QUEUE}
    if not queues:
        return []
    problems = []
    for r in resources:
        metadata = r.props.get("metadata") or {}
        queue = (metadata.get("labels") or {}).get(QUEUE_LABEL)
        if _on_a_training_group(r) and (metadata.get("namespace"), queue) not in queues:
            where = f"queue {queue!r}, which its namespace has not" if queue else "no queue"
            problems.append(f"{r.type.rsplit(':', 1)[1]} {r.name}: {where}; label it {QUEUE_LABEL} with one of "
                            f"{', '.join(sorted(str(name) for _, name in queues))}")
    return problems


def efa_groups_consistent(resources: Sequence[StackResource]) -> list[str]:
    """Node groups (and Karpenter node classes) with EFA interfaces: one subnet, a cluster placement group (unless a
    reservation is used), and a security group on the interfaces with all-traffic rules to and from itself."""
    by_urn = {r.urn: r for r in resources}
    rules = [
        r
        for r in resources
        if r.type
        in (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        )
    ]

    def self_referencing(group_urn: str, kind: str) -> bool:
        return any(
            rule.type.endswith(kind)
            and rule.props.get("ipProtocol") == "-1"
            and rule.referenced("securityGroupId") == {group_urn}
            and rule.referenced("referencedSecurityGroupId") == {group_urn}
            for rule in rules
        )

    problems = efa_node_classes_consistent(resources, self_referencing)
    for node_group in (r for r in resources if r.type == "aws:eks/nodeGroup:NodeGroup"):
        for template in (by_urn[urn] for urn in node_group.referenced("launchTemplate") if urn in by_urn):
            if not any(
                interface.get("interfaceType") == "efa" for interface in template.props.get("networkInterfaces") or []
            ):
                continue
            where = f"node group {node_group.name}"
            if len(node_group.props.get("subnetIds") or []) != 1:
                problems.append(f"{where}: EFA nodes must be in a single subnet (one availability zone)")
            placements = [by_urn[urn] for urn in template.referenced("placement") if urn in by_urn]
            if "capacityReservationSpecification" not in template.props and not any(
                p.props.get("strategy") == "cluster" for p in placements
            ):
                problems.append(f"{where}: EFA nodes need a `cluster` placement group")
            groups = [
                urn
                for urn in template.referenced("networkInterfaces")
                if urn in by_urn and by_urn[urn].type == "aws:ec2/securityGroup:SecurityGroup"
            ]
            if not any(
                self_referencing(urn, "SecurityGroupIngressRule") and self_referencing(urn, "SecurityGroupEgressRule")
                for urn in groups
            ):
                problems.append(f"{where}: no security group on its interfaces allows all traffic to and from itself")
    return problems


def efa_node_classes_consistent(
    resources: Sequence[StackResource], self_referencing: Callable[[str, str], bool]
) -> list[str]:
    """Karpenter's EC2NodeClasses with EFA: one subnet, a placement group unless a reservation is used, an
    `efa-only` interface on every network card of their NodePool's type, and the self-referencing security group."""
    by_urn = {r.urn: r for r in resources}
    classes = {str((r.props.get("metadata") or {}).get("name")): r for r in resources if r.type == NODE_CLASS}
    problems = []
    for pool in (r for r in resources if r.type == NODE_POOL):
        template = ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        node_class = classes.get(str((template.get("nodeClassRef") or {}).get("name")))
        spec = (node_class.props.get("spec") or {}) if node_class else {}
        interfaces = spec.get("networkInterfaces") or []
        cards = {int(i["networkCardIndex"]) for i in interfaces if i.get("interfaceType") == "efa-only"}
        if not node_class or not cards:
            continue
        where = f"node class {node_class.name}"
        if len(spec.get("subnetSelectorTerms") or []) != 1:
            problems.append(f"{where}: EFA nodes must be in a single subnet (one availability zone)")
        if not spec.get("placementGroupSelector") and not spec.get("capacityReservationSelectorTerms"):
            problems.append(f"{where}: EFA nodes need a `cluster` placement group (or a capacity reservation)")
        for instance_type in next(
            (
                r.get("values") or []
                for r in template.get("requirements") or []
                if r.get("key") == "node.kubernetes.io/instance-type"
            ),
            [],
        ):
            facts = catalogue.lookup(instance_type)
            if facts and cards != set(range(facts.network_cards)):
                problems.append(
                    f"{where}: EFA on {len(cards)} of the {facts.network_cards} network cards of {instance_type}"
                )
        groups = [urn for urn in node_class.referenced("spec") if urn in by_urn and by_urn[urn].type == SECURITY_GROUP]
        both = ("SecurityGroupIngressRule", "SecurityGroupEgressRule")
        if not any(all(self_referencing(urn, kind) for kind in both) for urn in groups):
            problems.append(f"{where}: no security group of its nodes allows all traffic to and from itself")
    return problems
