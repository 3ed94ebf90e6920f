"""Each policy with a compliant and a violating resource, and the whole dev stack through all of them."""

import json

import pytest
from pulumi_policy import PolicyResourceOptions, ResourceValidationArgs

from eks_ddp.infra.addons.kueue import QUEUE_LABEL
from eks_ddp.infra.aws.iam import irsa_trust, pod_identity_trust
from eks_ddp.policy.efa_groups import efa_groups_consistent
from eks_ddp.policy.pack import POLICIES, resource_validation
from eks_ddp.policy.resources import StackResource
from eks_ddp.policy.rules import RESOURCE_RULES
from eks_ddp.policy.stack_rules import pods_denied_by_default, training_jobs_queued
from eks_ddp.tools import stack_file
from eks_ddp.workloads import pytorchjob, trainjob
from eks_ddp.stack.config import parse
from eks_ddp.stack.program import build
from tests.pulumi_harness import Recorded

RULES = {rule.name: rule for rule in RESOURCE_RULES}
PYTORCHJOB, TRAINJOB = "kubernetes:kubeflow.org/v1:PyTorchJob", "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
ROLE_TRUST = irsa_trust("arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/X", "oidc.eks.us-east-1.amazonaws.com/id/X", "training", "trainer")
UNSCOPED_TRUST = json.loads(json.dumps(ROLE_TRUST))
del UNSCOPED_TRUST["Statement"][0]["Condition"]["StringEquals"]["oidc.eks.us-east-1.amazonaws.com/id/X:aud"]
POD_IDENTITY_TRUST = pod_identity_trust("arn:aws:eks:us-east-1:123456789012:cluster/eks-ddp", "training", "trainer")
ANY_ASSOCIATION = json.loads(json.dumps(POD_IDENTITY_TRUST))
del ANY_ASSOCIATION["Statement"][0]["Condition"]
EFA_POD = {"nodeSelector": {"vpc.amazonaws.com/efa.present": "true"}, "containers": [{"name": "pytorch", "resources": {"limits": {"vpc.amazonaws.com/efa": "1"}}}]}

CASES = [
    ("s3-public-access-blocked", "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
     {"blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True, "restrictPublicBuckets": True},
     {"blockPublicAcls": True, "blockPublicPolicy": False, "ignorePublicAcls": True, "restrictPublicBuckets": True}, "blockPublicPolicy must be true"),
    ("s3-encrypted", "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
     {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}, {"rules": []}, "no default server-side encryption"),
    ("s3-tls-only", "aws:s3/bucketPolicy:BucketPolicy",
     {"policy": json.dumps({"Statement": [{"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})},
     {"policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:GetObject"}]})}, "does not deny requests without TLS"),
    ("launch-template-hardened", "aws:ec2/launchTemplate:LaunchTemplate",
     {"metadataOptions": {"httpTokens": "required"}, "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}]},
     {"metadataOptions": {"httpTokens": "optional"}, "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}]}, "IMDSv2 is not required"),
    ("no-open-ingress", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
     {"cidrIpv4": "10.0.0.0/16"}, {"cidrIpv4": "0.0.0.0/0"}, "ingress from 0.0.0.0/0"),
    ("no-open-ingress", "aws:ec2/securityGroup:SecurityGroup",
     {"ingress": [{"cidrBlocks": ["10.0.0.0/8"]}]}, {"ingress": [{"ipv6CidrBlocks": ["::/0"]}]}, "ingress from ::/0"),
    ("eks-encrypted-and-logged", "eks:index:Cluster",
     {"encryptionConfigKeyArn": "arn:aws:kms:us-east-1:1:key/x", "enabledClusterLogTypes": ["api"]}, {"enabledClusterLogTypes": []}, "secrets encryption"),
    ("iam-oidc-trust-conditions", "aws:iam/role:Role",
     {"assumeRolePolicy": json.dumps(ROLE_TRUST)}, {"assumeRolePolicy": json.dumps(UNSCOPED_TRUST)}, "no `aud` condition"),
    ("iam-pod-identity-trust-scoped", "aws:iam/role:Role",
     {"assumeRolePolicy": json.dumps(POD_IDENTITY_TRUST)}, {"assumeRolePolicy": json.dumps(ANY_ASSOCIATION)},
     "no `aws:RequestTag/kubernetes-service-account` condition"),
    ("iam-no-wildcard-admin", "aws:iam/rolePolicy:RolePolicy",
     {"policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})},
     {"policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})}, 'allows "Action": "*"'),
    ("ecr-scanned-and-immutable", "aws:ecr/repository:Repository",
     {"imageScanningConfiguration": {"scanOnPush": True}, "imageTagMutability": "IMMUTABLE"}, {"imageTagMutability": "MUTABLE"}, "image tags are mutable"),
    ("namespace-pod-security", "kubernetes:core/v1:Namespace",
     {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}},
     {"metadata": {"labels": {"purpose": "training"}}}, "pod-security.kubernetes.io/enforce is unset"),
    ("pytorchjob-sane", "kubernetes:kubeflow.org/v1:PyTorchJob",
     {"spec": {"nprocPerNode": "1", "pytorchReplicaSpecs": {"Master": {"template": {"spec": EFA_POD}}}}},
     {"spec": {"nprocPerNode": "auto", "pytorchReplicaSpecs": {"Master": {"template": {"spec": {**EFA_POD, "containers": [{"name": "pytorch"}]}}}}}},
     "without requesting vpc.amazonaws.com/efa"),
    ("trainjob-sane", "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
     {"spec": {"trainer": {"numNodes": 2, "numProcPerNode": 1}}}, {"spec": {"trainer": {"numNodes": 2}}}, "numProcPerNode is unset"),
    ("training-runtime-efa", "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
     {"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": EFA_POD}}}}]}}}},
     {"spec": {"template": {"spec": {"replicatedJobs": [
         {"name": "node", "template": {"spec": {"template": {"spec": {**EFA_POD, "containers": [{"name": "node"}]}}}}}]}}}},
     "replicated job node runs on EFA nodes without requesting"),
]


@pytest.mark.parametrize(("rule", "type_", "good", "bad", "message"), CASES, ids=[f"{case[0]}:{case[1].rsplit(':', 1)[1]}" for case in CASES])
def test_rule_passes_compliant_and_flags_violating(rule: str, type_: str, good: dict[str, object], bad: dict[str, object], message: str) -> None:
    assert RULES[rule].check(type_, good) == []
    problems = RULES[rule].check(type_, bad)
    assert any(message in problem for problem in problems), problems


def test_every_rule_has_a_case() -> None:
    assert {case[0] for case in CASES} == set(RULES)


def test_the_pack_reports_through_the_policy_engine_api() -> None:
    assert {p.name for p in POLICIES} == {*RULES, "efa-node-groups-consistent", "pods-denied-by-default", "training-jobs-queued"}
    reported: list[str] = []
    options = PolicyResourceOptions(False, [], None, [], None, [])  # type: ignore[arg-type]
    args = ResourceValidationArgs("aws:ecr/repository:Repository", {"imageTagMutability": "MUTABLE"}, "urn:x", "repo", options, None)
    resource_validation(RULES["ecr-scanned-and-immutable"])(args, lambda message, urn=None: reported.append(message))
    assert reported == ["repo: images are not scanned on push", "repo: image tags are mutable"]


def test_the_pack_reports_a_training_job_as_its_component_refuses_it() -> None:
    """One rule each (workloads.pytorchjob, workloads.trainjob): what the pack reports of any job in the stack, the
    component refuses of its own in the same words, before registering it."""
    replicas = {"Master": {"template": {"spec": {"containers": [{"name": "main", "image": "i"}]}}}}
    job = {"metadata": {"name": "j"}, "spec": {"nprocPerNode": "auto", "pytorchReplicaSpecs": replicas}}
    assert RULES["pytorchjob-sane"].check(PYTORCHJOB, job) == pytorchjob.admission_errors(job) == [
        "nprocPerNode is 'auto' (on CPU nodes torchrun then starts one process per host vCPU)",
        "Master has no container named pytorch",
    ]
    unset = {"metadata": {"name": "j"}, "spec": {"trainer": {"numNodes": 2}}}
    reported = RULES["trainjob-sane"].check(TRAINJOB, unset)
    assert reported and set(reported) <= set(trainjob.admission_errors(unset, {}))


def _stack_resources(recorded: Recorded) -> list[StackResource]:
    return [StackResource(r.type, r.name, r.urn, r.inputs, r.property_dependencies) for r in recorded.monitor.registrations]


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_dev_stack_passes_every_policy(pulumi_mocks: Recorded, operator: str, autoscaler: str) -> None:
    values, region = stack_file.load("dev")
    values = {**values, "fabricCheckImage": "registry.example/efa:1", "trainingOperator": operator,
              "autoscaler": autoscaler}
    pulumi_mocks.run(lambda: build(parse(values, region)))
    problems = [f"{r.name}: {problem}" for r in pulumi_mocks.monitor.registrations for rule in RESOURCE_RULES if r.type in rule.types for problem in rule.check(r.type, r.inputs)]
    assert problems == []
    checked = [r for r in pulumi_mocks.monitor.registrations if any(r.type in rule.types for rule in RESOURCE_RULES)]
    assert len({r.type for r in checked}) >= 9  # the rules really met the stack's resources
    assert efa_groups_consistent(_stack_resources(pulumi_mocks)) == []
    assert pods_denied_by_default(_stack_resources(pulumi_mocks)) == []


def test_a_pod_without_a_default_deny_policy_is_reported(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    pulumi_mocks.run(lambda: build(parse(values, region)))
    resources = _stack_resources(pulumi_mocks)
    kept = ("eks-ddp-metrics-scrape", "eks-ddp-dns-and-https")  # trainer pods only; egress only: neither isolates all
    resources = [r for r in resources if "NetworkPolicy" not in r.type or r.name in kept]
    assert sorted(pods_denied_by_default(resources)) == [
        f"{kind} {name}: namespace training has no NetworkPolicy that denies its pods' traffic by default"
        for kind, name in (("Job", "eks-ddp-data-job"), ("Job", "eks-ddp-evaluate-job"), ("PyTorchJob", "eks-ddp-train-job"))
    ]


def test_efa_stack_rule_flags_a_broken_group(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    pulumi_mocks.run(lambda: build(parse(values, region)))
    resources = _stack_resources(pulumi_mocks)
    without_egress = [r for r in resources if r.type != "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule" or "efa" not in r.name]
    assert efa_groups_consistent(without_egress) == ["node group eks-ddp-workers-nodes: no security group on its interfaces allows all traffic to and from itself"]
    without_placement = [r for r in resources if r.type != "aws:ec2/placementGroup:PlacementGroup"]
    assert efa_groups_consistent(without_placement) == ["node group eks-ddp-workers-nodes: EFA nodes need a `cluster` placement group"]
    two_subnets = [StackResource(r.type, r.name, r.urn, {**r.props, "subnetIds": ["a", "b"]} if r.type == "aws:eks/nodeGroup:NodeGroup" and "workers" in r.name else r.props, r.property_dependencies) for r in resources]
    assert efa_groups_consistent(two_subnets) == ["node group eks-ddp-workers-nodes: EFA nodes must be in a single subnet (one availability zone)"]


def test_with_queues_every_job_on_a_training_group_is_in_one(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("gpu")
    pulumi_mocks.run(lambda: build(parse({**values, "queueing": "kueue"}, region)))
    resources = _stack_resources(pulumi_mocks)
    assert training_jobs_queued(resources) == []
    queued = [r for r in resources if QUEUE_LABEL in ((r.props.get("metadata") or {}).get("labels") or {})]
    assert sorted(r.type.rsplit(":", 1)[1] for r in queued) == ["Job", "MPIJob", "PyTorchJob"]  # EFA check, NCCL
    unlabelled = [StackResource(r.type, r.name, r.urn, {**r.props, "metadata": {
        **r.props["metadata"], "labels": {k: v for k, v in r.props["metadata"]["labels"].items() if k != QUEUE_LABEL}}},
        r.property_dependencies) if r in queued else r for r in resources]
    assert sorted(training_jobs_queued(unlabelled)) == [
        f"{kind} {name}: no queue; label it {QUEUE_LABEL} with one of training"
        for kind, name in (("Job", "eks-ddp-efa-check-job"), ("MPIJob", "eks-ddp-nccl-check-mpijob"),
                           ("PyTorchJob", "eks-ddp-train-job"))
    ]
