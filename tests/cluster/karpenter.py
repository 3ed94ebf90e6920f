"""Karpenter on the local cluster: the real provisioner (sigs.k8s.io/karpenter v1.14.1, the core the stack's chart
1.14.1 runs) scaling the stack's NodePools from zero, with its kwok cloud provider in place of EC2.

The cloud boundary is the node class. The kwok provider launches nodes only for NodePools whose `nodeClassRef` names
a KWOKNodeClass (sigs.k8s.io/karpenter@v1.14.1 kwok/cloudprovider/cloudprovider.go GetSupportedNodeClasses;
pkg/utils/nodepool/nodepool.go IsManaged skips every other NodePool), so `for_kwok` points each NodePool at a
KWOKNodeClass of its EC2NodeClass's name; the EC2NodeClasses are still applied, and their CRD's schema and CEL rules
still judge them, but nothing reads them. What EC2 would say about an instance type comes from our facts instead
(`instance_types`: infra.facts.catalogue and the Karpenter arithmetic of infra.facts.allocatable, as
engine_models.base.node_offer uses it), written to the provider's INSTANCE_TYPES_FILE_PATH.

Everything else is Karpenter's own: which pods are pending, the NodePool's requirements, labels, taints and limits,
the DaemonSets' overhead, bin-packing, NodeClaims, registration and initialization, disruption. Where its kwok build
differs from Karpenter on EC2, and what is done about it:

- Node capacity and allocatable. The kwok provider creates the Node with `capacity` = the NodeClaim's requests
  (kwok/cloudprovider/cloudprovider.go toNode), where a kubelet reports the machine's. Karpenter sums node capacity
  into NodePool `status.resources` and against `limits` for the nodes that exist (pkg/controllers/state/statenode.go
  Capacity; provisioning/scheduling/scheduler.go updateRemainingResources): with requests as capacity, a
  `limits.cpu` of 6 nodes let 13 launch (measured, test_karpenter). `start` runs a stand-in for the kubelet's
  status report: each Karpenter node's `capacity` and `allocatable` become what its kubelet reports (`kubelet_status`,
  as tests/cluster/nodes.py makes them for managed nodes).
- Karpenter's estimate of a new node. The kwok provider subtracts a fixed 100m CPU and 10Mi (and the huge pages) from
  the file's resources (helpers.go newInstanceType; pkg/cloudprovider/types.go computeAllocatable), where the AWS
  provider subtracts the kube-reserved and eviction of infra.facts.allocatable; a new node's instance capacity also
  counts against `limits` within one batch (scheduler.go subtractMax). One number cannot give both, so the file's
  CPU is the vCPUs (limits count as on EC2: own-code's limit of 4 on m5.large would otherwise allow 1 node, not 2)
  and its memory, pods and devices leave node_offer's allocatable exactly. Karpenter so believes a new node holds
  vCPUs - 100m, where the node reports vCPUs - kube-reserved: 130m more at 64 vCPUs, 30m less at 2. Pods whose
  requests fall in that gap are launched for but not placed (or not launched for); the shipped stacks leave more
  room than that (test_karpenter).
- Capacity reservations. The kwok main never sets cloudprovider.ReservationIDLabel (the AWS provider does), so with
  the ReservedCapacity feature gate on, a `reserved` offering has no reservation id and the provisioner's reservation
  manager panics on it (pkg/controllers/provisioning/scheduling/reservationmanager.go CanReserve). A stack with a
  NodePool that requires `karpenter.sh/capacity-type: reserved` runs with ReservedCapacity=false: its nodes launch
  from the reserved offering, labelled `reserved`, but the reservation's instance count is not enforced (EC2's number,
  which no stack file holds).
- Instance types carry no karpenter.k8s.aws/* labels, and kubernetes.io/hostname is the NodeClaim's name.
"""

import copy
import functools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.tools import stack_file
from eks_ddp.tools.rehearsal import variants
from eks_ddp.engine_models.base import launcher_of, node_offer
from eks_ddp.engine_models.base import Deployment, NodeSource, node_sources, quantity
from eks_ddp.tools.mocking import Registration
from eks_ddp.workloads.target import KUBERNETES_ARCH
from tests.cluster import charts, nodes
from tests.cluster import crds as custom_resources
from tests.cluster.control_plane import LOOPBACK, POLL_S, ControlPlane, free_port, recorded
from tests.cluster.documents import documents
from tests.cluster.engines import build
from tests.cluster.kubectl import Kubectl
from tests.cluster.operators import OperatorError, answers

ENGINE = "karpenter"
CORE = "sigs.k8s.io/karpenter"
"""The module tests/cluster/engines/karpenter pins: the kwok provider, its CRD and its chart."""
AWS = ("charts", "github.com/aws/karpenter-provider-aws")
"""The AWS provider's module (pinned by tests/cluster/engines/charts for its chart): the CRDs the stack installs."""
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
KWOK_GROUP, KWOK_KIND, KWOK_VERSION = "karpenter.kwok.sh", "KWOKNodeClass", "v1alpha1"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# sigs.k8s.io/karpenter@v1.14.1 kwok/cloudprovider/helpers.go newInstanceType: the kwok provider's fixed kube-reserved.
KWOK_RESERVED_MILLICORES, KWOK_RESERVED_MIB = 100, 10
# github.com/aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/al2023.go DefaultBlockDeviceMappings and
# EphemeralBlockDevice (/dev/xvda, amifamily.DefaultEBS 20Gi), pkg/providers/instancetype/types.go ephemeralStorage
# (the root volume's size), kubeReservedResources (1Gi) and evictionThreshold (10 %, rounded up).
ROOT_DEVICE, DEFAULT_ROOT_GIB = "/dev/xvda", 20
EPHEMERAL_RESERVED_BYTES, EPHEMERAL_EVICTION_PERCENT = 2**30, 10
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
KWOK_RELEASE = "karpenter-kwok"
"""The release name the kwok chart's RBAC is rendered under: its objects never replace the AWS chart's."""
READY_TIMEOUT_S = 90.0


def stacks() -> list[str]:
    """The shipped stack files that can take Karpenter (rehearsal.variants: not one onto a cluster made elsewhere,
    whose groups keep what scales them now)."""
    return [stack for stack in stack_file.stacks(stack_file.ROOT)
            if any(v["autoscaler"] == ENGINE for v in variants(stack_file.load(stack, stack_file.ROOT)[0]))]


# ---- The instance types: what EC2 would say, from our facts ----------------------------------------------------------


def _pools(deployment: Deployment) -> list[NodeSource]:
    return [s for s in node_sources(deployment) if launcher_of(s) == NodeLauncher.KARPENTER]


def _pool_spec(source: NodeSource) -> dict[str, Any]:
    return source.registration.inputs.get("spec", {})


def _allowed(source: NodeSource, key: str, default: list[str]) -> list[str]:
    """The values the pool's `In` requirement on `key` allows (`default` without one)."""
    for requirement in _pool_spec(source).get("template", {}).get("spec", {}).get("requirements", []):
        if requirement.get("key") == key and requirement.get("operator") == "In":
            return list(requirement.get("values") or [])
    return default


def _node_class(deployment: Deployment, source: NodeSource) -> dict[str, Any]:
    name = _pool_spec(source).get("template", {}).get("spec", {}).get("nodeClassRef", {}).get("name")
    found = (c.inputs for c in deployment.of_type(EC2_NODE_CLASS) if c.inputs.get("metadata", {}).get("name") == name)
    return next(found, {})


def root_volume_bytes(node_class: dict[str, Any]) -> int:
    """The EC2NodeClass's root volume: the mapping marked rootVolume, else AL2023's /dev/xvda, else AL2023's 20Gi."""
    mappings = node_class.get("spec", {}).get("blockDeviceMappings") or []
    chosen = next((m for m in mappings if m.get("rootVolume")), None) or next(
        (m for m in mappings if m.get("deviceName") == ROOT_DEVICE), None)
    size = (chosen or {}).get("ebs", {}).get("volumeSize")
    return int(quantity(size)) if size else DEFAULT_ROOT_GIB * 2**30


def ephemeral_allocatable_bytes(root_bytes: int) -> int:
    """The root volume less kube-reserved 1Gi and the 10 % nodefs eviction threshold (AWS provider types.go)."""
    return root_bytes - EPHEMERAL_RESERVED_BYTES - math.ceil(root_bytes / 100 * EPHEMERAL_EVICTION_PERCENT)


def _resources(deployment: Deployment, source: NodeSource) -> dict[str, str]:
    """The instance-type file's `resources`: the vCPUs (see the module); memory, pods, devices and huge pages that,
    less the kwok provider's fixed 10Mi and the huge pages (pkg/cloudprovider/types.go computeAllocatable), leave
    node_offer's allocatable exactly."""
    offer = node_offer(source)
    facts = catalogue.lookup(source.instance_type)
    assert facts is not None
    hugepages_mib = int(offer.get("hugepages-2Mi", 0)) // 2**20
    extended = {k: f"{v:.0f}" for k, v in offer.items() if k not in ("cpu", "memory", "pods", "hugepages-2Mi")}
    resources = {
        "cpu": str(facts.vcpus),
        "memory": f"{offer['memory'] + KWOK_RESERVED_MIB + hugepages_mib:.0f}Mi",
        "pods": f"{offer['pods']:.0f}",
        "ephemeral-storage": str(ephemeral_allocatable_bytes(root_volume_bytes(_node_class(deployment, source)))),
        **extended,
    }
    if hugepages_mib:
        resources["hugepages-2Mi"] = f"{hugepages_mib}Mi"
    return resources


def _offering(capacity_type: str, zone: str, price: float) -> dict[str, Any]:
    return {
        "Price": price,
        "Available": True,
        "Requirements": [
            {"key": CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
        ],
    }


def instance_types(deployment: Deployment) -> list[dict[str, Any]]:
    """The kwok provider's instance-type file (INSTANCE_TYPES_FILE_PATH; sigs.k8s.io/karpenter@v1.14.1
    kwok/cloudprovider/helpers.go InstanceTypeOptions) for the types the stack's NodePools pin, from our facts
    (infra.facts.catalogue, and infra.facts.allocatable for Karpenter: the same arithmetic
    engine_models.base.node_offer uses with NodeLauncher.KARPENTER), so that a node Karpenter launches has
    node_offer's allocatable: CPU, memory, pods, EFA devices, GPUs, Neuron devices and the EFA huge pages. Offerings in
    the zones the pool allows (nodes.ZONE when it names none), with the capacity types it allows, at the catalogue's
    on-demand price (0 when unknown; spot and reserved too: no price of ours tells them apart). The CPU is the
    instance's vCPUs, so that `limits` count as on EC2 (see the module for what that costs)."""
    types: dict[str, dict[str, Any]] = {}
    for source in _pools(deployment):
        facts = catalogue.lookup(source.instance_type)
        if facts is None:
            raise ValueError(
                f"{source.registration.name}: instance type {source.instance_type!r} is not in the catalogue")
        entry = {
            "name": facts.name,
            "architecture": KUBERNETES_ARCH[facts.architecture.value],
            "operatingSystems": ["linux"],
            "resources": _resources(deployment, source),
            "offerings": [],
        }
        known = types.setdefault(facts.name, entry)
        if known["resources"] != entry["resources"]:
            raise ValueError(
                f"{facts.name}: NodePools give it different resources ({known['resources']} and {entry['resources']}); "
                "the kwok provider has one entry per instance type"
            )
        for capacity_type in _allowed(source, CAPACITY_TYPE, ["on-demand"]):
            for zone in _allowed(source, ZONE_LABEL, [nodes.ZONE]):
                offering = _offering(capacity_type, zone, facts.hourly_usd or 0.0)
                if offering not in known["offerings"]:
                    known["offerings"].append(offering)
    return sorted(types.values(), key=lambda t: t["name"])


def kubelet_status(deployment: Deployment) -> dict[str, dict[str, dict[str, str]]]:
    """What a kubelet on each NodePool's instance type reports, by instance type: `capacity` and `allocatable` as
    tests/cluster/nodes.py gives managed nodes (capacity: vCPUs, memory less the hypervisor's share, devices, huge
    pages; allocatable: node_offer), with the node class's root volume as ephemeral storage (allocatable: less
    kube-reserved and eviction, as the AWS provider counts it)."""
    found = {}
    for source in _pools(deployment):
        status = nodes.node(source, 0)["status"]
        root = root_volume_bytes(_node_class(deployment, source))
        found[source.instance_type] = {
            "capacity": {**status["capacity"], "ephemeral-storage": str(root)},
            "allocatable": {**status["allocatable"], "ephemeral-storage": str(ephemeral_allocatable_bytes(root))},
        }
    return found


def reserved_pools(deployment: Deployment) -> list[str]:
    """The NodePools that allow `reserved` capacity (they need ReservedCapacity=false here; see the module)."""
    return [s.registration.name for s in _pools(deployment) if "reserved" in _allowed(s, CAPACITY_TYPE, [])]


# ---- The objects: node classes at the cloud boundary, the CRDs ----------------------------------------------------


def kwok_node_class(name: str) -> dict[str, Any]:
    """A KWOKNodeClass: no spec needed; its CRD defaults its status to Ready (kwok/apis/crds)."""
    return {"apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}", "kind": KWOK_KIND, "metadata": {"name": name}}


def for_kwok(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects to apply in place of `manifests` when Karpenter's kwok provider stands in for EC2: each NodePool
    that names an EC2NodeClass points at the KWOKNodeClass of the same name instead (before its first apply: the
    NodePool CRD makes nodeClassRef's group and kind immutable), and each EC2NodeClass is followed by that
    KWOKNodeClass. The EC2NodeClasses stay: their CRD still checks them, though nothing here reads them (the cloud
    boundary: what EC2 says about instances comes from `instance_types`). Anything else is returned as it was; a
    second pass changes nothing."""
    present = {m["metadata"]["name"] for m in manifests if m.get("kind") == KWOK_KIND}
    result = []
    for manifest in manifests:
        kind, group = manifest.get("kind"), str(manifest.get("apiVersion", "")).split("/")[0]
        if kind == "NodePool" and group == "karpenter.sh":
            reference = manifest.get("spec", {}).get("template", {}).get("spec", {}).get("nodeClassRef", {})
            if reference.get("kind") == "EC2NodeClass":
                manifest = copy.deepcopy(manifest)
                manifest["spec"]["template"]["spec"]["nodeClassRef"] = {
                    "group": KWOK_GROUP, "kind": KWOK_KIND, "name": reference["name"]}
        result.append(manifest)
        if kind == "EC2NodeClass" and manifest["metadata"]["name"] not in present:
            result.append(kwok_node_class(manifest["metadata"]["name"]))
            present.add(manifest["metadata"]["name"])
    return result


@functools.cache
def _module(folder: str, module: str) -> Path:
    return build.module_dir(folder, module)


def _yaml_documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    return [d for path in paths for d in documents(path.read_text())]


def crds() -> list[dict[str, Any]]:
    """The CRDs Karpenter's kwok provider needs, from the module cache: the AWS provider's, as the stack's chart
    installs them (github.com/aws/karpenter-provider-aws@v1.14.1 pkg/apis/crds: NodePool, NodeClaim, NodeOverlay,
    EC2NodeClass, CapacityBuffer; its NodePool and NodeClaim restrict the karpenter.k8s.aws label domain where the kwok
    chart's restrict karpenter.kwok.sh), and the KWOKNodeClass (sigs.k8s.io/karpenter@v1.14.1
    kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml)."""
    aws = sorted((_module(*AWS) / "pkg" / "apis" / "crds").glob("*.yaml"))
    kwok = [_module(ENGINE, CORE) / "kwok" / "apis" / "crds" / "karpenter.kwok.sh_kwoknodeclasses.yaml"]
    return [d for d in _yaml_documents([*aws, *kwok]) if d.get("kind") == "CustomResourceDefinition"]


# ---- The process --------------------------------------------------------------------------------------------------


def release(deployment: Deployment) -> Registration:
    """The stack's Karpenter Helm release."""
    found = [r for r in deployment.of_type(charts.HELM_RELEASE) if charts.chart_name(r) == "karpenter"]
    if not found:
        raise ValueError("the stack installs no Karpenter chart (eks-ddp:autoscaler is not karpenter)")
    return found[0]


def is_release(registration: Registration) -> bool:
    """Whether `registration` is a Karpenter Helm release (the step after which Karpenter starts)."""
    return registration.type == charts.HELM_RELEASE and charts.chart_name(registration) == "karpenter"


def chart_deployment(deployment: Deployment) -> dict[str, Any]:
    """The controller Deployment the stack's Karpenter chart renders with the stack's values (tests.cluster.charts)."""
    rendered = charts.render(release(deployment), "1.35") or []
    found = [m for m in rendered if m.get("kind") == "Deployment"]
    if not found:
        raise ValueError("the Karpenter chart rendered no Deployment")
    return found[0]


def _container_env(pod: dict[str, Any], namespace: str) -> dict[str, str]:
    """The controller container's environment as the kubelet would give it: plain values, the pod's namespace; a
    resource field the container does not set is left out (the binary's default: MEMORY_LIMIT -1, CPU_REQUESTS
    1000), where a pod would get the node's allocatable or 0."""
    container = next(c for c in pod["containers"] if c["name"] == "controller")
    env = {}
    for variable in container.get("env") or []:
        source = variable.get("valueFrom") or {}
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[variable["name"]] = namespace
        elif "resourceFieldRef" in source:
            field = source["resourceFieldRef"]
            kind, _, resource = field["resource"].partition(".")
            value = (container.get("resources") or {}).get(kind, {}).get(resource)
            if value is not None:
                divisor = quantity(field.get("divisor") or "1") or 1
                env[variable["name"]] = str(math.ceil(quantity(value) / divisor))
    return env


def feature_gates(value: str, reserved: bool) -> str:
    """The chart's FEATURE_GATES, with ReservedCapacity off when a pool allows reserved capacity (see the module)."""
    gates = dict(pair.split("=", 1) for pair in value.split(",") if pair)
    if reserved:
        gates["ReservedCapacity"] = "false"
    return ",".join(f"{k}={v}" for k, v in gates.items())


def _kwok_rbac(namespace: str, account: str) -> list[dict[str, Any]]:
    """The kwok provider's own RBAC (sigs.k8s.io/karpenter@v1.14.1 kwok/charts/templates: clusterrole.yaml,
    clusterrole-kwok.yaml, role.yaml, rolebinding.yaml), rendered by Helm under release KWOK_RELEASE and bound to the
    stack's ServiceAccount. The AWS chart's rules lack what only this provider does: create Nodes (a kubelet does on
    EC2), read KWOKNodeClasses, NodeClaim and NodePool finalizers, CRDs, Leases in kube-node-lease."""
    chart = _module(ENGINE, CORE) / "kwok" / "charts"
    done = subprocess.run(
        [str(charts.helm()), "template", KWOK_RELEASE, str(chart), "--namespace", namespace,
         "--set", "serviceAccount.create=false", "--set", f"serviceAccount.name={account}"],
        capture_output=True, text=True,
    )
    if done.returncode:
        raise OperatorError(f"helm template {chart}: {done.stderr.strip()}")
    return [d for d in documents(done.stdout) if d.get("kind") in RBAC_KINDS]


def _token_kubeconfig(plane: ControlPlane, kubectl: Kubectl, namespace: str, account: str) -> Path:
    """A kubeconfig with a token the API server issues for the ServiceAccount (as the kubelet projects one)."""
    token = kubectl.run("create", "token", account, "-n", namespace, "--duration=48h").strip()
    path = plane.pki / f"karpenter-{namespace}-{account}.kubeconfig"
    return plane.write_kubeconfig(path, account, {"token": token}, namespace)


def _pids(plane: ControlPlane, name: str) -> list[int]:
    return [pid for pid, recorded_name in recorded(plane.state) if recorded_name == name]


def _running(plane: ControlPlane, name: str) -> bool:
    """Whether `name` was started for this plane (and not stopped since: stop_recorded removes the pids file)."""
    return bool(_pids(plane, name))


def _alive(plane: ControlPlane, name: str) -> bool:
    for pid in _pids(plane, name):
        try:
            os.kill(pid, 0)
            return os.waitpid(pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return True
        except ProcessLookupError:
            return False
    return False


def start(plane: ControlPlane, kubectl: Kubectl, binary: Path, deployment: Deployment) -> None:
    """Karpenter's kwok provider as a host process (spawned with plane.spawn, so cluster-down stops it), with the
    environment the stack's chart gives its controller (charts.render of the stack's release and values), the kwok
    provider's instance-type file, leader election off (one process; the chart runs it in the pod's namespace) and
    free ports for metrics and health (Karpenter binds them on every interface: it has no host setting). It runs as
    the chart's ServiceAccount, by a token the API server issues, with the kwok provider's own RBAC bound to it; the
    AWS chart's RBAC, when the harness applies it, is not enough for this provider (see _kwok_rbac). It applies
    crds() first (the chart's own, again, and the KWOKNodeClass) and waits until they are established. Beside it runs
    the stand-in for the kubelet's status report (see the module). Returns once Karpenter answers /readyz (its caches
    synced, its CRDs found); a second call for the same plane does nothing."""
    if _running(plane, ENGINE):
        return
    started = time.monotonic()
    custom_resources.install(kubectl, crds())
    chart = chart_deployment(deployment)
    namespace = chart["metadata"].get("namespace") or str(release(deployment).inputs.get("namespace") or "default")
    pod = chart["spec"]["template"]["spec"]
    account = pod.get("serviceAccountName", "default")
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": account, "namespace": namespace}}
    kubectl.apply([service_account, *_kwok_rbac(namespace, account)])
    folder = plane.state / "karpenter"
    folder.mkdir(exist_ok=True)
    (folder / "instance-types.json").write_text(json.dumps(instance_types(deployment), indent=1))
    (folder / "kubelet-status.json").write_text(json.dumps(kubelet_status(deployment), indent=1))
    health = free_port()
    env = _container_env(pod, namespace)
    env.update({
        "KUBECONFIG": str(_token_kubeconfig(plane, kubectl, namespace, account)),
        "INSTANCE_TYPES_FILE_PATH": str(folder / "instance-types.json"),
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(free_port()),
        "HEALTH_PROBE_PORT": str(health),
        "FEATURE_GATES": feature_gates(env.get("FEATURE_GATES", ""), bool(reserved_pools(deployment))),
        "PATH": "/usr/bin:/bin",
    })
    (folder / "env.json").write_text(json.dumps({k: v for k, v in env.items() if k != "KUBECONFIG"}, indent=1))
    plane.spawn(ENGINE, [str(binary)], env=env)
    plane.spawn("karpenter-kubelet-status", [sys.executable, "-m", "tests.cluster.karpenter", "kubelet-status",
                                             str(kubectl.binary), str(kubectl.kubeconfig),
                                             str(folder / "kubelet-status.json")])
    log = plane.logs / f"{ENGINE}.log"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not answers(health, "/readyz"):
        if time.monotonic() > deadline or not _alive(plane, ENGINE):
            tail = "\n".join(log.read_text().splitlines()[-15:]) if log.exists() else "(no log)"
            raise OperatorError(f"karpenter: not ready on /readyz after {time.monotonic() - started:.0f} s; "
                                f"its log ends:\n{tail}")
        time.sleep(POLL_S)


# ---- The kubelet's status report, stood in ------------------------------------------------------------------------

# Space-separated: kubectl's jsonpath printer pads tabs into spaces (a tabwriter); names and labels hold no spaces.
WATCH_TEMPLATE = ('{.metadata.name}{" "}{.metadata.labels.node\\.kubernetes\\.io/instance-type}{" "}'
                  '{.status.capacity}{" "}{.status.allocatable}{"\\n"}')


def _differs(reported: dict[str, str], wanted: dict[str, str]) -> bool:
    return any(quantity(reported.get(name, 0)) != quantity(value) for name, value in wanted.items())


def report_status(kube: Path, kubeconfig: Path, wanted: dict[str, dict[str, dict[str, str]]]) -> None:
    """Watches Karpenter's nodes and sets each one's `status.capacity` and `status.allocatable` to its instance
    type's, as the kubelet's status report would; again whenever another writer (KWOK's node-initialize stage) puts
    the old values back."""
    command = [str(kube), "kubectl", f"--kubeconfig={kubeconfig}"]
    while True:
        watch = subprocess.Popen([*command, "get", "nodes", "-l", NODEPOOL_LABEL, "--watch", "-o",
                                  f"jsonpath={WATCH_TEMPLATE}"], stdout=subprocess.PIPE, text=True)
        assert watch.stdout is not None
        for line in watch.stdout:
            fields = line.split()
            if len(fields) != 4 or fields[1] not in wanted:
                continue
            name, instance_type, capacity, allocatable = fields
            status = wanted[instance_type]
            stale = _differs(json.loads(capacity), status["capacity"])
            if stale or _differs(json.loads(allocatable), status["allocatable"]):
                subprocess.run([*command, "patch", "node", name, "--subresource=status", "--type=merge",
                                "-p", json.dumps({"status": status})], capture_output=True)
        watch.wait()
        time.sleep(1)


def main(argv: list[str]) -> int:
    if argv[:1] == ["kubelet-status"] and len(argv) == 4:
        report_status(Path(argv[1]), Path(argv[2]), json.loads(Path(argv[3]).read_text()))
        return 0
    print("usage: python -m tests.cluster.karpenter kubelet-status <kube binary> <kubeconfig> <status.json>",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
