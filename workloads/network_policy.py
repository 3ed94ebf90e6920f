"""The training namespace's NetworkPolicies: deny by default, then exactly what its jobs need.

A job's pods reach each other on any TCP or UDP port (torchrun's rendezvous on the Master's or Worker-0's port, gloo
and NCCL's sockets on ports they pick at run time, the EFA check's fi_pingpong, MPI's SSH); Prometheus, in the
monitoring namespace, scrapes the trainer's metrics port; every pod resolves names through CoreDNS and reaches
HTTPS endpoints (S3, STS for IRSA, the datasets' mirrors, the API server for the GPU quarantine) and, with EKS Pod
Identity, the node's credential agent. Nothing else gets
in: a pod of another namespace reaches none of them. FSx, EFS and EFA traffic never passes through these rules (the
node mounts the file systems; EFA bypasses the kernel's IP stack). The VPC CNI enforces them once its add-on sets
`enableNetworkPolicy` (EKS user guide, "Restrict Pod network traffic with Kubernetes network policies").
"""

import ipaddress
from typing import Any

from eks_ddp.workloads.training_pod import METRICS_PORT, TRAINER_LABEL

CREDENTIAL_AGENT_ADDRESSES, CREDENTIAL_AGENT_PORT = ("169.254.170.23", "fd00:ec2::23"), 80
"""Where the EKS Pod Identity agent serves pods their credentials, on the node (EKS user guide, pod-id-agent-setup.html:
169.254.170.23 and [fd00:ec2::23]; the SDKs call port 80). Pod traffic to it passes the namespace's policies like any
other: without a rule that allows it, the SDK's credential call times out."""
SCRAPER_NAMESPACE = "monitoring"
"""Where the Prometheus of `eks-ddp:monitoring prometheus` runs (infra/addons/prometheus_monitoring.py)."""
NAMESPACE_NAME = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace, its name (Kubernetes 1.22 and later)."""


def _policy(name: str, namespace: str, selector: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": selector, **spec},
    }


def training_policies(namespace: str, pod_identity: bool) -> list[dict[str, Any]]:
    """The namespace's policies; with `pod_identity`, one more lets every pod reach the node's credential agent."""
    every_pod: dict[str, Any] = {}
    dns = {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME: "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }
    https = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    scrapers = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: SCRAPER_NAMESPACE}}}
    agent = {
        "to": [{"ipBlock": {"cidr": str(ipaddress.ip_network(address))}} for address in CREDENTIAL_AGENT_ADDRESSES],
        "ports": [{"protocol": "TCP", "port": CREDENTIAL_AGENT_PORT}],
    }
    credentials = _policy("pod-identity-agent", namespace, every_pod, policyTypes=["Egress"], egress=[agent])
    return [
        _policy("default-deny", namespace, every_pod, policyTypes=["Ingress", "Egress"]),
        _policy(
            "within-namespace",
            namespace,
            every_pod,
            policyTypes=["Ingress", "Egress"],
            ingress=[{"from": [{"podSelector": every_pod}]}],
            egress=[{"to": [{"podSelector": every_pod}]}],
        ),
        _policy("dns-and-https", namespace, every_pod, policyTypes=["Egress"], egress=[dns, https]),
        _policy(
            "metrics-scrape",
            namespace,
            {"matchLabels": TRAINER_LABEL},
            policyTypes=["Ingress"],
            ingress=[{"from": [scrapers], "ports": [{"protocol": "TCP", "port": METRICS_PORT}]}],
        ),
    ] + ([credentials] if pod_identity else [])
