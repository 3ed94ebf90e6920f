"""The training namespace's NetworkPolicies (workloads/network_policy.py) under the NetworkPolicy semantics encoded
in engine_models/network_policy.py: a 2-pod job's rendezvous, collectives and scrape pass; another
namespace's pod does not. Each test renders the policies itself: `make mutate` tries a mutant on the tests that call
the code it mutates, which a module-level rendering is not."""

from datetime import date

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.engine_models import Deployment
from eks_ddp.engine_models.network_policy import Endpoint, allowed, job_traffic
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN
from eks_ddp.tools.local import local_job, render_for
from eks_ddp.workloads.network_policy import training_policies
from eks_ddp.workloads.training_pod import METRICS_PORT, pod_labels
from tests.stack.registered import registered

JOB, _ = render_for("dev")
MASTER = WORKER = Endpoint("training", pod_labels(local_job("dev").job))  # the dev job's two pods carry one set
PROMETHEUS = Endpoint("monitoring", {"app.kubernetes.io/name": "prometheus"})
STRANGER = Endpoint("default", {"app": "curious"})
COREDNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})


def test_a_two_pod_jobs_rendezvous_collectives_and_scrape_pass() -> None:
    policies = training_policies("training", pod_identity=True)
    assert len(JOB.pods) == 2
    assert allowed(policies, WORKER, MASTER, 23456)  # torchrun's rendezvous on the Master's MASTER_PORT
    for port in (29500, 45123, 61000):  # gloo's and NCCL's sockets, on ports picked at run time, both ways
        assert allowed(policies, MASTER, WORKER, port) and allowed(policies, WORKER, MASTER, port)
    assert allowed(policies, PROMETHEUS, MASTER, METRICS_PORT) and allowed(policies, PROMETHEUS, WORKER, METRICS_PORT)
    assert allowed(policies, MASTER, COREDNS, 53, "UDP") and allowed(policies, MASTER, Endpoint(address="3.5.0.1"), 443)


@pytest.mark.parametrize("port", [23456, 45123, METRICS_PORT, 22])
def test_a_pod_of_another_namespace_reaches_none_of_it(port: int) -> None:
    policies = training_policies("training", pod_identity=True)
    assert not allowed(policies, STRANGER, MASTER, port)


def test_nothing_else_leaves_or_enters() -> None:
    policies = training_policies("training", pod_identity=True)
    assert not allowed(policies, PROMETHEUS, MASTER, 23456)  # the scraper gets the metrics port only
    assert not allowed(policies, MASTER, Endpoint(address="3.5.0.1"), 80)  # plain HTTP out
    assert not allowed(policies, MASTER, STRANGER, 8080)  # into another namespace
    assert not allowed(policies, MASTER, Endpoint("kube-system", {"k8s-app": "metrics-server"}), 443)
    assert allowed([], STRANGER, MASTER, 23456)  # without the policies, anything goes: the test above is theirs


def test_only_a_namespace_with_pod_identity_reaches_the_nodes_credential_agent() -> None:
    """EKS Pod Identity's agent answers on the node's 169.254.170.23:80; IRSA needs only STS over HTTPS."""
    policies = training_policies("training", pod_identity=True)
    agent = Endpoint(address="169.254.170.23")
    assert allowed(policies, MASTER, agent, 80)
    assert not allowed(policies, MASTER, Endpoint(address="169.254.169.254"), 80)
    assert not allowed(training_policies("training", pod_identity=False), MASTER, agent, 80)


# Addresses inside the cluster: a pod of another namespace (the VPC CNI gives pods VPC addresses, here the dev stack's
# 10.0.0.0/16) and a Service's ClusterIP in each range EKS picks from (10.100.0.0/16 or 172.20.0.0/16).
IN_CLUSTER = [
    Endpoint("default", {"app": "curious"}, address="10.0.12.34"),
    Endpoint(address="10.100.93.7"),
    Endpoint(address="172.20.93.7"),
]


@pytest.mark.parametrize("inside", IN_CLUSTER, ids=["pod", "service-10.100", "service-172.20"])
def test_https_out_reaches_nothing_inside_the_cluster(inside: Endpoint) -> None:
    """The AWS network policy controller hands an ipBlock to the agent as a plain CIDR, pods' addresses included."""
    policies = training_policies("training", pod_identity=True)
    assert not allowed(policies, MASTER, inside, 443)


@pytest.mark.parametrize("address", ["10.100.0.1", "172.20.0.1"])
def test_the_api_server_stays_reachable_through_its_service(address: str) -> None:
    """The GPU quarantine patches its node through the `kubernetes` Service (KUBERNETES_SERVICE_HOST)."""
    policies = training_policies("training", pod_identity=True)
    assert allowed(policies, MASTER, Endpoint(address=address), 443)
    assert not allowed(policies, MASTER, Endpoint(address=address), 80)


def test_the_rehearsal_reports_https_open_to_the_whole_cluster() -> None:
    """The dev stack's policies as they were: 443 to 0.0.0.0/0 with no `except`."""
    values, region = stack_file.load("dev")
    registrations = registered(values, region)
    deployment = Deployment(registrations, region or "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 22))
    assert list(job_traffic(deployment)) == []
    policy = next(r for r in registrations if r.name == "eks-ddp-dns-and-https")
    del policy.inputs["spec"]["egress"][1]["to"][0]["ipBlock"]["except"]
    problems = {finding.problem for finding in job_traffic(deployment)}
    assert problems == {
        "HTTPS to another Service of the cluster (10.100.3.233) gets through",
        "HTTPS to another Service of the cluster (172.20.3.233) gets through",
        "HTTPS to a pod of another namespace gets through",
    }
