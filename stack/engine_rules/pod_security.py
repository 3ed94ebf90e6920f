"""Pod Security Admission: the API server refuses a pod that breaks the level its namespace enforces.

Encoded from kubernetes/pod-security-admission v0.35.0 (Kubernetes 1.35, the stack's default), policy/check_*.go.
`baseline` (what `pod-security.kubernetes.io/enforce: baseline` admits): no host namespaces, privileged containers,
hostPath volumes, host ports or host probes; capabilities added only from the default set; no Unconfined seccomp
or AppArmor; SELinux types from the container set, no user or role; the default /proc mount; safe sysctls.
`restricted` adds: volumes of the listed kinds only, no privilege escalation, ALL capabilities dropped (only
NET_BIND_SERVICE added back), non-root (`runAsNonRoot`, and no `runAsUser: 0`), a RuntimeDefault or Localhost
seccomp profile. Windows' hostProcess and user-namespaced pods (`hostUsers: false`) are not used by the stack.
"""

from collections.abc import Iterator
from typing import Any

from eks_ddp.stack.engine_rules.base import Deployment, Finding, containers, located, pod_specs

ENFORCE = "pod-security.kubernetes.io/enforce"
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}  # check_capabilities_baseline.go
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}  # 1.31 and later
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
}  # check_sysctls.go, 1.32 and later
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
}  # check_restrictedVolumes.go
PROFILES = {"RuntimeDefault", "Localhost"}


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _selinux(options: dict[str, Any] | None) -> bool:
    options = options or {}
    return options.get("type", "") in SELINUX_TYPES and not options.get("user") and not options.get("role")


def _host_handlers(container: dict[str, Any]) -> bool:
    handlers = [container.get(probe) or {} for probe in ("livenessProbe", "readinessProbe", "startupProbe")]
    handlers += list((container.get("lifecycle") or {}).values())
    return any((handler.get(kind) or {}).get("host") for handler in handlers for kind in ("httpGet", "tcpSocket"))


def baseline(pod: dict[str, Any]) -> list[str]:
    """What the baseline level refuses in `pod` (a pod spec), one phrase each."""
    context = pod.get("securityContext") or {}
    problems = [f"{key}: true" for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    problems += [f"hostPath volume {v['name']}" for v in pod.get("volumes", []) if "hostPath" in v]
    problems += [f"sysctl {s['name']}" for s in context.get("sysctls", []) if s["name"] not in SAFE_SYSCTLS]
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        problems.append("pod seccompProfile Unconfined")
    if (context.get("appArmorProfile") or {}).get("type", "RuntimeDefault") not in PROFILES:
        problems.append("pod appArmorProfile")
    if not _selinux(context.get("seLinuxOptions")):
        problems.append("pod seLinuxOptions")
    for container in containers(pod):
        name, own = container["name"], _context(container)
        if own.get("privileged"):
            problems.append(f"{name}: privileged")
        added = set((own.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES
        problems += [f"{name}: adds {capability}" for capability in sorted(added)]
        problems += [f"{name}: hostPort {p['hostPort']}" for p in container.get("ports", []) if p.get("hostPort")]
        if own.get("procMount", "Default") != "Default":
            problems.append(f"{name}: procMount {own['procMount']}")
        if (own.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{name}: seccompProfile Unconfined")
        if (own.get("appArmorProfile") or {}).get("type", "RuntimeDefault") not in PROFILES:
            problems.append(f"{name}: appArmorProfile")
        if not _selinux(own.get("seLinuxOptions")):
            problems.append(f"{name}: seLinuxOptions")
        if _host_handlers(container):
            problems.append(f"{name}: a probe or lifecycle handler sets host")
    return problems


def restricted(pod: dict[str, Any]) -> list[str]:
    """What the restricted level refuses in `pod`: the baseline's refusals and its own."""
    context = pod.get("securityContext") or {}
    problems = baseline(pod)
    problems += [
        f"volume {v['name']} of a kind restricted refuses"
        for v in pod.get("volumes", [])
        if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    if context.get("runAsUser") == 0:
        problems.append("pod runAsUser 0")
    pod_seccomp = (context.get("seccompProfile") or {}).get("type") in PROFILES
    for container in containers(pod):
        name, own = container["name"], _context(container)
        if own.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        capabilities = own.get("capabilities") or {}
        if "ALL" not in capabilities.get("drop", []):
            problems.append(f"{name}: does not drop ALL capabilities")
        problems += [f"{name}: adds {c}" for c in capabilities.get("add", []) if c != "NET_BIND_SERVICE"]
        if own.get("runAsNonRoot") is False or ("runAsNonRoot" not in own and context.get("runAsNonRoot") is not True):
            problems.append(f"{name}: may run as root (runAsNonRoot)")
        if own.get("runAsUser") == 0:
            problems.append(f"{name}: runAsUser 0")
        if (own.get("seccompProfile") or {}).get("type", "RuntimeDefault" if pod_seccomp else None) not in PROFILES:
            problems.append(f"{name}: no RuntimeDefault or Localhost seccomp profile")
    return problems


LEVELS = {"baseline": baseline, "restricted": restricted}


def admitted_by_namespace_level(deployment: Deployment) -> Iterator[Finding]:
    """Every pod a stack creates passes the Pod Security level its namespace enforces (the API server would refuse
    the pod, and its Job, PyTorchJob or TrainJob would never run)."""
    levels = {
        r.inputs["metadata"]["name"]: ((r.inputs["metadata"].get("labels") or {}).get(ENFORCE), located(r))
        for r in deployment.of_type("kubernetes:core/v1:Namespace")
    }
    for registration in deployment.kubernetes_objects():
        level, namespace = levels.get(str(registration.inputs.get("metadata", {}).get("namespace")), (None, ""))
        if level not in LEVELS:
            continue
        for pod in pod_specs(registration.inputs):
            for problem in LEVELS[level](pod):
                yield Finding("pod-security", located(registration), "spec", f"{problem}: {namespace} enforces {level}")
