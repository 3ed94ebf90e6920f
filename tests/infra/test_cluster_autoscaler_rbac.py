"""The Cluster Autoscaler may list and watch everything its image watches: it blocks in WaitForCacheSync until every
informer has synced (kubernetes/autoscaler cluster-autoscaler-1.35.2 main.go buildAutoscaler) and only then starts
the health check's monitoring (run), so a resource its ClusterRole does not grant leaves a pod that is up, passes
its liveness probe and never scales a group.

What each pinned image watches was read from its source with the flags the stack gives it (cloud provider aws,
expander least-waste, every other flag at its default: no ProvisioningRequests, capacity buffers or CSINode-aware
scheduling); what the stack grants is the ClusterRole of the pinned chart (read at its tag) plus any
`rbac.additionalRules` our values add. Both tables are read by hand: issue 38 will run the real Cluster Autoscaler
against a real API server with RBAC; until then this is the offline check, and a new image or chart pin fails here
until its row is read.
"""

from typing import Any

import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.addons.cluster_autoscaler import ClusterAutoscaler
from eks_ddp.infra.facts import versions
from tests.pulumi_harness import Recorded

Reads = frozenset[tuple[str, str]]  # (API group, resource) listed and watched

CA = "kubernetes/autoscaler"
KUBE = "k8s.io/kubernetes pkg/scheduler/framework/plugins"
# Every pinned image, through the scheduler framework it embeds (k8s.io/kubernetes v1.34.9 in 1.34.5, v1.35.6 in
# 1.35.2; simulator/framework/handle.go NewHandle builds the default profile's plugins on the shared informers).
SHARED_SOURCES = {
    ("", "pods"): f"{CA} utils/kubernetes/listers.go, loop/trigger.go StartPodObserver; {KUBE}/volumebinding",
    ("", "nodes"): f"{CA} utils/kubernetes/listers.go; {KUBE}/volumebinding",
    ("", "replicationcontrollers"): f"{CA} utils/kubernetes/listers.go; {KUBE}/podtopologyspread setListers",
    ("", "services"): f"{KUBE}/podtopologyspread setListers (system default constraints)",
    ("", "namespaces"): f"{KUBE}/interpodaffinity",
    ("", "persistentvolumes"): f"{KUBE}/volumebinding, volumezone, nodevolumelimits",
    ("", "persistentvolumeclaims"): f"{KUBE}/volumebinding, volumezone, volumerestrictions, nodevolumelimits",
    ("apps", "daemonsets"): f"{CA} utils/kubernetes/listers.go",
    ("apps", "replicasets"): f"{CA} utils/kubernetes/listers.go; {KUBE}/podtopologyspread",
    ("apps", "statefulsets"): f"{CA} utils/kubernetes/listers.go; {KUBE}/podtopologyspread",
    ("batch", "jobs"): f"{CA} utils/kubernetes/listers.go",
    ("policy", "poddisruptionbudgets"): f"{CA} utils/kubernetes/listers.go; k8s.io/kubernetes framework/preemption",
    ("storage.k8s.io", "storageclasses"): f"{KUBE}/volumebinding, volumezone, nodevolumelimits",
    ("storage.k8s.io", "csinodes"): f"{KUBE}/volumebinding; {CA} 1.35.2 simulator/framework/handle.go",
    ("storage.k8s.io", "csidrivers"): f"{KUBE}/volumebinding, nodevolumelimits",
    ("storage.k8s.io", "csistoragecapacities"): f"{KUBE}/volumebinding",
    ("storage.k8s.io", "volumeattachments"): f"{KUBE}/nodevolumelimits csi.go NewCSI",
}
# 1.35.2 only: config/flags/flags.go locks enable-dynamic-resource-allocation to true (Fatalf when false), and
# core/autoscaler.go initializeDefaultOptions then builds simulator/dynamicresources/provider from the informers.
# 1.34.5's flag defaults to false and main.go turns the scheduler's DRA gate off with it: no resource.k8s.io reads.
DRA_SOURCES = {
    ("resource.k8s.io", "resourceclaims"): f"{CA} 1.35.2 simulator/dynamicresources/provider/provider.go",
    ("resource.k8s.io", "resourceslices"): f"{CA} 1.35.2 simulator/dynamicresources/provider/provider.go",
    ("resource.k8s.io", "deviceclasses"): f"{CA} 1.35.2 simulator/dynamicresources/provider/provider.go",
}
IMAGE_WATCHES: dict[str, Reads] = {
    "v1.34.5": frozenset(SHARED_SOURCES),
    "v1.35.2": frozenset(SHARED_SOURCES) | frozenset(DRA_SOURCES),
}

# The list+watch rules of cluster-autoscaler/charts/cluster-autoscaler templates/clusterrole.yaml with cloudProvider
# aws, rbac.create and rbac.clusterScoped (the chart's defaults), at tag cluster-autoscaler-chart-<version>. 9.47.0,
# pinned before, had the same rules but for podtemplates, resource.k8s.io, apps/deployments and autoscaling.x-k8s.io:
# kept, so that going back to it fails for what it lacks (make planted-defects plants it).
_CORE = ("nodes", "namespaces", "pods", "services", "replicationcontrollers", "persistentvolumeclaims",
         "persistentvolumes", "configmaps", "podtemplates")
_STORAGE = ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments")
_AUTOSCALING = ("provisioningrequests", "capacitybuffers", "capacityquotas")
CHART_CLUSTER_ROLE_READS: dict[str, Reads] = {
    "9.59.0": frozenset(
        [*(("", r) for r in _CORE), ("batch", "jobs"), ("batch", "cronjobs"), ("extensions", "jobs"),
         ("extensions", "replicasets"), ("extensions", "daemonsets"), ("policy", "poddisruptionbudgets"),
         ("apps", "daemonsets"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
         *(("storage.k8s.io", r) for r in _STORAGE),
         *(("resource.k8s.io", r) for r in ("resourceslices", "deviceclasses", "resourceclaims")),
         *(("autoscaling.x-k8s.io", r) for r in _AUTOSCALING)]
    ),
}
CHART_CLUSTER_ROLE_READS["9.47.0"] = frozenset(
    (group, resource) for group, resource in CHART_CLUSTER_ROLE_READS["9.59.0"]
    if group not in ("resource.k8s.io", "autoscaling.x-k8s.io")
    and (group, resource) not in (("", "podtemplates"), ("apps", "deployments"))
)


def _granted(values: dict[str, Any]) -> Reads:
    """The chart's ClusterRole as our values render it, and the rules they add (`rbac.additionalRules`)."""
    rbac = values.get("rbac", {})
    assert rbac.get("create", True) and rbac.get("clusterScoped", True), "the chart's ClusterRole is turned off"
    chart_version = versions.CLUSTER_AUTOSCALER_CHART[1]
    assert chart_version in CHART_CLUSTER_ROLE_READS, f"read chart {chart_version}'s ClusterRole into the table"
    added = {
        (group, resource)
        for rule in rbac.get("additionalRules", [])
        if {"list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    return CHART_CLUSTER_ROLE_READS[chart_version] | added


def test_every_pinned_image_has_a_table_of_what_it_watches() -> None:
    assert set(versions.CLUSTER_AUTOSCALER_IMAGES.values()) <= set(IMAGE_WATCHES)


@pytest.mark.parametrize("kubernetes_version", sorted(versions.CLUSTER_AUTOSCALER_IMAGES))
def test_the_stack_grants_everything_the_image_it_runs_watches(
    pulumi_mocks: Recorded, kubernetes_version: str
) -> None:
    args = {"provider": k8s.Provider("k8s", kubeconfig="{}"), "cluster_name": "training", "region": "us-east-1",
            "kubernetes_version": kubernetes_version}
    pulumi_mocks.run(lambda: ClusterAutoscaler("cas", args))  # type: ignore[arg-type]
    release = pulumi_mocks.named("cas-chart").inputs
    image = release["values"]["image"]["tag"]
    missing = sorted(f"{group or 'core'}/{resource}" for group, resource in IMAGE_WATCHES[image] - _granted(
        release["values"]))
    assert not missing, (f"Cluster Autoscaler {image} watches what chart {release['version']}'s RBAC does not let it "
                         f"list and watch: {', '.join(missing)}")
