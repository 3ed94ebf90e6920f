"""The stack's Helm releases rendered by the real Helm from the charts in the Go module cache (tests/cluster/charts.py):
no cluster, one `helm template` per release."""

import dataclasses
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools.mocking import Registration
from eks_ddp.tools.pulumi_program import Program
from tests.cluster import charts

ROOT = Path(__file__).resolve().parents[2]
GPU = ("gpu", ())
KARPENTER = ("dev", (("eks-ddp:autoscaler", "karpenter"),))
TRAINER = ("dev", (("eks-ddp:trainingOperator", "v2"),))
KUBERNETES = "1.35"
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")


@cache
def releases(stack: str, override: tuple[tuple[str, str], ...]) -> tuple[Registration, ...]:
    registrations = Program.at(ROOT).run(stack, dict(override))
    return tuple(sorted((r for r in registrations if r.type == charts.HELM_RELEASE), key=lambda r: r.name))


def release(shape: tuple[str, tuple[tuple[str, str], ...]], chart: str) -> Registration:
    found = [r for r in releases(*shape) if charts.chart_name(r) == chart]
    assert len(found) == 1, f"{shape}: {len(found)} releases of chart {chart}"
    return found[0]


def rendered(registration: Registration) -> list[dict[str, Any]]:
    objects = charts.render(registration, KUBERNETES)
    assert objects is not None, charts.source(registration)
    return objects


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    listed = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(found) == 1, f"{kind} {name}: {len(found)} of them in {listed}"
    return found[0]


def at(values: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        values = values.get(key) or {}
    return values


@pytest.mark.parametrize("shape", [GPU, KARPENTER, TRAINER], ids=["gpu", "dev-karpenter", "dev-trainer-v2"])
def test_every_release_renders_from_its_module_or_says_why_it_is_stood_in(shape: Any) -> None:
    for registration in releases(*shape):
        objects = charts.render(registration, KUBERNETES)
        name = charts.chart_name(registration)
        if objects is None:
            assert name in charts.NOT_IN_A_MODULE, f"{name}: neither rendered nor known to be in no module"
            assert charts.source(registration).startswith("not in a Go module: ")
        else:
            assert name in charts.CHARTS
            assert objects and all("kind" in o and "metadata" in o for o in objects)
            module, _, path = charts.source(registration).partition(" ")
            assert module.startswith(charts.CHARTS[name].module + "@v") and path == charts.CHARTS[name].path


# (stack shape, chart, workload kind and name, where our values put its nodeSelector and tolerations)
PLACEMENT = [
    (GPU, "metrics-server", "Deployment", "metrics-server", ""),
    (KARPENTER, "karpenter", "Deployment", "karpenter", ""),
    (KARPENTER, "metrics-server", "Deployment", "metrics-server", ""),
    (TRAINER, "kubeflow-trainer", "Deployment", "kubeflow-trainer-controller-manager", "manager"),
    (TRAINER, "kubeflow-trainer", "Deployment", "jobset-controller", "jobset.controller"),
]


@pytest.mark.parametrize(("shape", "chart", "kind", "name", "values_at"), PLACEMENT, ids=[p[3] for p in PLACEMENT])
def test_workloads_are_placed_as_our_values_say(shape: Any, chart: str, kind: str, name: str, values_at: str) -> None:
    registration = release(shape, chart)
    ours = at(registration.sent["values"], values_at) if values_at else registration.sent["values"]
    assert ours.get("nodeSelector"), f"{chart}: our values set no nodeSelector at {values_at or 'the root'}"
    pod = named(rendered(registration), kind, name)["spec"]["template"]["spec"]
    assert ours["nodeSelector"].items() <= (pod.get("nodeSelector") or {}).items()
    for toleration in ours.get("tolerations") or []:
        assert toleration in (pod.get("tolerations") or [])


def test_karpenter_is_its_1_14_1_release_with_the_crds_it_links() -> None:
    registration = release(KARPENTER, "karpenter")
    objects = rendered(registration)
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"} <= crds
    deployment = named(objects, "Deployment", "karpenter")
    assert deployment["metadata"]["labels"]["helm.sh/chart"] == "karpenter-1.14.1"
    assert deployment["spec"]["replicas"] == 2
    (controller,) = deployment["spec"]["template"]["spec"]["containers"]
    assert controller["image"] == "public.ecr.aws/karpenter/controller:1.14.1"
    env = {e["name"]: e.get("value") for e in controller["env"]}
    assert env["CLUSTER_NAME"] == registration.sent["values"]["settings"]["clusterName"]


def test_the_trainer_chart_brings_jobset_from_jobsets_module_and_leaves_lws_off() -> None:
    objects = rendered(release(TRAINER, "kubeflow-trainer"))
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {"trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io"} <= crds
    assert not any("leaderworkerset" in o["metadata"]["name"] for o in objects)
    jobset = named(objects, "Deployment", "jobset-controller")
    assert jobset["metadata"]["labels"]["helm.sh/chart"] == "jobset-0.12.0"
    assert jobset["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/jobset/jobset:v0.12.0"
    webhooks = {o["metadata"]["name"] for o in objects if o["kind"].endswith("WebhookConfiguration")}
    assert {"validator.trainer.kubeflow.org", "jobset-validating-webhook-configuration"} <= webhooks


def test_a_pinned_version_the_module_does_not_hold_is_refused_in_one_line() -> None:
    registration = release(GPU, "metrics-server")
    other = dataclasses.replace(registration, sent={**registration.sent, "version": "3.12.3"})
    with pytest.raises(charts.ChartSourceError) as refused:
        charts.render(other, KUBERNETES)
    message = str(refused.value)
    assert "3.12.3" in message and "is 3.12.2" in message and "\n" not in message


def test_a_dependency_at_another_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = charts.CHARTS["kubeflow-trainer"]
    wrong = dataclasses.replace(trainer, dependencies={**trainer.dependencies, "jobset": charts.LWS})
    monkeypatch.setitem(charts.CHARTS, "kubeflow-trainer", wrong)
    with pytest.raises(charts.ChartSourceError, match=r"wants jobset 0\.12\.0.* is v0\.8\.0"):
        charts.render(release(TRAINER, "kubeflow-trainer"), KUBERNETES)


def test_a_chart_no_module_ships_renders_as_none() -> None:
    autoscaler = release(GPU, "cluster-autoscaler")
    assert charts.render(autoscaler, KUBERNETES) is None
    assert "k8s.io/autoscaler/cluster-autoscaler" in charts.source(autoscaler)
    unknown = dataclasses.replace(autoscaler, sent={**autoscaler.sent, "chart": "oci://example.invalid/charts/nothing"})
    assert charts.render(unknown, KUBERNETES) is None


def test_the_monitoring_crds_are_prometheus_operator_0_93_1s() -> None:
    crds = {c["metadata"]["name"]: c for c in charts.crds("monitoring.coreos.com")}
    assert {"podmonitors.monitoring.coreos.com", "servicemonitors.monitoring.coreos.com"} <= set(crds)
    podmonitor = crds["podmonitors.monitoring.coreos.com"]
    assert podmonitor["metadata"]["annotations"]["operator.prometheus.io/version"] == "0.93.1"
    assert [v["name"] for v in podmonitor["spec"]["versions"] if v["served"]] == ["v1"]
    with pytest.raises(charts.ChartSourceError, match="monitoring.coreos.com"):
        charts.crds("example.com")


def test_rendering_a_stack_takes_seconds() -> None:
    """A process per release: all of the largest shape's releases, measured (the report quotes it)."""
    charts.helm()
    start = time.monotonic()
    for shape in (GPU, KARPENTER, TRAINER):
        for registration in releases(*shape):
            charts.render(registration, KUBERNETES)
    assert time.monotonic() - start < 30
