"""Every pod of the training namespace resolves names over UDP and TCP, and the rehearsal tells when it cannot.

A resolver retries over TCP an answer that came back truncated (RFC 7766): a policy that lets UDP 53 alone through
resolves small names and fails large answers silently, in the cluster only.
"""

from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.stack.engine_rules import Deployment
from eks_ddp.stack.engine_rules.network_policy import Endpoint, allowed, job_traffic
from eks_ddp.stack.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.network_policy import training_policies
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob, pod_labels

JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=2)
POD = Endpoint("training", pod_labels(JOB))
COREDNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


@pytest.mark.parametrize("pod_identity", [True, False], ids=["pod-identity", "irsa"])
@pytest.mark.parametrize("protocol", ["UDP", "TCP"])
def test_every_pod_reaches_coredns_on_port_53(protocol: str, pod_identity: bool) -> None:
    policies = training_policies("training", pod_identity)
    assert allowed(policies, POD, COREDNS, 53, protocol)
    assert not allowed(policies, POD, Endpoint("kube-system", {"k8s-app": "metrics-server"}), 53, protocol)


def _deployment(policies: list[dict[str, Any]]) -> Deployment:
    """The namespace's policies and a 2-pod PyTorchJob in it, as the stack registers them."""
    job = pytorchjob.render(JOB, NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1))
    objects = [(POLICY, policy) for policy in policies] + [("kubernetes:kubeflow.org/v1:PyTorchJob", job)]
    registrations = [
        Registration(kind, manifest["metadata"]["name"], f"urn:{kind}::{manifest['metadata']['name']}", "", manifest)
        for kind, manifest in objects
    ]
    return Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 22))


@pytest.mark.parametrize("protocol", ["UDP", "TCP"])
def test_the_rehearsal_reports_dns_blocked_over_either_protocol(protocol: str) -> None:
    policies = training_policies("training", pod_identity=False)
    assert list(job_traffic(_deployment(policies))) == []
    egress = [rule for policy in policies for rule in policy["spec"].get("egress", [])]
    (dns,) = [rule for rule in egress if any(port["port"] == 53 for port in rule.get("ports", []))]
    dns["ports"] = [port for port in dns["ports"] if port["protocol"] != protocol]
    problems = {finding.problem for finding in job_traffic(_deployment(policies))}
    assert problems == {f"DNS over {protocol} is blocked"}
