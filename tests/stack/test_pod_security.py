"""Pod Security Admission's levels as encoded (stack/engine_rules/pod_security.py, from kubernetes/
pod-security-admission v0.35.0), on the stack's own pods and on pods that break one check each."""

from typing import Any

import pytest

from eks_ddp.stack.engine_rules.pod_security import baseline, restricted
from eks_ddp.stack.local import render_for

TRAINER = {"name": "t", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
RESTRICTED_POD: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [TRAINER],
    "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}, {"name": "tmp", "emptyDir": {}}],
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**RESTRICTED_POD, **changes}


def _container(**context: Any) -> dict[str, Any]:
    return _with(containers=[{**TRAINER, "securityContext": {**TRAINER["securityContext"], **context}}])


@pytest.mark.parametrize(
    ("pod", "refusal"),
    [
        (_with(hostNetwork=True), "hostNetwork: true"),
        (_with(volumes=[{"name": "host", "hostPath": {"path": "/"}}]), "hostPath volume host"),
        (_container(privileged=True), "t: privileged"),
        (_container(capabilities={"drop": ["ALL"], "add": ["NET_ADMIN"]}), "t: adds NET_ADMIN"),
        (_container(seccompProfile={"type": "Unconfined"}), "t: seccompProfile Unconfined"),
        (_with(containers=[{**TRAINER, "ports": [{"containerPort": 80, "hostPort": 80}]}]), "t: hostPort 80"),
        (_with(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}), "sysctl kernel.msgmax"),
        (_with(containers=[{**TRAINER, "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}]),
         "t: a probe or lifecycle handler sets host"),
    ],
)
def test_baseline_refuses_what_the_api_server_refuses(pod: dict[str, Any], refusal: str) -> None:
    assert baseline(RESTRICTED_POD) == [] and restricted(RESTRICTED_POD) == []
    assert refusal in baseline(pod) and refusal in restricted(pod)


@pytest.mark.parametrize(
    ("pod", "refusal"),
    [
        (_container(allowPrivilegeEscalation=True), "t: allowPrivilegeEscalation is not false"),
        (_container(capabilities={}), "t: does not drop ALL capabilities"),
        (_container(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}), "t: adds CHOWN"),
        (_container(runAsNonRoot=False), "t: may run as root (runAsNonRoot)"),
        (_container(runAsUser=0), "t: runAsUser 0"),
        (_with(securityContext={"runAsNonRoot": True}), "t: no RuntimeDefault or Localhost seccomp profile"),
        (_with(volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}]), "volume n of a kind restricted refuses"),
    ],
)
def test_restricted_refuses_more_than_baseline(pod: dict[str, Any], refusal: str) -> None:
    assert refusal in restricted(pod) and refusal not in baseline(pod)


def test_the_training_pods_are_restricted_but_for_the_root_permissions_step() -> None:
    """Why the training namespace enforces baseline and warns at restricted (infra/platform.py)."""
    job, evaluation = render_for("dev")
    assert evaluation is not None
    pods = [*job.pods, evaluation["spec"]["template"]["spec"]]
    for pod in pods:
        assert baseline(pod) == []
        assert restricted(pod) == [
            "volume-permissions: adds CHOWN",
            "volume-permissions: adds DAC_OVERRIDE",
            "volume-permissions: may run as root (runAsNonRoot)",
            "volume-permissions: runAsUser 0",
        ]
