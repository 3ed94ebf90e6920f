"""The rehearsal's NetworkPolicy model (engine_models/network_policy.py): the API's rules on policies written
for the case (kubernetes/api networking/v1 types.go), and what `job_traffic` reports, finding for finding, when the
namespace's policies break what a job needs or let another namespace in."""

from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.engine_models import Deployment, Finding
from eks_ddp.engine_models.network_policy import Endpoint, allowed, job_traffic
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.network_policy import training_policies
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob

TRAINER = Endpoint("training", {"app.kubernetes.io/name": "eks-ddp-trainer", "eks-ddp/job": "mnist-ddp"})
HELPER = Endpoint("training", {"app": "data-prep"})  # a pod of the namespace that is no trainer
STRANGER = Endpoint("default", {"app": "curious"})
PROMETHEUS = Endpoint("monitoring", {"app.kubernetes.io/name": "prometheus"})
S3 = Endpoint(address="52.216.0.10")
MONITORING = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
TRAINERS = {"matchLabels": {"app.kubernetes.io/name": "eks-ddp-trainer"}}
TCP = {"protocol": "TCP"}  # every TCP port


def _policy(namespace: str, selector: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "case", "namespace": namespace}, "spec": {"podSelector": selector, **spec}}


def test_a_policy_isolates_the_pods_it_selects_in_the_directions_it_names() -> None:
    scrape = [{"from": [{"namespaceSelector": MONITORING}]}]
    scrape_only = [_policy("training", TRAINERS, policyTypes=["Ingress"], ingress=scrape)]
    assert allowed(scrape_only, PROMETHEUS, TRAINER, 9300) and not allowed(scrape_only, STRANGER, TRAINER, 9300)
    assert allowed(scrape_only, STRANGER, HELPER, 9300)  # not selected: not isolated
    assert allowed(scrape_only, TRAINER, S3, 443)  # isolated for ingress only


def test_a_policy_isolates_pods_of_its_own_namespace_only() -> None:
    elsewhere = [_policy("research", {}, policyTypes=["Ingress", "Egress"])]
    assert allowed(elsewhere, STRANGER, TRAINER, 23456) and allowed(elsewhere, TRAINER, S3, 443)


@pytest.mark.parametrize(
    ("spec", "stranger_gets_in", "trainer_gets_out"),
    [
        ({"policyTypes": ["Egress"]}, True, False),
        ({"ingress": [{"from": [{"podSelector": {}}]}]}, False, True),  # no policyTypes, no egress: Ingress
        ({"egress": [{"to": [{"podSelector": {}}]}]}, False, False),  # no policyTypes, egress: Ingress and Egress
        ({"policyTypes": ["Ingress"], "egress": [{"to": [{"podSelector": {}}]}]}, False, True),
    ],
)
def test_policy_types_name_the_isolated_directions_and_default_from_the_rules(
    spec: dict[str, Any], stranger_gets_in: bool, trainer_gets_out: bool
) -> None:
    """types.go, NetworkPolicySpec.policyTypes: unset, every policy affects ingress, and egress if it has an egress
    section."""
    policies = [_policy("training", {}, **spec)]
    assert allowed(policies, STRANGER, TRAINER, 23456) is stranger_gets_in
    assert allowed(policies, TRAINER, S3, 443) is trainer_gets_out


def test_a_port_without_a_protocol_is_tcp() -> None:
    """types.go, NetworkPolicyPort.protocol: "If not specified, this field defaults to TCP"."""
    https = [_policy("training", {}, policyTypes=["Egress"], egress=[{"ports": [{"port": 443}]}])]
    assert allowed(https, TRAINER, S3, 443, "TCP") and not allowed(https, TRAINER, S3, 443, "UDP")


def test_a_null_selector_is_an_absent_one() -> None:
    """YAML's `podSelector:` with nothing under it is null: a policy's podSelector then selects every pod of its
    namespace, a peer's podSelector every pod of the namespaces its namespaceSelector selects, and a peer's
    namespaceSelector the policy's own namespace (types.go: a peer's selectors are pointers, unset when null)."""
    peers = [{"namespaceSelector": MONITORING, "podSelector": None}, {"namespaceSelector": None, "podSelector": {}}]
    policies = [_policy("training", None, policyTypes=["Ingress"], ingress=[{"from": peers}])]
    assert allowed(policies, PROMETHEUS, HELPER, 9300) and allowed(policies, TRAINER, HELPER, 9300)
    assert not allowed(policies, STRANGER, HELPER, 9300)


def test_match_expressions_are_refused_not_guessed() -> None:
    policies = [_policy("training", {"matchExpressions": [{"key": "app", "operator": "Exists"}]})]
    with pytest.raises(ValueError, match="^matchExpressions are not encoded$"):
        allowed(policies, STRANGER, TRAINER, 23456)


JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=2)
TARGET = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1)
PREPARE = {  # a pod that carries exactly the trainer's label
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "prepare", "namespace": "training"},
    "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": "eks-ddp-trainer"}}, "spec": {}}},
}


def _registration(type_: str, name: str, inputs: dict[str, Any]) -> Registration:
    return Registration(type_, name, f"urn:{type_}::{name}", "", inputs)


def _findings(
    policies: list[dict[str, Any]], *objects: dict[str, Any], associated: tuple[str, ...] = ()
) -> set[Finding]:
    """What the rehearsal reports for `objects` (JOB's PyTorchJob when none) and `policies` in the training namespace,
    in a 10.0.0.0/16 VPC, with EKS Pod Identity associations for the `associated` service accounts, after an object
    Pulumi names itself (no metadata, no namespace: the rule passes over it)."""
    registrations = [
        _registration("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"}),
        _registration("kubernetes:core/v1:ConfigMap", "auto-named", {"apiVersion": "v1", "kind": "ConfigMap"}),
        *(
            _registration(
                "aws:eks/podIdentityAssociation:PodIdentityAssociation",
                account,
                {"clusterName": "eks-ddp", "namespace": "training", "serviceAccount": account},
            )
            for account in associated
        ),
        *(_registration("kubernetes:networking.k8s.io/v1:NetworkPolicy", p["metadata"]["name"], p) for p in policies),
        *(
            _registration(f"kubernetes:{o['apiVersion']}:{o['kind']}", o["metadata"]["name"], o)
            for o in objects or [pytorchjob.render(JOB, TARGET)]
        ),
    ]
    return set(job_traffic(Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 22))))


def _reported(*problems: str, resource: str = "PyTorchJob mnist-ddp") -> set[Finding]:
    return {Finding("network-policy", resource, "spec", problem) for problem in problems}


def _named(policies: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(policy for policy in policies if policy["metadata"]["name"] == name)


def _all_but(name: str) -> list[dict[str, Any]]:
    """The namespace's policies (for IRSA) but the one called `name`."""
    return [p for p in training_policies("training", pod_identity=False) if p["metadata"]["name"] != name]


def test_without_the_within_namespace_policy_the_job_can_neither_rendezvous_nor_run_collectives() -> None:
    assert _findings(_all_but("within-namespace")) == _reported(
        "rendezvous with the job's other pods is blocked", "collectives between the job's pods is blocked"
    )


def test_pods_that_reach_each_other_over_tcp_alone_have_all_the_job_needs() -> None:
    policies = training_policies("training", pod_identity=False)
    within = _named(policies, "within-namespace")["spec"]
    within["ingress"][0]["ports"] = within["egress"][0]["ports"] = [TCP]
    assert _findings(policies) == set()


def test_without_https_out_s3_and_sts_are_blocked() -> None:
    policies = training_policies("training", pod_identity=False)
    del _named(policies, "dns-and-https")["spec"]["egress"][1]
    assert _findings(policies) == _reported("HTTPS to S3 and STS is blocked")


def test_without_the_scrape_policy_prometheus_is_blocked_from_every_trainer() -> None:
    problem = "Prometheus scraping the metrics port is blocked"
    assert _findings(_all_but("metrics-scrape"), pytorchjob.render(JOB, TARGET), PREPARE) == {
        *_reported(problem),
        *_reported(problem, resource="Job prepare"),
    }


def test_a_scrape_policy_that_admits_prometheus_by_its_pod_label_passes() -> None:
    """prometheus-operator labels the pods of the Prometheus it runs `app.kubernetes.io/name: prometheus`."""
    policies = training_policies("training", pod_identity=False)
    prometheus = {"namespaceSelector": MONITORING, "podSelector": {"matchLabels": PROMETHEUS.labels}}
    _named(policies, "metrics-scrape")["spec"]["ingress"][0]["from"] = [prometheus]
    assert _findings(policies) == set()


@pytest.mark.parametrize(
    "opened",
    [
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}], "ports": [TCP]},
        # meant the job's pods, takes in every namespace's: another team's job carries the same labels
        {"from": [{"namespaceSelector": {}, "podSelector": TRAINERS}]},
    ],
    ids=["default-namespace", "trainer-label-anywhere"],
)
def test_a_namespace_opened_to_another_namespaces_pods_is_reported(opened: dict[str, Any]) -> None:
    policies = training_policies("training", pod_identity=False)
    _named(policies, "within-namespace")["spec"]["ingress"].append(opened)
    assert _findings(policies) == _reported(
        "a pod of another namespace reaching the rendezvous port gets through",
        "a pod of another namespace reaching the metrics port gets through",
    )


def test_https_opened_to_an_address_of_the_vpc_reaches_a_pod_there() -> None:
    """The rehearsal's pod of another namespace sits at the VPC's address 100 (10.0.0.100 here)."""
    policies = training_policies("training", pod_identity=False)
    opened = {"to": [{"ipBlock": {"cidr": "10.0.0.100/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    _named(policies, "dns-and-https")["spec"]["egress"].append(opened)
    assert _findings(policies) == _reported("HTTPS to a pod of another namespace gets through")


@pytest.mark.parametrize("account", ["trainer", None], ids=["named", "default"])
def test_a_pod_whose_service_account_has_a_pod_identity_association_reaches_the_credential_agent(
    account: str | None,
) -> None:
    """A pod spec without serviceAccountName runs as `default`, whose association counts too."""
    job = pytorchjob.render(replace(JOB, service_account=account), TARGET)
    association = account or "default"
    assert _findings(training_policies("training", pod_identity=True), job, associated=(association,)) == set()
    assert _findings(training_policies("training", pod_identity=False), job, associated=(association,)) == _reported(
        "its EKS Pod Identity credentials from the node's agent is blocked"
    )
    assert _findings(training_policies("training", pod_identity=False), job, associated=("someone-else",)) == set()


def test_an_ipv4_cluster_needs_only_the_agents_ipv4_address() -> None:
    ipv4_agent = {"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}], "ports": [{"protocol": "TCP", "port": 80}]}
    policies = training_policies("training", pod_identity=False)
    _named(policies, "dns-and-https")["spec"]["egress"].append(ipv4_agent)
    assert _findings(policies, associated=("trainer",)) == set()
