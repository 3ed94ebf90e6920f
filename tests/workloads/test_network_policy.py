"""The training namespace's policies as rendered, and every pod of it resolves names over UDP and TCP.

A resolver retries over TCP an answer that came back truncated (RFC 7766): a policy that lets UDP 53 alone through
resolves small names and fails large answers silently, in the cluster only.
"""

from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.engine_models import Deployment
from eks_ddp.engine_models.network_policy import Endpoint, allowed, job_traffic
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.network_policy import training_policies
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob, pod_labels

JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=2)
POD = Endpoint("training", pod_labels(JOB))
COREDNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _written(name: str, selector: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A NetworkPolicy of the "research" namespace, written out."""
    metadata = {"name": name, "namespace": "research"}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata,
            "spec": {"podSelector": selector, **spec}}


# A label or a port one character off selects nothing: the policies are written out, not rebuilt from the constants.
PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.19.0.0/16"]
EXPECTED = [
    _written("default-deny", {}, policyTypes=["Ingress", "Egress"]),
    _written(
        "within-namespace",
        {},
        policyTypes=["Ingress", "Egress"],
        ingress=[{"from": [{"podSelector": {}}]}],
        egress=[{"to": [{"podSelector": {}}]}],
    ),
    _written(
        "dns-and-https",
        {},
        policyTypes=["Egress"],
        egress=[
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            },
            {
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": PRIVATE_RANGES}}],
                "ports": [{"protocol": "TCP", "port": 443}],
            },
            {
                "to": [{"ipBlock": {"cidr": "10.100.0.1/32"}}, {"ipBlock": {"cidr": "172.20.0.1/32"}}],
                "ports": [{"protocol": "TCP", "port": 443}],
            },
        ],
    ),
    _written(
        "metrics-scrape",
        {"matchLabels": {"app.kubernetes.io/name": "eks-ddp-trainer"}},
        policyTypes=["Ingress"],
        ingress=[
            {
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                "ports": [{"protocol": "TCP", "port": 9300}],
            }
        ],
    ),
]
CREDENTIAL_AGENT = _written(
    "pod-identity-agent",
    {},
    policyTypes=["Egress"],
    egress=[
        {
            "to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}, {"ipBlock": {"cidr": "fd00:ec2::23/128"}}],
            "ports": [{"protocol": "TCP", "port": 80}],
        }
    ],
)


def test_the_namespace_gets_exactly_these_policies() -> None:
    assert training_policies("research", pod_identity=False) == EXPECTED
    assert training_policies("research", pod_identity=True) == [*EXPECTED, CREDENTIAL_AGENT]


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
