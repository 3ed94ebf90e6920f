"""NetworkPolicy as the VPC CNI's network policy agent enforces it: what a job's pods may send and receive.

No CNI runs here, so nothing enforces a policy offline: this model stands in for the agent, and the tests show it on
the cases the stack relies on (tests/stack/test_network_policy.py), not against the agent itself.
Encoded from the API's own definition (kubernetes/api networking/v1 types.go, Kubernetes 1.35, and the "Network
Policies" concept page): a pod selected by a policy of its namespace whose `policyTypes` name a direction is
isolated in that direction, and then only what some selecting policy's rule allows passes; a connection needs the
sender's egress and the receiver's ingress. A rule's peer is a `podSelector` (pods of the policy's namespace), a
`namespaceSelector` (every pod of those namespaces), both (those pods of those namespaces) or an `ipBlock`: any
address in its CIDR but its `except`, a pod's or a Service's ClusterIP too (aws/amazon-network-policy-controller-k8s
v1.1.7 pkg/resolvers/endpoints.go hands the agent the CIDR as it is, and the agent sees a pod's egress before
kube-proxy's DNAT); no `from`/`to` means any peer, no `ports` any port. A null selector (YAML's `podSelector:` with
nothing under it) is an absent one: a peer's selectors are pointers, nil when null, and the policy's `podSelector` a
struct, empty when null. `matchExpressions` are not used by the stack and are refused here rather than guessed.
"""

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eks_ddp.engine_models.base import Deployment, Finding, located
from eks_ddp.workloads.pod_templates import pod_templates
from eks_ddp.workloads import indexed_job, pytorchjob, trainjob
from eks_ddp.workloads.network_policy import (
    API_SERVER_ADDRESSES,
    CREDENTIAL_AGENT_ADDRESSES,
    CREDENTIAL_AGENT_PORT,
    DNS_PORTS,
    NAMESPACE_NAME,
    SCRAPER_NAMESPACE,
)
from eks_ddp.workloads.training_pod import METRICS_PORT, TRAINER_LABEL

RENDEZVOUS_PORTS = sorted({pytorchjob.MASTER_PORT, trainjob.MASTER_PORT, indexed_job.MASTER_PORT})
COLLECTIVE_PORT = 45123  # any port gloo or NCCL picks for its sockets at run time


@dataclass(frozen=True)
class Endpoint:
    """A pod (its namespace and labels, and its address where an ipBlock may take it in) or, with an address and no
    namespace, something no policy of the cluster applies to: a host outside it, a Service's ClusterIP."""

    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    address: str | None = None


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise ValueError("matchExpressions are not encoded")
    return all(labels.get(key) == value for key, value in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: dict[str, Any], endpoint: Endpoint, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        if endpoint.address is None:
            return False
        address = ipaddress.ip_address(endpoint.address)
        excepted = any(address in ipaddress.ip_network(cidr) for cidr in peer["ipBlock"].get("except") or [])
        return address in ipaddress.ip_network(peer["ipBlock"]["cidr"]) and not excepted
    if endpoint.namespace is None:
        return False
    if peer.get("namespaceSelector") is not None:
        in_namespace = _selects(peer["namespaceSelector"], {NAMESPACE_NAME: endpoint.namespace})
    else:
        in_namespace = endpoint.namespace == policy_namespace
    return in_namespace and _selects(peer.get("podSelector") or {}, endpoint.labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports)


def _types(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _direction_allows(
    policies: list[dict[str, Any]], pod: Endpoint, peer: Endpoint, port: int, protocol: str, direction: str
) -> bool:
    """Whether `pod` may talk to (`Egress`) or hear from (`Ingress`) `peer`."""
    if pod.namespace is None:
        return True  # outside the cluster: no policy applies
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and _selects(p["spec"].get("podSelector") or {}, pod.labels)
        and direction in _types(p)
    ]
    if not selecting:
        return True
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    return any(
        (not rule.get(peers) or any(_peer_matches(x, peer, p["metadata"]["namespace"]) for x in rule[peers]))
        and _port_matches(rule.get("ports"), port, protocol)
        for p in selecting
        for rule in p["spec"].get(key) or []
    )


def allowed(
    policies: list[dict[str, Any]], source: Endpoint, target: Endpoint, port: int, protocol: str = "TCP"
) -> bool:
    """Whether a connection from `source` to `target`'s `port` passes every policy on both sides."""
    return _direction_allows(policies, source, target, port, protocol, "Egress") and _direction_allows(
        policies, target, source, port, protocol, "Ingress"
    )


def _expected(
    pod: Endpoint, pod_identity: bool, pod_address: str | None
) -> Iterator[tuple[str, Endpoint, Endpoint, int, str, bool]]:
    """What a job's pod must be able to do (with `pod_identity`, get its credentials from the node's agent), and what
    must not reach it or be reached from it (a pod of another namespace, at `pod_address` where the VPC is known, with
    the pod's own labels: another team's job carries them too)."""
    scraper = Endpoint(SCRAPER_NAMESPACE, {"app.kubernetes.io/name": "prometheus"})
    dns = Endpoint("kube-system", {"k8s-app": "kube-dns"})
    stranger = Endpoint("default", pod.labels, pod_address)
    for port in RENDEZVOUS_PORTS:
        yield "rendezvous with the job's other pods", pod, pod, port, "TCP", True
    yield "collectives between the job's pods", pod, pod, COLLECTIVE_PORT, "TCP", True
    for protocol, port in DNS_PORTS:
        yield f"DNS over {protocol}", pod, dns, port, protocol, True
    yield "HTTPS to S3 and STS", pod, Endpoint(address="52.216.0.10"), 443, "TCP", True
    for api_server in API_SERVER_ADDRESSES:
        service = Endpoint(address=str(ipaddress.ip_address(api_server) + 1000))
        yield f"HTTPS to the API server's Service ({api_server})", pod, Endpoint(address=api_server), 443, "TCP", True
        yield f"HTTPS to another Service of the cluster ({service.address})", pod, service, 443, "TCP", False
    if pod_address is not None:
        yield "HTTPS to a pod of another namespace", pod, stranger, 443, "TCP", False
    if pod_identity:
        what = "its EKS Pod Identity credentials from the node's agent"
        yield what, pod, Endpoint(address=CREDENTIAL_AGENT_ADDRESSES[0]), CREDENTIAL_AGENT_PORT, "TCP", True
    if TRAINER_LABEL.items() <= pod.labels.items():
        yield "Prometheus scraping the metrics port", scraper, pod, METRICS_PORT, "TCP", True
    for port in RENDEZVOUS_PORTS:
        yield "a pod of another namespace reaching the rendezvous port", stranger, pod, port, "TCP", False
    yield "a pod of another namespace reaching the metrics port", stranger, pod, METRICS_PORT, "TCP", False


def job_traffic(deployment: Deployment) -> Iterator[Finding]:
    """In a namespace with NetworkPolicies, every pod the stack creates can rendezvous, run its collectives, resolve
    names, reach HTTPS and the API server and be scraped, a pod whose service account has an EKS Pod Identity
    association can reach the node's credential agent, no pod of another namespace reaches it, and its HTTPS reaches
    no other pod or Service of the cluster."""
    policies = [r.inputs for r in deployment.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    associated = {
        (r.inputs.get("namespace"), r.inputs.get("serviceAccount"))
        for r in deployment.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    guarded = {policy["metadata"]["namespace"] for policy in policies}
    vpcs = deployment.of_type("aws:ec2/vpc:Vpc")  # none with an existing VPC: its pods' addresses are not known here
    pod_address = str(ipaddress.ip_network(vpcs[0].inputs["cidrBlock"])[100]) if vpcs else None
    for registration in deployment.kubernetes_objects():
        namespace = registration.inputs.get("metadata", {}).get("namespace")
        if namespace not in guarded:
            continue
        for template in pod_templates(registration.inputs):
            pod = Endpoint(namespace, dict((template.get("metadata") or {}).get("labels") or {}))
            account = (template.get("spec") or {}).get("serviceAccountName", "default")
            expected = _expected(pod, (namespace, account) in associated, pod_address)
            for what, source, target, port, protocol, wanted in expected:
                if allowed(policies, source, target, port, protocol) != wanted:
                    problem = "is blocked" if wanted else "gets through"
                    yield Finding("network-policy", located(registration), "spec", f"{what} {problem}")
