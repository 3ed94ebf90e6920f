"""A bad GPU node quarantined by its own training pod, on the engines themselves: the quarantine container's script
(workloads/scripts/quarantine_node.py, the text the pod runs) calls the real API server with a token bound to the
training pod, as its projected volume holds; the stack's RBAC and ValidatingAdmissionPolicy (infra.addons.
node_quarantine) decide what it may patch, and the controller manager's taint-eviction controller and the training
operator decide what happens to the pod; whatever else the pod's token asks of a node (another taint, a label,
unschedulable), and a token naming no node, the policy refuses. The pre-flight itself (DCGM, /dev/infiniband) needs a
GPU node: its verdict file is written here."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eks_ddp.infra.addons.node_quarantine import TAINT_KEY
from eks_ddp.workloads.preflight import QUARANTINE_SCRIPT
from tests.cluster.control_plane import LOOPBACK
from tests.cluster.conftest import OnEngines, training, true_conditions, wait_for
from tests.cluster.kubectl import Kubectl, KubectlError

OWN_NODE_ONLY = "a training pod may taint only the node it runs on"
TAINT_ONLY = f"a training pod may change only its node's {TAINT_KEY} taint"


def _token(on: OnEngines, pod: dict[str, Any], bound: bool = True) -> str:
    """A token of the pod's service account: bound to the pod (as its projected volume holds, naming its node), or a
    plain one (`kubectl create token` without an object: no node in it)."""
    meta = pod["metadata"]
    binding = ["--bound-object-kind=Pod", f"--bound-object-name={meta['name']}",
               f"--bound-object-uid={meta['uid']}"] if bound else []
    return on.kubectl.run("create", "token", pod["spec"].get("serviceAccountName", "default"), "-n",
                          meta["namespace"], *binding).strip()


def _as_pod(on: OnEngines, token: str, home: Path) -> Kubectl:
    home.mkdir(parents=True, exist_ok=True)
    plane = on.cluster.control_plane
    return Kubectl(on.kubectl.binary, plane.write_kubeconfig(home / "kubeconfig", "pod", {"token": token}))


def _refusal(kubectl: Kubectl, node: str, patch: list[dict[str, Any]]) -> str:
    """Why the API server refuses the JSON patch of the node, or "" when it applies it."""
    try:
        kubectl.run("patch", "node", node, "--type=json", f"--patch={json.dumps(patch)}")
    except KubectlError as error:
        return str(error)
    return ""


def _quarantine(
    on: OnEngines, pod: dict[str, Any], node: str, home: Path, verdict: str | None = "DCGM diagnostic level 1 failed"
) -> subprocess.CompletedProcess[str]:
    """The quarantine container of `pod`, run as the pod runs it (isolated: no site, no repository), told it is on
    `node`, after a pre-flight that wrote `verdict` (None: one that passed and wrote nothing)."""
    account = home / "account"
    account.mkdir(parents=True, exist_ok=True)
    (account / "token").write_text(_token(on, pod))
    root_ca = on.kubectl.get("configmap", "kube-root-ca.crt", "-n", pod["metadata"]["namespace"])  # the volume's CA
    (account / "ca.crt").write_text(root_ca["data"]["ca.crt"])
    if verdict is not None:
        (home / "failed").write_text(verdict)
    environment = {
        "PATH": os.environ["PATH"],
        "NODE_NAME": node,
        "TAINT_KEY": TAINT_KEY,
        "PREFLIGHT_VERDICT": str(home / "failed"),
        "QUARANTINE_ACCOUNT": str(account),
        "KUBERNETES_SERVICE_HOST": LOOPBACK,
        "KUBERNETES_SERVICE_PORT": str(on.cluster.control_plane.api_port),
        "WAIT_SECONDS": "0",
    }
    return subprocess.run([sys.executable, "-I", "-c", QUARANTINE_SCRIPT], env=environment, capture_output=True,
                          text=True, timeout=60)


def _taints(on: OnEngines, node: str) -> list[dict[str, Any]]:
    """The node's taints but the node lifecycle controller's own (`node.kubernetes.io/unreachable` and the like come
    and go when KWOK's heartbeat is late on a busy machine)."""
    taints = on.kubectl.get("node", node)["spec"].get("taints") or []
    return [t for t in taints if not t["key"].startswith("node.kubernetes.io/")]


def test_a_training_pod_taints_only_its_own_node_and_is_evicted_from_it(
    cluster: Callable[..., OnEngines], tmp_path: Path
) -> None:
    on = cluster("gpu")
    pods = training(on.pods())
    assert pods, "gpu: no training pod"
    pod = pods[0]
    own = pod["spec"]["nodeName"]
    other = next(n["metadata"]["name"] for n in on.kubectl.items("nodes") if n["metadata"]["name"] != own)

    kept = _taints(on, own)
    passed = _quarantine(on, pod, own, tmp_path / "passed", verdict=None)
    assert passed.returncode == 0 and not passed.stderr, passed.stderr
    assert _taints(on, own) == kept

    refused = _quarantine(on, pod, other, tmp_path / "other")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"GPU PREFLIGHT FAILED on node {other}: DCGM diagnostic level 1 failed; "
                                     "could not taint it (HTTP 422 Unprocessable Entity: "), refused.stderr
    assert OWN_NODE_ONLY in refused.stderr, refused.stderr
    assert refused.stderr.endswith(f"cordon it: kubectl cordon {other}\n"), refused.stderr
    assert not [t for t in _taints(on, other) if t["key"] == TAINT_KEY]

    # Whatever else the pod's token asks of its own node, the policy refuses; a token naming no node gets nothing.
    as_pod = _as_pod(on, _token(on, pod), tmp_path / "pod")
    quarantine = {"key": TAINT_KEY, "value": "true", "effect": "NoExecute"}
    everything = on.kubectl.get("node", own)["spec"].get("taints") or []
    for what, patch, why in [
        ("another taint removed", [{"op": "replace", "path": "/spec/taints", "value": [quarantine]}], TAINT_ONLY),
        ("another taint added",
         [{"op": "add", "path": "/spec/taints/-", "value": {"key": "x", "effect": "NoSchedule"}}], TAINT_ONLY),
        ("a label", [{"op": "add", "path": "/metadata/labels/eks-ddp~1x", "value": "y"}], TAINT_ONLY),
        ("unschedulable", [{"op": "add", "path": "/spec/unschedulable", "value": True}], TAINT_ONLY),
    ]:
        assert why in _refusal(as_pod, own, patch), what
    plain = _as_pod(on, _token(on, pod, bound=False), tmp_path / "plain")
    add = [{"op": "replace", "path": "/spec/taints", "value": [*everything, quarantine]}]
    assert OWN_NODE_ONLY in _refusal(plain, own, add), "a token without a node name"
    assert _refusal(on.kubectl, own, [{"op": "add", "path": "/metadata/labels/eks-ddp~1x", "value": "y"}]) == "", (
        "the policy matches the training pods' account alone")
    assert _taints(on, own) == kept

    tainted = _quarantine(on, pod, own, tmp_path / "own")
    assert f"tainted {TAINT_KEY}=true:NoExecute" in tainted.stderr, tainted.stderr
    taints = _taints(on, own)
    assert [t for t in taints if t["key"] != TAINT_KEY] == kept  # the group's own taints stay
    assert quarantine in [{k: t.get(k) for k in ("key", "value", "effect")} for t in taints]
    namespace, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]

    def replaced() -> dict[str, Any] | None:
        found = on.kubectl.items("pods", "-n", namespace, f"--field-selector=metadata.name={name}")
        return found[0] if found and found[0]["metadata"]["uid"] != uid else None

    replacement = wait_for(f"{name} evicted from {own} and recreated by the training operator", replaced)
    assert replacement["spec"].get("nodeName") != own
    assert sum(s.get("restartCount", 0) for s in replacement.get("status", {}).get("containerStatuses") or []) == 0
    job = on.kubectl.items("pytorchjobs", "-n", namespace)[0]
    failed = true_conditions(job).get("Failed")
    assert not failed, f"the eviction failed the job: {failed}"
