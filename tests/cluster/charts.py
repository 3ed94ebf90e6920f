"""What a stack's Helm releases install, rendered by the real Helm from the charts inside Go modules.

A `kubernetes:helm.sh/v3:Release` names a chart in a Helm repository; the same chart ships inside the Go module of
the project that publishes it, at the tag it was published from. Each chart below is read from that module in Go's
module cache (pinned by a folder of tests/cluster/engines, never copied into the repository) and rendered by
`helm template` of the Helm that pulumi-kubernetes renders Releases with (tests/cluster/engines/helm), with the
release's name, namespace and values, CRDs included, as a first install applies them.

Where upstream's release edits the tree before `helm package` (the chart's version stamped from the tag, the image
it built written into the values, CRDs linked in by symbolic links that module zips leave out, dependencies fetched
by `helm dependency build`), the copy rendered here gets the same edits, each cited below. A chart whose version, so
made, is not the one the release pins is refused in one line: one version's objects are never installed for another.
A chart no Go module ships at that version renders as None, and the harness stands it in (`source` says why).

    from tests.cluster import charts
    objects = charts.render(registration, "1.35")   # list of dicts, or None
    crds = charts.crds("monitoring.coreos.com")      # CRDs of a group whose chart is stood in
"""

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eks_ddp.tools.mocking import Registration
from tests.cluster.documents import documents
from tests.cluster.engines import build

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HOOK = "helm.sh/hook"
"""The annotation of a hook object: Helm applies it around the install (pre-/post-install), not with the rest."""


class ChartSourceError(Exception):
    """A chart whose version in its module is not the one the release (or its parent chart) pins."""


@dataclass(frozen=True)
class Stamp:
    """What upstream's release writes into the chart's tree before `helm package`. Each value is a format string of
    the module's tag: {tag} is v1.14.1, {version} 1.14.1."""

    chart: Mapping[str, str]
    """Chart.yaml fields (version, appVersion)."""
    values: Mapping[str, Any]
    """values.yaml fields, nested; given to Helm as a values file under the release's own, which is the same."""
    source: str


@dataclass(frozen=True)
class Source:
    folder: str
    """The folder of tests/cluster/engines whose go.mod pins the module."""
    module: str
    path: str
    """The chart's folder inside the module."""
    stamp: Stamp | None = None
    crds: str = ""
    """A folder of the module that upstream's chart links as its crds/ (the links are not in the module zip)."""
    dependencies: Mapping[str, "Source"] = field(default_factory=dict)
    """Charts that upstream's packaging puts into charts/ (`helm dependency build`), by dependency name."""
    note: str = ""


JOBSET = Source(
    "jobset",
    "sigs.k8s.io/jobset",
    "charts/jobset",
    Stamp(
        {"version": "{version}", "appVersion": "{tag}"},
        {"image": {"repository": "registry.k8s.io/jobset/jobset", "tag": "{tag}", "pullPolicy": "IfNotPresent"}},
        "sigs.k8s.io/jobset@v0.12.0 hack/helm-chart-package.sh (`helm package --version ${GIT_TAG/#v/} --app-version "
        "${GIT_TAG}`, image set by yq for a promoted vX.Y.Z tag)",
    ),
)
LWS = Source(
    "charts",
    "sigs.k8s.io/lws",
    "charts/lws",
    Stamp(
        {"version": "{tag}", "appVersion": "{tag}"},
        {"image": {"manager": {"repository": "registry.k8s.io/lws/lws", "tag": "{tag}", "pullPolicy": "IfNotPresent"}}},
        "sigs.k8s.io/lws@v0.8.0 hack/push-chart.sh (`helm package --version ${chart_version} --app-version "
        "${chart_version}`, the tag; image set by yq)",
    ),
    note="off in our values (condition dataCache.enabled), present because Helm refuses a chart missing a dependency",
)

CHARTS: dict[str, Source] = {
    # The chart has no charts/ folder and no Chart.lock in the module: its publish workflow runs `helm dependency build`
    # (github.com/kubeflow/trainer/v2@v2.3.0 .github/workflows/publish-helm-charts.yaml), fetching jobset 0.12.0 and
    # lws 0.8.0 (charts/kubeflow-trainer/Chart.yaml dependencies), each rendered here from its own module.
    "kubeflow-trainer": Source(
        "kubeflow-trainer",
        "github.com/kubeflow/trainer/v2",
        "charts/kubeflow-trainer",
        dependencies={"jobset": JOBSET, "lws": LWS},
    ),
    "karpenter": Source(
        "charts",
        "github.com/aws/karpenter-provider-aws",
        "charts/karpenter",
        Stamp(
            {"version": "{version}", "appVersion": "{version}"},
            # The digest is the one `ko publish` printed for the release's image, which no module holds: left out,
            # the template names the image by tag alone (templates/deployment.yaml: `@digest` only when set).
            {"controller": {"image": {"repository": "public.ecr.aws/karpenter/controller", "tag": "{version}",
                                      "digest": ""}}},
            "github.com/aws/karpenter-provider-aws@v1.14.1 hack/release/release.sh (release \"${git_tag#v}\") and "
            "hack/release/common.sh (build: controller.image.*; publishHelmChart: Chart.yaml version and appVersion)",
        ),
        crds="pkg/apis/crds",
        note="crds/ are links to pkg/apis/crds/ upstream; the controller image digest is not known here",
    ),
    # sigs.k8s.io/kueue@v0.17.0 hack/helm-chart-package.sh: the manager's (and KueueViz's, off in our values) image
    # set by yq to registry.k8s.io/kueue/<image>:<tag> for a promoted vX.Y.Z tag, then `helm package --version
    # ${GIT_TAG/#v/} --app-version ${GIT_TAG}`: the tree's Chart.yaml already says 0.17.0 and v0.17.0.
    "kueue": Source(
        "kueue",
        "sigs.k8s.io/kueue",
        "charts/kueue",
        Stamp(
            {"version": "{version}", "appVersion": "{tag}"},
            {"controllerManager": {"manager": {"image": {"repository": "registry.k8s.io/kueue/kueue", "tag": "{tag}",
                                                         "pullPolicy": "IfNotPresent"}}},
             "kueueViz": {name: {"image": {"repository": f"registry.k8s.io/kueue/kueueviz-{name}", "tag": "{tag}",
                                           "pullPolicy": "IfNotPresent"}} for name in ("backend", "frontend")}},
            "sigs.k8s.io/kueue@v0.17.0 hack/helm-chart-package.sh (image set by yq for a promoted vX.Y.Z tag, "
            "`helm package --version ${chart_version} --app-version ${GIT_TAG}`)",
        ),
    ),
    "metrics-server": Source(
        "charts",
        "sigs.k8s.io/metrics-server",
        "charts/metrics-server",
        note="v0.8.0's chart says 3.12.2 but has default-off additions after that release (tests/cluster/engines/"
        "charts/go.mod); for the stack's values it renders what the released 3.12.2 renders, but for an empty "
        "`annotations:` on the APIService",
    ),
}

# Charts the stacks install that no Go module ships at the pinned version, each with what was tried.
NOT_IN_A_MODULE: dict[str, str] = {
    "cluster-autoscaler": "k8s.io/autoscaler/cluster-autoscaler holds it (charts/cluster-autoscaler) but the Go module "
    "proxy refuses that module at every version (tests/cluster/engines/cluster-autoscaler/README.md)",
    "nvidia-device-plugin": "github.com/NVIDIA/k8s-device-plugin@v0.20.0 (deployments/helm/nvidia-device-plugin) is "
    "refused by the Go module proxy (403); v0.19.3 is served but is chart 0.19.3",
    "dcgm-exporter": "github.com/NVIDIA/dcgm-exporter tags its releases 4.5.3-4.8.2, not as Go modules; the "
    "pseudo-version of that commit (v0.0.0-20260506163242-691c92762eb5, deployment/ holds chart 4.8.2) is refused by "
    "the proxy",
    "aws-fsx-csi-driver": "chart 1.11.0 is the commit after sigs.k8s.io/aws-fsx-csi-driver v1.4.0 (43954a012968); the "
    "proxy refuses that module at every version tried, its version list too",
    "aws-efs-csi-driver": "chart 3.1.9 is driver v2.1.8, whose go.mod says "
    "github.com/kubernetes-sigs/aws-efs-csi-driver without /v2: no Go module version can hold it, and the proxy "
    "refuses the module's version list",
    "kube-prometheus-stack": "prometheus-community/helm-charts has no go.mod at tag kube-prometheus-stack-88.5.3; its "
    "CRDs are prometheus-operator v0.93.1's: crds('monitoring.coreos.com')",
    "prometheus-node-exporter": "prometheus-community/helm-charts has no go.mod (tag prometheus-node-exporter-4.56.1)",
    "aws-efa-k8s-device-plugin": "aws/eks-charts has no go.mod",
    "neuron-helm-chart": "aws-neuron/neuron-helm-charts has no go.mod",
}

# CRDs of API groups whose chart is stood in, read from the module that generates them.
CRDS: dict[str, tuple[str, str, str]] = {
    # kube-prometheus-stack 88.5.3 (appVersion v0.93.1) installs charts/crds/crds/crd-*.yaml, which are these files
    # byte for byte below a one-line comment naming them (all ten compared at tag kube-prometheus-stack-88.5.3).
    "monitoring.coreos.com": (
        "charts", "github.com/prometheus-operator/prometheus-operator", "example/prometheus-operator-crd"
    ),
}


def chart_name(release: Registration) -> str:
    """The chart a release installs: a repository chart's name, or the last segment of an OCI reference."""
    return str(_inputs(release).get("chart", "")).rstrip("/").rsplit("/", 1)[-1]


def source(release: Registration) -> str:
    """Where the release's chart is read, e.g. "github.com/aws/karpenter-provider-aws@v1.14.1 charts/karpenter", or
    "not in a Go module: <why>" for a chart the harness stands in."""
    name = chart_name(release)
    chart = CHARTS.get(name)
    if chart is None:
        return f"not in a Go module: {NOT_IN_A_MODULE.get(name, 'no source known for chart ' + repr(name))}"
    return f"{_tagged(chart)} {chart.path}"


def render(
    release: Registration, kubernetes_version: str, api_versions: Sequence[str] = ()
) -> list[dict[str, Any]] | None:
    """The objects `helm template` makes of the release's chart at its pinned version with its values (CRDs
    included, as Helm installs a chart's crds/ on first install), read from the Go module cache; None when no
    module ships that chart at that version (the harness then stands it in).

    `kubernetes_version` is .Capabilities.KubeVersion ("1.35" or "v1.35.4"); `api_versions` are added to
    .Capabilities.APIVersions, as a live cluster's discovery would list them (e.g. "monitoring.coreos.com/v1").
    Objects annotated `helm.sh/hook` (HOOK) are ones Helm applies before or after the rest. Objects whose template
    sets no namespace go to the release's namespace, as Helm applies them."""
    chart = CHARTS.get(chart_name(release))
    if chart is None:
        return None
    inputs = _inputs(release)
    pinned = str(inputs.get("version", ""))
    release_name = str(inputs.get("name") or chart_name(release))
    namespace = str(inputs.get("namespace") or "default")
    with tempfile.TemporaryDirectory(prefix="eks-ddp-chart-") as scratch:
        folder = Path(scratch) / chart_name(release)
        stamped = _assemble(chart, folder, f"{release.name}: chart {chart_name(release)}")
        _check_version(folder, pinned, f"{release.name}: the release pins chart {chart_name(release)} {pinned}", chart)
        (Path(scratch) / "stamp.json").write_text(json.dumps(stamped))
        (Path(scratch) / "values.json").write_text(json.dumps(inputs.get("values") or {}))
        command = [
            str(helm()), "template", release_name, str(folder),
            "--namespace", namespace,
            "--kube-version", kubernetes_version,
            "--include-crds", "--skip-tests",
            "--values", str(Path(scratch) / "stamp.json"),
            "--values", str(Path(scratch) / "values.json"),
            *(f"--api-versions={version}" for version in api_versions),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=_helm_env(Path(scratch)))
    if done.returncode:
        raise ChartSourceError(f"{release.name}: helm template {chart_name(release)}: {done.stderr.strip()}")
    return documents(done.stdout)


def package(name: str, into: Path) -> Path:
    """The chart `name` (of CHARTS) at `into` as its release packages it, for Helm to install from that folder: the
    stamped values written into its values.yaml, as upstream's yq writes them, and its dependencies in charts/."""
    chart = CHARTS[name]
    shutil.rmtree(into, ignore_errors=True)
    into.parent.mkdir(parents=True, exist_ok=True)
    stamped = _assemble(chart, into, f"chart {name}")
    values = into / "values.yaml"
    values.write_text(yaml.safe_dump(_merged(yaml.safe_load(values.read_text()) or {}, stamped), sort_keys=False))
    return into


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on `base`, maps merged key by key, as Helm merges a values file over a chart's values."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        both_maps = isinstance(below, Mapping) and isinstance(value, Mapping)
        merged[key] = _merged(below, value) if both_maps else value  # type: ignore[arg-type]
    return merged


def crds(group: str) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of an API group whose installing chart is stood in (see CRDS), read from the
    module that generates them."""
    if group not in CRDS:
        raise ChartSourceError(f"no module pinned for the CRDs of {group}: one of {', '.join(sorted(CRDS))}")
    folder, module, path = CRDS[group]
    files = sorted((_module_dir(folder, module) / path).glob("*.yaml"))
    found = [d for file in files for d in documents(file.read_text())]
    return [d for d in found if d.get("kind") == "CustomResourceDefinition" and d["spec"]["group"] == group]


@functools.cache
def helm() -> Path:
    """Helm's binary, built from tests/cluster/engines/helm the first time."""
    return build.build_all(["helm"])["helm"]


@functools.cache
def _module_dir(folder: str, module: str) -> Path:
    return build.module_dir(folder, module)


def _inputs(release: Registration) -> dict[str, Any]:
    return release.sent or release.inputs


def _tagged(chart: Source) -> str:
    """module@version, the version as the engine folder's go.mod resolves it."""
    return f"{chart.module}@{_tag(chart)}"


def _tag(chart: Source) -> str:
    return _module_dir(chart.folder, chart.module).name.rpartition("@")[2]


def _helm_env(scratch: Path) -> dict[str, str]:
    """Helm's own folders in the scratch folder: nothing of the user's Helm set-up (repositories, plugins) is read."""
    homes = {f"HELM_{kind}_HOME": str(scratch / "helm" / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    return {**os.environ, **homes}


def _assemble(chart: Source, into: Path, what: str) -> dict[str, Any]:
    """A writable copy of the chart as upstream packages it, at `into`; the stamped values, nested as the parent
    chart passes them to each dependency."""
    module = _module_dir(chart.folder, chart.module)
    # copyfile: the module cache is read-only, the copy must not be.
    shutil.copytree(module / chart.path, into, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(into):
        os.chmod(folder, 0o755)
    stamped: dict[str, Any] = {}
    if chart.stamp is not None:
        tag = _tag(chart)
        fields = {"tag": tag, "version": tag.removeprefix("v")}
        _stamp_chart_yaml(into / "Chart.yaml", {k: v.format(**fields) for k, v in chart.stamp.chart.items()})
        stamped = _format(chart.stamp.values, fields)
    if chart.crds:
        (into / "crds").mkdir(exist_ok=True)
        for crd in sorted((module / chart.crds).glob("*.yaml")):
            shutil.copyfile(crd, into / "crds" / crd.name)
    wanted = {d["name"]: str(d.get("version", "")) for d in _chart_yaml(into).get("dependencies") or []}
    for name, dependency in chart.dependencies.items():
        target = into / "charts" / name
        target.parent.mkdir(exist_ok=True)
        sub = _assemble(dependency, target, f"{what}'s dependency {name}")
        wants = f"{what} wants {name} {wanted.get(name, '(not listed)')}"
        _check_version(target, wanted.get(name, ""), wants, dependency)
        if sub:
            stamped[name] = sub
    return stamped


def _format(values: Any, fields: Mapping[str, str]) -> Any:
    if isinstance(values, Mapping):
        return {key: _format(value, fields) for key, value in values.items()}
    return values.format(**fields) if isinstance(values, str) else values


def _stamp_chart_yaml(path: Path, fields: Mapping[str, str]) -> None:
    """Set top-level Chart.yaml fields in place, as upstream's yq does (the rest of the file as it was)."""
    text = path.read_text()
    for key, value in fields.items():
        line = f"{key}: {json.dumps(value)}"
        text, found = re.subn(rf"^{key}:.*$", line, text, count=1, flags=re.MULTILINE)
        if not found:
            text = text.rstrip("\n") + f"\n{line}\n"
    path.write_text(text)


def _chart_yaml(folder: Path) -> dict[str, Any]:
    return yaml.safe_load((folder / "Chart.yaml").read_text()) or {}


def _check_version(folder: Path, pinned: str, what: str, chart: Source) -> None:
    found = str(_chart_yaml(folder).get("version", ""))
    if found.removeprefix("v") != pinned.removeprefix("v"):
        raise ChartSourceError(
            f"{what}, but {chart.module}@{_tag(chart)} {chart.path} is {found}: pin the module version that holds "
            f"{pinned} in tests/cluster/engines/{chart.folder}/go.mod, or the chart that module holds"
        )
