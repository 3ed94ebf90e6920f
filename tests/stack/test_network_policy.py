"""The training namespace's NetworkPolicies (workloads/network_policy.py) under the NetworkPolicy semantics encoded
in stack/engine_rules/network_policy.py: a 2-pod job's rendezvous, collectives and scrape pass; another
namespace's pod does not."""

import pytest

from eks_ddp.stack.engine_rules.network_policy import Endpoint, allowed
from eks_ddp.stack.local import local_job, render_for
from eks_ddp.workloads.network_policy import training_policies
from eks_ddp.workloads.training_pod import METRICS_PORT, pod_labels

POLICIES = training_policies("training", pod_identity=True)
JOB, _ = render_for("dev")
MASTER = WORKER = Endpoint("training", pod_labels(local_job("dev").job))  # the dev job's two pods carry one set
PROMETHEUS = Endpoint("monitoring", {"app.kubernetes.io/name": "prometheus"})
STRANGER = Endpoint("default", {"app": "curious"})
COREDNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})


def test_a_two_pod_jobs_rendezvous_collectives_and_scrape_pass() -> None:
    assert len(JOB.pods) == 2
    assert allowed(POLICIES, WORKER, MASTER, 23456)  # torchrun's rendezvous on the Master's MASTER_PORT
    for port in (29500, 45123, 61000):  # gloo's and NCCL's sockets, on ports picked at run time, both ways
        assert allowed(POLICIES, MASTER, WORKER, port) and allowed(POLICIES, WORKER, MASTER, port)
    assert allowed(POLICIES, PROMETHEUS, MASTER, METRICS_PORT) and allowed(POLICIES, PROMETHEUS, WORKER, METRICS_PORT)
    assert allowed(POLICIES, MASTER, COREDNS, 53, "UDP") and allowed(POLICIES, MASTER, Endpoint(address="3.5.0.1"), 443)


@pytest.mark.parametrize("port", [23456, 45123, METRICS_PORT, 22])
def test_a_pod_of_another_namespace_reaches_none_of_it(port: int) -> None:
    assert not allowed(POLICIES, STRANGER, MASTER, port)


def test_nothing_else_leaves_or_enters() -> None:
    assert not allowed(POLICIES, PROMETHEUS, MASTER, 23456)  # the scraper gets the metrics port only
    assert not allowed(POLICIES, MASTER, Endpoint(address="3.5.0.1"), 80)  # plain HTTP out
    assert not allowed(POLICIES, MASTER, STRANGER, 8080)  # into another namespace
    assert not allowed(POLICIES, MASTER, Endpoint("kube-system", {"k8s-app": "metrics-server"}), 443)
    assert allowed([], STRANGER, MASTER, 23456)  # without the policies, anything goes: the test above is theirs


def test_only_a_namespace_with_pod_identity_reaches_the_nodes_credential_agent() -> None:
    """EKS Pod Identity's agent answers on the node's 169.254.170.23:80; IRSA needs only STS over HTTPS."""
    agent = Endpoint(address="169.254.170.23")
    assert allowed(POLICIES, MASTER, agent, 80) and not allowed(POLICIES, MASTER, Endpoint(address="169.254.169.254"), 80)
    assert not allowed(training_policies("training", pod_identity=False), MASTER, agent, 80)
