"""NodeQuarantine: the training pods may taint their own node, and nothing else: the admission policy's CEL evaluated
by a CEL interpreter, as kube-apiserver evaluates it for each UPDATE of a node."""

import copy
from typing import Any

import cel
import pytest

from eks_ddp.infra.addons.node_quarantine import NAME, NODE_NAME_EXTRA, TAINT_KEY, admission_policy
from eks_ddp.stack import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.stack.mocking import Registration

USER = "system:serviceaccount:training:trainer"
POLICY = admission_policy("training", "trainer")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
OWN_NODE = {
    "metadata": {"name": "ip-10-0-1-23", "labels": {"node.kubernetes.io/instance-type": "p4de.24xlarge"}},
    "spec": {"taints": [GPU_TAINT]},
}


def _admitted(old: dict[str, Any], new: dict[str, Any], user: str = USER, node: str = "ip-10-0-1-23") -> bool:
    """kube-apiserver's order: the match conditions select the request, then every validation must hold."""
    activation = {
        "object": new,
        "oldObject": old,
        "request": {"userInfo": {"username": user, "extra": {NODE_NAME_EXTRA: [node]}}},
    }
    if not all(cel.evaluate(c["expression"], activation) for c in POLICY["matchConditions"]):
        return True
    return all(cel.evaluate(v["expression"], activation) for v in POLICY["validations"])


def _changed(**change: Any) -> dict[str, Any]:
    node = copy.deepcopy(OWN_NODE)
    for path, value in change.items():
        section, key = path.split("__")
        node[section][key] = value
    return node


QUARANTINED = [GPU_TAINT, {"key": TAINT_KEY, "value": "true", "effect": "NoExecute"}]


def test_a_training_pod_may_add_the_quarantine_taint_to_its_own_node() -> None:
    assert _admitted(OWN_NODE, _changed(spec__taints=QUARANTINED))
    bare = {"metadata": OWN_NODE["metadata"], "spec": {}}  # a node with no taints yet
    assert _admitted(bare, _changed(spec__taints=QUARANTINED[1:]))


@pytest.mark.parametrize(
    ("what", "new", "node"),
    [
        ("another node", _changed(spec__taints=QUARANTINED), "ip-10-0-9-99"),
        ("another taint removed", _changed(spec__taints=QUARANTINED[1:]), "ip-10-0-1-23"),
        ("another taint added", _changed(spec__taints=[*QUARANTINED, {"key": "x", "effect": "NoSchedule"}]), None),
        ("a label", _changed(metadata__labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}), None),
        ("unschedulable", _changed(spec__unschedulable=True), None),
    ],
)
def test_it_may_change_nothing_else(what: str, new: dict[str, Any], node: str | None) -> None:
    assert not _admitted(OWN_NODE, new, node=node or "ip-10-0-1-23"), what


def test_a_token_without_a_node_name_is_refused_and_other_users_are_not_matched() -> None:
    activation = {"object": OWN_NODE, "oldObject": OWN_NODE, "request": {"userInfo": {"username": USER, "extra": {}}}}
    assert not cel.evaluate(POLICY["validations"][0]["expression"], activation)
    assert _admitted(OWN_NODE, _changed(spec__unschedulable=True), user="system:node:ip-10-0-1-23")


def _registrations(stack: str, **config: Any) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse({**values, **config}, region), stack=stack)


def test_gpu_stacks_grant_the_taint_and_bind_the_policy_cpu_stacks_do_not() -> None:
    gpu = _registrations("gpu")
    role = next(r for r in gpu if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole" and r.name.endswith(
        "node-quarantine-role"))
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    binding = next(r for r in gpu if r.type.endswith("ValidatingAdmissionPolicyBinding"))
    assert binding.inputs["spec"] == {"policyName": NAME, "validationActions": ["Deny"]}
    assert not [r for r in _registrations("dev") if r.type.endswith("ValidatingAdmissionPolicy")]
    assert not [r for r in _registrations("gpu", nodeHealth=False) if r.type.endswith("ValidatingAdmissionPolicy")]
