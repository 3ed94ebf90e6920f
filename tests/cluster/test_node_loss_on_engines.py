"""A node lost under a running PyTorchJob, on the engines themselves. EC2 and EKS stay outside: the instance's end is
its Node deleted (as EKS's cloud node lifecycle controller deletes it) and the Auto Scaling group's replacement is a
new node of the group's shape. The rest is the engines': the controller manager's pod garbage collector deletes the
pod bound to the missing node (kubernetes v1.35.4 pkg/controller/podgc: after 40 s, checked every 20 s), the
training operator recreates it, and the scheduler binds it to the replacement."""

from collections.abc import Callable
from typing import Any

from eks_ddp.engine_models.base import node_sources
from tests.cluster import nodes
from tests.cluster.conftest import OnEngines, training, true_conditions, wait_for

PODGC_S = 40 + 20 + 30
"""The pod garbage collector's quarantine and period, and room for the operator and the scheduler."""


def test_a_lost_nodes_training_pod_runs_again_on_its_replacement_and_the_job_goes_on(
    cluster: Callable[..., OnEngines],
) -> None:
    on = cluster("dev")
    pods = training(on.pods())
    assert pods, "dev: no training pod"
    pod = pods[0]
    namespace, name, uid, lost = (pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"],
                                  pod["spec"]["nodeName"])
    group = on.group_of(lost)
    (source,) = [s for s in node_sources(on.deployment) if nodes.group_name(s) == group]

    on.kubectl.run("delete", "node", lost)
    on.kubectl.apply([nodes.node(source, nodes.initial_count(on.deployment, source))])  # the group's replacement instance joined

    def running_again() -> dict[str, Any] | None:
        found = on.kubectl.items("pods", "-n", namespace, f"--field-selector=metadata.name={name}")
        again = found[0] if found and found[0]["metadata"]["uid"] != uid else None
        return again if again and again["status"].get("phase") == "Running" else None

    again = wait_for(f"{name} recreated and Running after {lost} was lost", running_again, timeout_s=PODGC_S)
    assert on.group_of(again["spec"]["nodeName"]) == group and again["spec"]["nodeName"] != lost

    def settled() -> set[str] | None:  # the operator marks the job Running again after its pod is, not with it
        conditions = set(true_conditions(on.kubectl.items("pytorchjobs", "-n", namespace)[0]))
        return conditions if conditions & {"Running", "Failed"} else None

    conditions = wait_for("the PyTorchJob Running again or Failed", settled)
    assert "Failed" not in conditions and "Running" in conditions, conditions
