"""Every IAM policy the dev stack creates, linted by parliament: nothing at MEDIUM or above,
and each remaining LOW finding suppressed here with its reason."""

import json

import parliament
import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.stack.program import build
from tests.pulumi_harness import Recorded

BLOCKING = {"MEDIUM", "HIGH", "CRITICAL"}
# (issue, actions) -> why Resource "*" is right there.
SUPPRESSED = {
    ("RESOURCE_STAR", ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")):
        "AWS's pattern for the autoscaler: any group, but only where aws:ResourceTag/k8s.io/cluster-autoscaler/<cluster> is owned",
    ("RESOURCE_STAR", ("fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:UpdateFileSystem")):
        "the CSI driver creates file systems whose ARNs do not exist before it runs",
    ("RESOURCE_STAR", ("s3:GetBucketLocation", "s3:ListBucket")):
        "FSx data repositories may point at any bucket the user names in s3ImportPath/s3ExportPath",
}

# Findings that would be at MEDIUM, accepted for one reason only: the policy is AWS's own, as published, and the
# finding comes from parliament judging each statement alone. Karpenter's node-lifecycle policy
# (aws/karpenter-provider-aws v1.14.1 cloudformation.yaml) splits ec2:RunInstances and ec2:CreateFleet over three
# statements: existing resources (image, subnet, security group) without tag conditions, the resources a launch
# creates only with the cluster's request tags. parliament wants every resource type an action requires in each
# statement; merging them would drop the tag conditions from the created instances.
AS_PUBLISHED = {("eks-ddp-karpenter-node-lifecycle", "RESOURCE_MISMATCH"): {"ec2:RunInstances", "ec2:CreateFleet"}}


def _accepted(name: str, issue: str, detail: object) -> bool:
    actions = AS_PUBLISHED.get((name, issue))
    return actions is not None and isinstance(detail, list) and {d["action"] for d in detail} <= actions


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
def test_stack_iam_policies_have_no_findings_at_medium_or_above(pulumi_mocks: Recorded, autoscaler: str) -> None:
    values, region = stack_file.load("dev")
    pulumi_mocks.run(lambda: build(parse({**values, "autoscaler": autoscaler}, region)))
    documents = {r.name: r.inputs["policy"] for kind in ("rolePolicy:RolePolicy", "policy:Policy")
                 for r in pulumi_mocks.of_type(f"aws:iam/{kind}")}
    # The autoscaler's (one, or Karpenter's five), the FSx CSI driver's, the model bucket's.
    assert len(documents) >= (3 if autoscaler == "cluster-autoscaler" else 7), sorted(documents)
    unexplained = []
    for name, document in documents.items():
        for finding in parliament.analyze_policy_string(document).findings:
            finding = parliament.enhance_finding(finding)
            detail = finding.detail
            actions = tuple(sorted(detail)) if isinstance(detail, list) and all(isinstance(a, str) for a in detail) else (json.dumps(detail, sort_keys=True),)
            if _accepted(name, finding.issue, detail):
                continue
            if finding.severity in BLOCKING or (finding.issue, actions) not in SUPPRESSED:
                unexplained.append((name, finding.issue, finding.severity, actions))
    assert unexplained == []


def test_the_linter_does_flag_a_bad_policy() -> None:
    document = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}]})
    issues = {parliament.enhance_finding(f).issue for f in parliament.analyze_policy_string(document).findings}
    assert "UNKNOWN_ACTION" in issues
