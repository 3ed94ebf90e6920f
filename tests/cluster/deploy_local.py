"""`make deploy-local`: Pulumi's own engine deploys a stack onto the local cluster, as onto a cluster made elsewhere.

    python -m tests.cluster.deploy_local up --stack dev [--config eks-ddp:trainingOperator=v2 ...]
    python -m tests.cluster.deploy_local down --stack dev

`up` builds the engines (the control plane's, the operators', the Pulumi CLI and its Kubernetes provider), starts
the stack's local cluster with its nodes and nothing applied (or keeps the one running for it, whose Pulumi state
is then current), and runs the real `pulumi up --yes` of the stack in existing-cluster mode against it
(`eks-ddp:existingCluster`), printing Pulumi's own output. The program runs inline through the Automation API
(`pulumi up --client`): the Go module proxy serves no Python language host (github.com/pulumi/pulumi/sdk/python/cmd/
pulumi-language-python/v3 is refused at every version), and the CLI then needs none (tests/cluster/engines/pulumi).
While Pulumi applies, the operators' Deployments it creates are run as processes of their engines, as the kubelet
would run their containers (tests/cluster/operators.py). `down` runs `pulumi destroy --yes`, then stops the cluster.

What a cluster given by kubeconfig cannot take (anything made in AWS), and the add-ons no Go module ships a chart
of, are left out by configuration (`LEFT_OUT`), and `up` says which. Everything stays under runs/deploy-local/<stack>:
the cluster's state, the Pulumi project and stack file it deploys, the file backend with the stack's state, and
PULUMI_HOME with the provider plugin; no Pulumi Cloud, no plugin download (both turned off).
"""

import argparse
import copy
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version as sdk_version
from pathlib import Path
from collections.abc import Iterator, Sequence
from typing import Any

import pulumi
import yaml
from pulumi import automation as auto

from eks_ddp.infra.addons.training_operator import WITHOUT_MPIJOB, OperatorKind
from eks_ddp.infra.facts import versions
from eks_ddp.stack import config_paths
from eks_ddp.tools import stack_file
from eks_ddp.stack.project_config import PROJECT, StackFileError
from tests.cluster import charts, local_cluster, manifests, nodes, operators, pulumi_inline, watchdog
from tests.cluster.control_plane import POLL_S, ControlPlane, ControlPlaneError, any_alive, recorded, stop_recorded
from tests.cluster.engines import build
from tests.cluster.engines.build import BuildError
from tests.cluster.kubectl import Kubectl

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "deploy-local"
PULUMI_ENGINES = ["pulumi", "pulumi-kubernetes"]
PROVIDER = "kubernetes"
PROVIDER_VERSION = "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version"
# Keys only a new cluster takes (the local cluster exists, as one made elsewhere would), and a new node group.
NEW_CLUSTER_KEYS = ("vpc", "clusterName", "kubernetesVersion", "adminPrincipalArns")
NEW_GROUP_KEYS = ("capacityType", "capacityReservationId", "rootVolumeGiB", "releaseVersion")
# Images the pods name: KWOK runs no container, so none is pulled. The fabric check's is set too, so that the check
# runs on every stack (none is published for arm64, and a stack without one skips it).
IMAGE = "eks-ddp-trainer:local"
FABRIC_CHECK_IMAGE = "eks-ddp-fabric-check:local"
# A file system's facts for the shared claim: the volume binds on the local cluster, and no node mounts it.
STAND_IN_FSX = {"kind": "existing-fsx", "fileSystemId": "fs-00000000000000001",
                "dnsName": "fs-00000000000000001.fsx.us-east-1.amazonaws.com", "mountName": "standin1"}
# What this run leaves out, and why: stack key -> (value, reason).
LEFT_OUT: dict[str, tuple[Any, str]] = {
    "autoscaler": ("none", "the nodes are KWOK's, and nothing here launches EC2 instances"),
    "modelBucket": (False, "an S3 bucket is made in AWS"),
    "nodeHealth": (False, "the node monitoring agent is an EKS add-on"),
    "monitoring": ("none", "the kube-prometheus-stack chart ships in no Go module"),
    "addons": ({
        "efaDevicePlugin": False, "nvidiaDevicePlugin": False, "neuronDevicePlugin": False, "fsxCsiDriver": False,
        "metricsServer": False,
    }, "the device plugins' and the FSx CSI driver's charts ship in no Go module pinned here, and metrics-server's "
       "APIService needs a server that answers, which KWOK does not run"),
}


@dataclass
class Workspace:
    """Where one stack's local deploy keeps everything."""

    stack: str
    runs: Path = RUNS

    @property
    def root(self) -> Path:
        return self.runs / self.stack

    @property
    def cluster(self) -> Path:
        """The local cluster's state (local_cluster.new_plane keeps the folders below beside it)."""
        return self.root

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def backend(self) -> Path:
        return self.root / "state"

    @property
    def plugin(self) -> Path:
        """The Kubernetes provider built here, as the project's plugin (write_project)."""
        return self.root / "provider" / f"pulumi-resource-{PROVIDER}"

    @property
    def pulumi_home(self) -> Path:
        return self.root / "pulumi-home"


def deploy_config(
    stack: str, kubeconfig: Path, sources: Path, override: dict[str, str] | None = None
) -> dict[str, Any]:
    """The stack file's config with `override` (full keys, as `pulumi up --config` sets them), the local cluster as an
    existing cluster and LEFT_OUT applied; the operators from local files made in `sources` (local_addons)."""
    config = config_paths.merged(stack_file.settings(stack_file.stack_path(stack)), override or {}, {})
    for key in NEW_CLUSTER_KEYS:
        config.pop(f"{PROJECT}:{key}", None)
    config[f"{PROJECT}:nodeGroups"] = [{key: value for key, value in group.items() if key not in NEW_GROUP_KEYS}
                                       for group in config.get(f"{PROJECT}:nodeGroups") or []]
    storage = config.get(f"{PROJECT}:storage") or {}
    if storage.get("kind", "none") != "none":
        config[f"{PROJECT}:storage"] = dict(STAND_IN_FSX)
    config.setdefault(f"{PROJECT}:image", IMAGE)
    config.setdefault(f"{PROJECT}:fabricCheckImage", FABRIC_CHECK_IMAGE)
    config[f"{PROJECT}:existingCluster"] = {"kubeconfig": str(kubeconfig)}
    for key, (value, _) in LEFT_OUT.items():
        config[f"{PROJECT}:{key}"] = copy.deepcopy(value)
    operator = config.get(f"{PROJECT}:trainingOperator", OperatorKind.V1.value)
    queued = config.get(f"{PROJECT}:queueing") == "kueue"
    config[f"{PROJECT}:addons"].update(
        local_addons(operator, _installs_mpi_operator(stack, override or {}), queued, sources))
    return config


def local_addons(operator: str, with_mpi: bool, queued: bool, sources: Path) -> dict[str, str]:
    """`eks-ddp:addons` paths installing the operators from Go's module cache, as no registry is reached: the MPI
    operator's manifest; the training operator v1's kustomization (ours without MPIJobs over it when the MPI operator
    is installed, made offline in `sources`); Kubeflow Trainer's and, when `queued`, Kueue's chart as their releases
    package them (made in `sources`)."""
    shutil.rmtree(sources, ignore_errors=True)
    sources.mkdir(parents=True)
    mpi = versions.MPI_OPERATOR_MANIFEST.format(version=versions.MPI_OPERATOR_VERSION)
    addons = {"mpiOperator": str(manifests.local_path(mpi))}
    if operator == OperatorKind.V1.value:
        overlay = versions.TRAINING_OPERATOR_OVERLAY.format(version=versions.TRAINING_OPERATOR_VERSION)
        release = manifests.offline_kustomization(Path(WITHOUT_MPIJOB), sources) if with_mpi else None
        addons["trainingOperator"] = str(release or manifests.local_path(overlay))
    elif operator == OperatorKind.V2.value:
        chart = versions.KUBEFLOW_TRAINER_CHART[0]
        addons["kubeflowTrainer"] = str(charts.package(chart, sources / chart))
    if queued:
        addons["kueue"] = str(charts.package(versions.KUEUE_CHART[0], sources / versions.KUEUE_CHART[0]))
    return addons


def _installs_mpi_operator(stack: str, override: dict[str, str]) -> bool:
    """Whether the stack installs the MPI operator v2 (a GPU group with EFA), as its program registers it."""
    registrations = local_cluster.deployment_of(stack, override).registrations
    return any(r.type == "eksddp:index:MpiOperator" for r in registrations)


def provider_version() -> str:
    """The release the provider engine reports (its engine.toml)."""
    return build.Engine.read(build.HERE / "pulumi-kubernetes").variables[PROVIDER_VERSION]


def write_project(workspace: Workspace, config: dict[str, Any], binaries: dict[str, Path]) -> None:
    """The project folder the CLI runs in: this repository's program and Pulumi.yaml, with the Kubernetes provider
    built here as the project's plugin, and the stack file to deploy.

    The plugin is named by path, without a version, so it serves the version the SDK asks for (pulumi/pkg/v3
    v3.274.1 pkg/resource/plugin/host.go resolvePluginPath): requirements.txt pins the SDK pulumi-kubernetes 4.34.2,
    whose provider module the Go module proxy refuses, and the one it serves is v4.25.0 (tests/cluster/engines/
    pulumi-kubernetes). The CLI's own plugin search takes only the exact version (SelectCompatiblePlugin), and the SDK
    4.25.0 cannot be used instead: it types kustomize.v2.Directory's `resources` as a string, which the pulumi 3.272.0
    SDK refuses at every Directory ("Unexpected type. Expected 'list'").
    """
    target = workspace.plugin
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    target.symlink_to(binaries["pulumi-kubernetes"])
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    project["plugins"] = {"providers": [{"name": PROVIDER, "path": str(target.parent)}]}
    workspace.project.mkdir(parents=True, exist_ok=True)
    (workspace.project / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
    shutil.copyfile(ROOT / "__main__.py", workspace.project / "__main__.py")
    stack_yaml = workspace.project / f"Pulumi.{workspace.stack}.yaml"
    stack_yaml.write_text(yaml.safe_dump({"config": config}, sort_keys=False))


def pulumi_env(workspace: Workspace) -> dict[str, str]:
    """Nothing from the network: a file backend, no plugin download, no update check, no ambient plugins."""
    return {
        "PULUMI_BACKEND_URL": f"file://{workspace.backend}",
        "PULUMI_CONFIG_PASSPHRASE": "",
        "PULUMI_HOME": str(workspace.pulumi_home),
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }


def pulumi_command(workspace: Workspace, binaries: dict[str, Path]) -> Path:
    """The folder whose bin/pulumi is the CLI built here, as the Automation API runs it."""
    bin_dir = workspace.root / "cli" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / "pulumi"
    link.unlink(missing_ok=True)
    link.symlink_to(binaries["pulumi"])
    return bin_dir.parent


def stack_of(
    workspace: Workspace, binaries: dict[str, Path], transforms: Sequence[pulumi.ResourceTransform] = ()
) -> auto.Stack:
    workspace.backend.mkdir(parents=True, exist_ok=True)
    cli_root = pulumi_command(workspace, binaries)
    return pulumi_inline.stack(workspace.project, workspace.stack, cli_root, pulumi_env(workspace), transforms)


@dataclass
class OperatorRunner:
    """Runs each operator Deployment that appears as its engine's process, as the kubelet runs its container, until
    stopped; what failed is kept for the caller."""

    plane: ControlPlane
    kubectl: Kubectl
    binaries: dict[str, Path]
    started: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="operators", daemon=True)

    def __enter__(self) -> "OperatorRunner":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            listed = self.kubectl.api.items("/apis/apps/v1/deployments")  # a list's items carry no kind
            deployments = [{"apiVersion": "apps/v1", "kind": "Deployment", **item} for item in listed]
            for operator, deployment in operators.installed(deployments):
                # Its pod exists and has its node, as the kubelet starts no container before: Pulumi may apply the
                # Deployment before its ServiceAccount, and the ReplicaSet makes the pod only once that exists.
                pods = operators.pods_of(self.kubectl, operator, deployment)
                scheduled = any(pod["spec"].get("nodeName") for pod in pods)
                if operator.engine in self.started or not scheduled or not self._webhook_served(operator):
                    continue
                self.started.add(operator.engine)
                try:
                    operators.start(self.plane, self.kubectl, self.binaries, operator, deployment)
                    print(f"    [local cluster] {operator.engine} runs as Deployment {operator.deployment}", flush=True)
                except Exception as error:  # noqa: BLE001 - kept for the caller: a dead thread would hide it
                    self.errors.append(f"{operator.engine}: {type(error).__name__}: {error}")
                    print(f"    [local cluster] {operator.engine} did not start: {self.errors[-1]}", flush=True)
            self._stop.wait(POLL_S)

    def _webhook_served(self, operator: operators.Operator) -> bool:
        """Its webhook's Service and certificate Secret exist (Pulumi may create them after the Deployment, and the
        kubelet starts no container before the Secret its volume names exists), or it has none."""
        if operator.webhook is None:
            return True
        namespace = f"/api/v1/namespaces/{operator.namespace}"
        services = {item["metadata"]["name"] for item in self.kubectl.api.items(f"{namespace}/services")}
        secrets = {item["metadata"]["name"] for item in self.kubectl.api.items(f"{namespace}/secrets")}
        return operator.webhook.service in services and operator.webhook.secret in secrets


def running_operators(plane: ControlPlane) -> set[str]:
    """The operators a kept cluster already runs (by engine name, as ControlPlane.spawn records them)."""
    return {name for _, name in recorded(plane.state)} & {op.engine for op in operators.OPERATORS}


def cluster_for(workspace: Workspace, binaries: dict[str, Path], override: dict[str, str]) -> tuple[
    ControlPlane, Kubectl, bool
]:
    """The stack's local cluster: the one running for it, else a new one with its nodes (and no Pulumi state, which
    would name objects of the cluster before). True when it is new."""
    plane = ControlPlane(workspace.cluster, binaries["kube"], binaries["kwok"])
    if any_alive(workspace.cluster) and plane.kubeconfig.exists():
        return plane, Kubectl(binaries["kube"], plane.kubeconfig), False
    shutil.rmtree(workspace.backend, ignore_errors=True)
    cluster = local_cluster.start(workspace.stack, binaries, runs=workspace.runs, wait_s=local_cluster.CLI_WAIT_S)
    deployment = local_cluster.deployment_of(workspace.stack, override)
    cluster.kubectl.apply(nodes.nodes(deployment))
    return cluster.control_plane, cluster.kubectl, True


COMMAND_BOUND_S = 300.0
"""Longer than any command of a stack here takes (the gpu stack's first `pulumi up`: 111 s at most), shorter than
pytest's timeout, so that a hang ends in a report (watchdog.bounded), not in the test's timeout."""


def _bounded(workspace: Workspace, binaries: dict[str, Path], kubectl: Kubectl, command: str):
    """watchdog.bounded for one Pulumi command of the workspace: its provider plugin, then its CLI."""
    cli = pulumi_command(workspace, binaries) / "bin" / "pulumi"
    report = workspace.root / f"hung-{command.replace(' ', '-')}-{time.strftime('%H%M%S')}.txt"
    return watchdog.bounded(f"{command} of {workspace.stack}", COMMAND_BOUND_S, [workspace.plugin, cli], kubectl,
                            report)


@contextmanager
def operators_running(plane: ControlPlane, kubectl: Kubectl, binaries: dict[str, Path]) -> Iterator[None]:
    """While Pulumi applies: each operator Deployment it creates run as its engine's process (OperatorRunner);
    OperatorError after, when one did not start."""
    runner = OperatorRunner(plane, kubectl, binaries, started=running_operators(plane))
    with runner:
        yield
    if runner.errors:
        raise operators.OperatorError("; ".join(runner.errors))


def pulumi_up(workspace: Workspace, plane: ControlPlane, kubectl: Kubectl, binaries: dict[str, Path],
              on_output: Any = print, override: dict[str, str] | None = None,
              transforms: Sequence[pulumi.ResourceTransform] = ()) -> auto.UpResult:
    """The real `pulumi up --yes` of the workspace's stack, with `override` as `--config` would set it (and a test's
    `transforms`), onto the cluster of `plane`, its operators run as their Deployments appear; CommandError when
    Pulumi fails, OperatorError when an operator did not start."""
    prepare(workspace, plane, binaries, override)
    on_output(f"==> left out of this run by configuration ({workspace.project / f'Pulumi.{workspace.stack}.yaml'}):")
    for key, (value, why) in LEFT_OUT.items():
        on_output(f"    {PROJECT}:{key} = {value}: {why}")
    on_output(f"==> pulumi up --yes (Pulumi {build.version(build.Engine.read(build.HERE / 'pulumi'))}, "
              f"pulumi-kubernetes {provider_version()} for the SDK's {sdk_version('pulumi-kubernetes')}, the program "
              f"inline; state in {workspace.backend})")
    with _bounded(workspace, binaries, kubectl, "pulumi up"), operators_running(plane, kubectl, binaries):
        return stack_of(workspace, binaries, transforms).up(on_output=on_output, color="never")


def prepare(
    workspace: Workspace, plane: ControlPlane, binaries: dict[str, Path], override: dict[str, str] | None = None
) -> None:
    """The workspace's project written for a run onto the cluster of `plane` (deploy_config, write_project)."""
    write_project(workspace, deploy_config(workspace.stack, plane.kubeconfig, workspace.root / "sources", override),
                  binaries)


def pulumi_preview(workspace: Workspace, plane: ControlPlane, binaries: dict[str, Path], on_output: Any = print,
                   override: dict[str, str] | None = None) -> auto.PreviewResult:
    """The real `pulumi preview --diff` of the workspace's stack, with `override` as `--config` would set it."""
    prepare(workspace, plane, binaries, override)
    on_output(f"==> pulumi preview --diff ({workspace.stack})")
    return stack_of(workspace, binaries).preview(diff=True, on_output=on_output, color="never")


def pulumi_destroy(workspace: Workspace, binaries: dict[str, Path], on_output: Any = print) -> auto.DestroyResult:
    on_output(f"==> pulumi destroy --yes ({workspace.stack})")
    return stack_of(workspace, binaries).destroy(on_output=on_output, color="never")


def up(stack: str, override: dict[str, str]) -> auto.UpResult:
    workspace = Workspace(stack)
    binaries = build.build_all([*local_cluster.ENGINES, *PULUMI_ENGINES])
    plane, kubectl, new = cluster_for(workspace, binaries, override)
    print(f"==> the local cluster of {stack}: {'started, with its nodes and nothing applied' if new else 'kept'}; "
          f"kubeconfig {plane.kubeconfig}", flush=True)
    return pulumi_up(workspace, plane, kubectl, binaries, override=override)


def down(stack: str) -> None:
    """`pulumi destroy`, then the cluster stopped whatever the destroy did (its state names only that cluster)."""
    workspace = Workspace(stack)
    try:
        if any_alive(workspace.cluster) and (workspace.backend / ".pulumi").exists():
            pulumi_destroy(workspace, build.build_all(PULUMI_ENGINES))
    finally:
        stopped = stop_recorded(workspace.cluster)
        print(f"==> {workspace.cluster}: stopped {', '.join(stopped) if stopped else 'nothing (not running)'}",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.deploy_local", description=description)
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--config", action="append", default=[], help="<key>=<value>, as pulumi up --config (up)")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.stack, stack_file.overrides(args.config))
        else:
            down(args.stack)
    except auto.CommandError:
        command = "up" if args.command == "up" else "destroy"
        print(f"error: pulumi {command} of {args.stack} failed: its output is above", file=sys.stderr)
        return 1
    except (BuildError, ControlPlaneError, FileNotFoundError, StackFileError, manifests.ManifestSourceError,
            operators.OperatorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
