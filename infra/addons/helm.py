"""Installing a pinned Helm chart as one reviewable resource."""

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.efa_node_group import KUBERNETES_EFFECT, TaintEffect

# Helm waits until every Deployment and DaemonSet of a release is ready (pulumi-kubernetes
# provider/pkg/provider/helm_release.go: 300 s unless `timeout` is set). Our charts run on
# nodes that already exist, but a DaemonSet that tolerates every taint (the CSI node
# plugins) also waits for EFA nodes joining during the install: an instance boot, the
# node joining and an image pull take up to about 6 minutes, so 10 minutes leaves margin.
HELM_TIMEOUT_SECONDS = 600


def release(
    name: str,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    chart: tuple[str, str, str],
    namespace: str,
    values: Mapping[str, Any],
    depends_on: Sequence[pulumi.Resource] = (),
    local_chart: str | None = None,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """A helm.v3.Release: a plain resource whose chart, version and values show in previews. `local_chart` is a
    folder holding that chart as its release packaged it (dependencies in charts/), installed instead of the
    registry's: Helm then reads no repository, and the chart's own Chart.yaml says its version. `create_namespace`
    has Helm make the namespace, which `helm uninstall` (and so `pulumi destroy`) leaves behind: `namespace()` makes
    one the stack owns."""
    chart_name, version, repository = chart
    # An OCI registry is named in the chart reference itself; Helm refuses it as a repository URL.
    oci = repository.startswith("oci://")
    reference = local_chart or (f"{repository}/{chart_name}" if oci else chart_name)
    return k8s.helm.v3.Release(
        name,
        name=chart_name,
        chart=reference,
        version=None if local_chart else version,
        repository_opts=None if oci or local_chart else {"repo": repository},
        namespace=namespace,
        create_namespace=create_namespace,
        values=dict(values),
        atomic=True,
        cleanup_on_fail=True,
        timeout=HELM_TIMEOUT_SECONDS,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on)),
    )


POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
"""The Pod Security Admission levels of every namespace the stack makes: the training namespace's (its pods need more
than restricted allows, infra/platform.py says which) and a release's (operators' controllers need nothing baseline
forbids); any pod short of restricted is named in warnings and the audit log."""


def namespace(name: str, parent: pulumi.Resource, provider: k8s.Provider, namespace_name: str,
              depends_on: Sequence[pulumi.Resource] = ()) -> k8s.core.v1.Namespace:
    """A release's own namespace as a resource of the stack, which its releases depend on: `pulumi destroy` then
    deletes it after them (Helm's `createNamespace` makes one that `helm uninstall` leaves behind, with its
    ServiceAccount and root CA ConfigMap: found by the real `pulumi destroy` on the engines). It enforces the baseline
    Pod Security Standard, and warns and audits at restricted."""
    return k8s.core.v1.Namespace(
        name,
        metadata={"name": namespace_name, "labels": dict(POD_SECURITY)},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on)),
    )


def tolerations(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Tolerate each taint by key and Kubernetes effect (whatever its value)."""
    unique = {(taint["key"], KUBERNETES_EFFECT[TaintEffect(taint["effect"])]) for taint in taints}
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in sorted(unique)]
