"""Every IAM policy the dev stack creates, linted by parliament: nothing at MEDIUM or above,
and each remaining LOW finding suppressed here with its reason."""

import json

import parliament

from stack import stack_file
from stack.config import parse
from stack.program import build
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


def test_stack_iam_policies_have_no_findings_at_medium_or_above(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    pulumi_mocks.run(lambda: build(parse(values, region)))
    documents = {r.name: r.inputs["policy"] for r in pulumi_mocks.of_type("aws:iam/rolePolicy:RolePolicy")}
    assert len(documents) >= 3  # autoscaler, FSx CSI driver, model bucket
    unexplained = []
    for name, document in documents.items():
        for finding in parliament.analyze_policy_string(document).findings:
            finding = parliament.enhance_finding(finding)
            detail = finding.detail
            actions = tuple(sorted(detail)) if isinstance(detail, list) and all(isinstance(a, str) for a in detail) else (json.dumps(detail, sort_keys=True),)
            if finding.severity in BLOCKING or (finding.issue, actions) not in SUPPRESSED:
                unexplained.append((name, finding.issue, finding.severity, actions))
    assert unexplained == []


def test_the_linter_does_flag_a_bad_policy() -> None:
    document = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}]})
    issues = {parliament.enhance_finding(f).issue for f in parliament.analyze_policy_string(document).findings}
    assert "UNKNOWN_ACTION" in issues
