"""The training namespace's NetworkPolicies: deny by default, then exactly what its jobs need.

A job's pods reach each other on any TCP or UDP port (torchrun's rendezvous on the Master's or Worker-0's port, gloo
and NCCL's sockets on ports they pick at run time, the EFA check's fi_pingpong, MPI's SSH); Prometheus, in the
monitoring namespace, scrapes the trainer's metrics port; every pod resolves names through CoreDNS, reaches HTTPS
endpoints outside the cluster (S3, STS for IRSA, the datasets' mirrors) and the API server (for the GPU quarantine)
and, with EKS Pod Identity, the node's credential agent. Nothing else gets in: a pod of another namespace reaches
none of them; nor does HTTPS out reach a pod or Service of the cluster (CLUSTER_RANGES). FSx, EFS and EFA traffic
never passes through these rules (the node mounts the file systems; EFA bypasses the kernel's IP stack). The VPC CNI
enforces them once its add-on sets `enableNetworkPolicy` (EKS user guide, "Restrict Pod network traffic with
Kubernetes network policies").
"""

import ipaddress
from typing import Any

from eks_ddp.workloads.training_pod import METRICS_PORT, TRAINER_LABEL

CREDENTIAL_AGENT_ADDRESSES, CREDENTIAL_AGENT_PORT = ("169.254.170.23", "fd00:ec2::23"), 80
"""Where the EKS Pod Identity agent serves pods their credentials, on the node (EKS user guide, pod-id-agent-setup.html:
169.254.170.23 and [fd00:ec2::23]; the SDKs call port 80). Pod traffic to it passes the namespace's policies like any
other: without a rule that allows it, the SDK's credential call times out."""
DNS_PORTS = (("UDP", 53), ("TCP", 53))
"""Where CoreDNS answers, by protocol and port. An answer too large for one UDP datagram (over 512 bytes, or the size
the query's EDNS announces) comes back truncated, its TC bit set, and the resolver asks again over TCP (RFC 7766,
"DNS Transport over TCP"): without TCP 53 that retry is dropped, and the name fails to resolve."""
SCRAPER_NAMESPACE = "monitoring"
"""Where the Prometheus of `eks-ddp:monitoring prometheus` runs (infra/addons/prometheus_monitoring.py)."""
NAMESPACE_NAME = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace, its name (Kubernetes 1.22 and later)."""
CLUSTER_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.19.0.0/16")
"""What HTTPS out excepts: where a cluster's own addresses lie. The AWS network policy controller hands an ipBlock to
the node's agent as a plain CIDR with its `except` (aws/amazon-network-policy-controller-k8s v1.1.7,
pkg/resolvers/endpoints.go buildIPBlockEndpoint), so 0.0.0.0/0 alone takes in every pod (the VPC CNI gives pods VPC
addresses) and every Service's ClusterIP (the agent sees a pod's egress before kube-proxy's DNAT: the same file,
getMatchingServiceClusterIPs). A cluster's Services come from RFC 1918 (EKS API reference,
KubernetesNetworkConfigRequest.serviceIpv4Cidr); its VPC's blocks from RFC 1918, 100.64.0.0/10 or 198.19.0.0/16 (EKS
user guide, "VPC and subnet requirements"), or a publicly routable block, which this list cannot know: a VPC with one
needs a policy of its own. Private addresses outside the cluster (a peered VPC, an interface endpoint) are excepted
too: a policy of your own in the namespace opens what your jobs need there."""
API_SERVER_ADDRESSES = ("10.100.0.1", "172.20.0.1")
"""The `kubernetes` Service's ClusterIP, through which pods reach the API server: the first address of the Service
range (kubernetes v1.35.0 pkg/controlplane/apiserver/options/options.go ServiceIPRange), which EKS takes from
10.100.0.0/16 or 172.20.0.0/16 when none is given (EKS API reference, KubernetesNetworkConfigRequest.serviceIpv4Cidr;
infra.aws.cluster gives none). Both are allowed: the one the cluster does not use is, in its VPC, the VPC router's
reserved address (a subnet is at most a /16, so one holding it starts at 10.100.0.0 or 172.20.0.0: VPC user guide,
"Subnet CIDR blocks", the second address is reserved)."""


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
        "ports": [{"protocol": protocol, "port": port} for protocol, port in DNS_PORTS],
    }
    https_port = [{"protocol": "TCP", "port": 443}]
    https = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(CLUSTER_RANGES)}}], "ports": https_port}
    api_server = {"to": [{"ipBlock": {"cidr": f"{ip}/32"}} for ip in API_SERVER_ADDRESSES], "ports": https_port}
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
        _policy("dns-and-https", namespace, every_pod, policyTypes=["Egress"], egress=[dns, https, api_server]),
        _policy(
            "metrics-scrape",
            namespace,
            {"matchLabels": TRAINER_LABEL},
            policyTypes=["Ingress"],
            ingress=[{"from": [scrapers], "ports": [{"protocol": "TCP", "port": METRICS_PORT}]}],
        ),
    ] + ([credentials] if pod_identity else [])
