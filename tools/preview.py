"""`python -m eks_ddp.tools.preview --stack dev`: what `pulumi up` would create, before you have credentials.

Runs a Pulumi program (`--program`: eks-ddp's own stack, or yours) under the Pulumi SDK's mocks with its stack
file's config (no Pulumi CLI, no AWS account) and shows the resource tree, counts per type, an hourly cost
estimate, and every Kubernetes object it would apply (as YAML).
Mocks answer every resource; what AWS or the cluster would refuse is not tested.
"""

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.catalogue import PRICES_AS_OF
from eks_ddp.infra.facts.versions import DEFAULT_KUBERNETES_VERSION
from eks_ddp.stack import placeholders, project_config
from eks_ddp.tools import cost, node_facts, stack_file
from eks_ddp.stack.config import ConfigError, StackConfig, parse
from eks_ddp.engine_models import Deployment
from eks_ddp.engine_models.base import containers, pod_specs, quantity
from eks_ddp.tools.mocking import ACCOUNT, DEPLOYER_ROLE_ARN, Registration
from eks_ddp.tools.pulumi_program import Program
from eks_ddp.stack.project_config import PROJECT, StackFileError
from eks_ddp.tools.reference_data import read_network_cards
from eks_ddp.trainer.errors import OneLineParser
from eks_ddp.trainer.startup import freeze_imports
from eks_ddp.workloads import security
from eks_ddp.workloads.pod_templates import pod_templates

MANIFEST_KEYS = (
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "provisioner",
    "parameters",
    "mountOptions",
    "reclaimPolicy",
    "volumeBindingMode",
    "rules",
    "roleRef",
    "subjects",
)


def _integral(value: Any) -> Any:
    """The wire format carries every number as a double: 3.0 back to 3, as Kubernetes expects."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def kubernetes_objects(registrations: list[Registration]) -> list[dict[str, Any]]:
    """The objects the stack creates; a `*Patch` resource changes one of them and is no object of its own."""
    return [
        {key: _integral(r.inputs[key]) for key in MANIFEST_KEYS if key in r.inputs}
        for r in registrations
        if r.type.startswith("kubernetes:")
        and "kind" in r.inputs
        and "apiVersion" in r.inputs
        and not r.type.endswith("Patch")
    ]


def tree_lines(registrations: list[Registration]) -> list[str]:
    children: dict[str, list[Registration]] = {}
    urns = {r.urn for r in registrations}
    for registration in registrations:
        children.setdefault(registration.parent if registration.parent in urns else "", []).append(registration)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for child in sorted(children.get(parent, []), key=lambda r: (r.type, r.name)):
            lines.append(f"{'  ' * depth}{child.type}  {child.name}")
            walk(child.urn, depth + 1)

    walk("", 0)
    return lines


MOCKED_HEADER = (
    f"# Rendered offline under the Pulumi SDK's mocks: account {ACCOUNT}, every AWS id and ARN, and the digest of\n"
    "# each image the stack builds (@sha256:000...) in it are invented; `pulumi up` fills in the real ones.\n"
)


def image_lines(objects: list[dict[str, Any]]) -> list[str]:
    """Each image the stack's own pods run, and whether it is pinned by digest (what runs is then exactly what was
    reviewed) or named by tag (the registry may move the tag)."""
    images = {
        container["image"]
        for manifest in objects
        for spec in pod_specs(manifest)
        for container in containers(spec)
        if isinstance(container.get("image"), str)
    }
    return [f"  {'by digest' if security.by_digest(image) else 'by tag   '}  {image}" for image in sorted(images)]


def queue_lines(objects: list[dict[str, Any]]) -> list[str]:
    """Kueue's queues as the stack makes them: each queue's quota per flavor (a node group), where placement follows
    the network topology or waits for a ProvisioningRequest, and what each queued job asks for."""
    queued = [o for o in objects if o.get("apiVersion") == kueue.API]
    flavors = {o["metadata"]["name"]: o["spec"] for o in queued if o["kind"] == "ResourceFlavor"}
    lines = []
    for owner in (o for o in queued if o["kind"] in ("Cohort", "ClusterQueue")):
        spec = owner["spec"]
        provisioned = {f for c in spec.get("admissionChecksStrategy", {}).get("admissionChecks", []) for f in c["onFlavors"]}
        cohort = f", in cohort {spec['cohortName']}" if spec.get("cohortName") else ""
        title = "cohort" if owner["kind"] == "Cohort" else "queue"
        lines.append(f"  {title} {owner['metadata']['name']}{cohort}:")
        for flavor in (f for group in spec["resourceGroups"] for f in group["flavors"]):
            quota = ", ".join(f"{r['name']} {r['nominalQuota']}" for r in flavor["resources"]
                              if quantity(r["nominalQuota"]))
            notes = [*(["by network topology"] if flavors[flavor["name"]].get("topologyName") else []),
                     *(["admitted after a ProvisioningRequest"] if flavor["name"] in provisioned else [])]
            lines.append(f"    {flavor['name']}: {quota or 'nothing of its own'}{'; ' if notes else ''}"
                         f"{', '.join(notes)}")
    runtimes = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "ClusterTrainingRuntime"}
    for job in objects:
        queue = (job.get("metadata", {}).get("labels") or {}).get(kueue.QUEUE_LABEL)
        if queue is None:
            continue
        placed = runtimes.get(job["spec"].get("runtimeRef", {}).get("name", ""), job)
        asks = {key: value for template in pod_templates(placed)
                for key, value in (template.get("metadata", {}).get("annotations") or {}).items()
                if key in kueue.TOPOLOGY_ANNOTATIONS.values()}
        where = "; ".join(f"pods under one {value} ({key.rsplit('-', 2)[-2]})" for key, value in sorted(asks.items()))
        lines.append(f"  {job['kind']} {job['metadata']['name']} -> queue {queue}{'; ' if where else ''}{where}")
    return lines


def write_manifests(objects: list[dict[str, Any]], directory: Path) -> list[Path]:
    """One YAML file per object; files an earlier preview wrote there go first, so none outlives its object."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    written = []
    for manifest in objects:
        metadata = manifest.get("metadata", {})
        path = (
            directory
            / f"{manifest['kind'].lower()}-{metadata.get('namespace', 'cluster')}-{metadata.get('name', 'unnamed')}.yaml"
        )
        path.write_text(MOCKED_HEADER + yaml.safe_dump(manifest, sort_keys=False))
        written.append(path)
    return written


def _eks_ddp_config(program: Program, stack: str, override: dict[str, str]) -> StackConfig | None:
    """eks-ddp's own stack config, parsed (its errors name the key) for the node facts; None for other programs."""
    if program.project != PROJECT or "nodeGroups" not in project_config.declarations(program.directory):
        return None
    values, region = stack_file.load(stack, program.directory, override)
    return parse(values, region)


def where_it_runs(region: str, config: StackConfig | None) -> str:
    """What the ids assume: the region and zones, the Kubernetes version, and the account, which the mocks invent."""
    parts = [f"Region {region}"]
    existing = config.platform.get("existing_cluster") if config is not None else None
    if existing is not None:  # its zones and version are its own, and unknown offline
        target = existing.get("eks_cluster_name") or "the kubeconfig's cluster"
        parts.append(f"onto {target}, made elsewhere")
    elif config is not None:
        network = config.platform.get("network", {})
        zones = network.get("availability_zones") or list(network.get("existing_private_subnet_ids", {}))
        version = config.platform.get("kubernetes_version", DEFAULT_KUBERNETES_VERSION)
        parts += [f"zones {', '.join(zones)}", f"Kubernetes {version}"]
    parts.append(f"account {ACCOUNT} (a mock value: every id, ARN and built image's digest below is invented)")
    return "; ".join(parts)


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m eks_ddp.tools.preview", description=__doc__.split("\n", 1)[0] if __doc__ else None
    )
    parser.add_argument("--stack", default="dev", help="reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument(
        "--program",
        type=Path,
        default=Path("."),
        help="a Pulumi program: its directory (with Pulumi.yaml) or its Python file (default: this directory)",
    )
    parser.add_argument(
        "--manifests", type=Path, help="directory for the Kubernetes YAML (default runs/preview/<stack>)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a stack key for this run, as `pulumi up --config` does (repeatable)",
    )
    return parser


@dataclass(frozen=True)
class Preview:
    """What one preview found, for the text or the JSON."""

    project: str
    stack: str
    registrations: list[Registration]
    config: StackConfig | None
    objects: list[dict[str, Any]]
    directory: Path
    written: list[Path]
    region: str
    cost_lines: list[cost.Line]
    counts: Counter[str]
    groups: list[dict[str, Any]]
    marked: list[tuple[str, str, str]]
    """Placeholders left in the stack's config: key, value, and what to put there."""
    seconds: float

    @property
    def hourly_total(self) -> float:
        return sum(line.hourly for line in self.cost_lines)


def as_json(preview: Preview) -> dict[str, Any]:
    """What `--json` prints."""
    return {
        "program": preview.project,
        "stack": preview.stack,
        "resources": [{"type": r.type, "name": r.name, "parent": r.parent} for r in preview.registrations],
        "node_groups": preview.groups,
        "placeholders": [{"key": key, "value": value, "put": what} for key, value, what in preview.marked],
        "counts": dict(sorted(preview.counts.items())),
        "cost": {
            "prices_as_of": PRICES_AS_OF,
            "currency": "USD",
            "hourly_total": round(preview.hourly_total, 4),
            "lines": [
                {
                    "item": line.item,
                    "quantity": line.quantity,
                    "unit_hourly": line.unit_hourly,
                    "hourly": round(line.hourly, 4),
                    "priced": line.priced,
                }
                for line in preview.cost_lines
            ],
        },
        "manifests": [str(path) for path in preview.written],
        "seconds": round(preview.seconds, 2),
    }


def print_text(preview: Preview) -> None:
    """What a reader sees without `--json`."""
    print(
        f"Program {preview.project}, stack {preview.stack}: {len(preview.registrations)} resources "
        "(under mocks; nothing was sent to AWS)"
    )
    print(where_it_runs(preview.region, preview.config))
    for key, value, what in preview.marked:
        print(f"  placeholder {key}: {value}; put {what} there (`pulumi up` refuses it)")
    print()
    print("\n".join(tree_lines(preview.registrations)))
    if preview.groups:
        print("\nNode groups (offline facts: infra.facts.catalogue; `pulumi up` takes EC2's):")
        print("\n".join(node_facts.lines(preview.groups)))
    queues = queue_lines(preview.objects)
    if queues:
        print("\nQueues (Kueue; a job waits until all its pods fit its queue's quota):")
        print("\n".join(queues))
    print("\nImages of the stack's own pods (the charts' images are the charts' own):")
    print("\n".join(image_lines(preview.objects)))
    print("\nResources per type:")
    for type_, count in sorted(preview.counts.items()):
        print(f"  {count:4d}  {type_}")
    print(
        f"\nEstimated cost while its job runs (USD per hour, us-east-1 on-demand list prices of {PRICES_AS_OF}, data "
        "transfer excluded):"
    )
    for line in preview.cost_lines:
        price = f"{line.unit_hourly:.4f}" if line.priced else "unknown price"
        print(f"  {line.hourly:9.3f}  {line.item}: {line.quantity:g} x {price}")
    unpriced = [line.item for line in preview.cost_lines if not line.priced]
    leaves_out = f"; without {', '.join(unpriced)}, whose price is unknown" if unpriced else ""
    total = preview.hourly_total
    print(f"  {total:9.3f}  total (about {total * 24:.0f} per day{leaves_out})")
    print(f"\n{len(preview.written)} Kubernetes objects written to {preview.directory}/ ({preview.seconds:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        program = Program.at(args.program)
        override = stack_file.overrides(args.config)
        config = _eks_ddp_config(program, args.stack, override)
        registrations = program.run(args.stack, override)
    except (FileNotFoundError, ConfigError, InvalidArgument, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    objects = kubernetes_objects(registrations)
    directory = args.manifests or Path("runs") / "preview" / args.stack
    written = write_manifests(objects, directory)
    region = program.region(args.stack, override)
    deployment = Deployment(registrations, region, DEPLOYER_ROLE_ARN, date.today(), read_network_cards())
    preview = Preview(
        project=program.project,
        stack=args.stack,
        registrations=registrations,
        config=config,
        objects=objects,
        directory=directory,
        written=written,
        region=region,
        cost_lines=cost.estimate(deployment),
        counts=Counter(r.type for r in registrations),
        groups=node_facts.node_groups(config) if config is not None else [],
        marked=placeholders.found(program.config(args.stack, override)),
        seconds=time.perf_counter() - started,  # last (arguments run in order): it counts every step above
    )
    if args.json:
        print(json.dumps(as_json(preview), indent=2))
    else:
        print_text(preview)
    return 0


if __name__ == "__main__":
    freeze_imports()  # the Pulumi SDKs' objects, never examined again by the collector
    raise SystemExit(main())
