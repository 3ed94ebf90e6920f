"""What EKS and EC2 refuse or charge for: launch templates, EFA interfaces, AMIs, versions, access, images."""

import re
from collections.abc import Iterator
from typing import Any

from eks_ddp.infra.facts import versions
from eks_ddp.infra.facts.efa_cards import efa_cards
from eks_ddp.engine_models.base import (
    Deployment,
    Finding,
    efa_interface_count,
    group_instance_type,
    launch_template,
    located,
    pod_specs,
)


def managed_node_group_launch_templates(deployment: Deployment) -> Iterator[Finding]:
    """What EKS refuses in a managed node group's launch template.

    Sources: EKS user guide "Customize managed nodes with launch templates" (prohibited
    settings: IamInstanceProfile, SubnetId, RequestSpotInstances, hibernation, shutdown
    behaviour terminate; the instance type in the template or on the group, not both) and
    "Create a managed node group with Capacity Blocks" (market type capacity-block, the
    reservation and the instance type in the template, none on the group).
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = launch_template(deployment, node_group)
        if template is None:
            continue
        where, inputs = located(template), template.inputs
        for key in ("iamInstanceProfile", "hibernationOptions"):
            if inputs.get(key):
                yield Finding("launch-template", where, key, "managed node groups refuse it in the launch template")
        if inputs.get("instanceInitiatedShutdownBehavior") == "terminate":
            yield Finding(
                "launch-template", where, "instanceInitiatedShutdownBehavior", "managed node groups refuse terminate"
            )
        for index, interface in enumerate(inputs.get("networkInterfaces") or []):
            if interface.get("subnetId"):
                yield Finding(
                    "launch-template", where, f"networkInterfaces[{index}].subnetId", "the node group places nodes"
                )
        market = (inputs.get("instanceMarketOptions") or {}).get("marketType")
        if market == "spot":
            yield Finding("launch-template", where, "instanceMarketOptions", "use capacityType SPOT on the node group")
        if inputs.get("instanceType") and node_group.inputs.get("instanceTypes"):
            yield Finding(
                "launch-template", located(node_group), "instanceTypes", "the launch template already names the type"
            )
        if node_group.inputs.get("capacityType") == "CAPACITY_BLOCK":
            if market != "capacity-block":
                yield Finding(
                    "launch-template",
                    where,
                    "instanceMarketOptions.marketType",
                    "a Capacity Block needs capacity-block",
                )
            if not inputs.get("instanceType"):
                yield Finding(
                    "launch-template", where, "instanceType", "a Capacity Block group takes its type from the template"
                )
            if node_group.inputs.get("instanceTypes"):
                yield Finding(
                    "launch-template", located(node_group), "instanceTypes", "a Capacity Block group names no type"
                )


def efa_interfaces_per_network_card(deployment: Deployment) -> Iterator[Finding]:
    """An EFA node takes one EFA interface per network card, or the missing cards carry no traffic.

    Source: EC2 user guide "Maximize network bandwidth on accelerated instances" (EFA on every
    card: infra.facts.efa_cards); the cards per type from EC2's data (`Deployment.network_cards`),
    not from the catalogue the stack was built from.
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = launch_template(deployment, node_group)
        count, instance_type = efa_interface_count(template), group_instance_type(node_group, template) or ""
        cards = deployment.cards(instance_type)
        if count and cards is not None and count != len(efa_cards(cards)):
            yield Finding(
                "efa-interfaces",
                located(node_group),
                "launchTemplate.networkInterfaces",
                f"{count} EFA interfaces on {instance_type}, which has {cards} network cards",
            )


def kubernetes_version_in_standard_support(deployment: Deployment) -> Iterator[Finding]:
    """A minor version past EKS standard support costs $0.60 instead of $0.10 per cluster hour.

    Source: EKS user guide "Understand the Kubernetes version lifecycle on EKS" (14 months of
    standard support per minor); the end dates are in infra.facts.versions.STANDARD_SUPPORT_ENDS.
    """
    for cluster in deployment.of_type("eks:index:Cluster"):
        version = str(cluster.inputs.get("version", ""))
        ends = versions.STANDARD_SUPPORT_ENDS.get(version)
        if ends is None or deployment.today > ends:
            known = ", ".join(f"{minor} until {end}" for minor, end in versions.STANDARD_SUPPORT_ENDS.items())
            yield Finding(
                "kubernetes-version",
                located(cluster),
                "version",
                f"{version} is not in EKS standard support on {deployment.today} ({known})",
            )


# Charts whose default image comes from one region's ECR: (values path, default). aws/eks-charts
# stable/aws-efa-k8s-device-plugin v0.5.30 values.yaml (`image.repository`, us-west-2, whatever the cluster's region).
CHART_IMAGES = {
    "aws-efa-k8s-device-plugin": (
        "image.repository",
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin",
    ),
}


def _value_at(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values.get(key) if isinstance(values, dict) else None
    return values


def images_in_stack_region(deployment: Deployment) -> Iterator[Finding]:
    """An ECR image from another region is a cross-region pull at every scale-up, and fails where ECR is partitioned:
    the pods' images, and the images of charts whose defaults name one region's registry (CHART_IMAGES).

    Source: Amazon ECR user guide (registries are regional: `<account>.dkr.ecr.<region>.amazonaws.com`);
    AWS Deep Learning Containers publish each image in every supported region (available_images.md); EKS add-on
    images are in every region's add-on registry (infra.aws.registries).
    """
    pattern = re.compile(r"^\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.")
    for release in deployment.of_type("kubernetes:helm.sh/v3:Release"):
        chart = str(release.inputs.get("chart", "")).rsplit("/", 1)[-1]
        if chart not in CHART_IMAGES:
            continue
        path, default = CHART_IMAGES[chart]
        image = _value_at(release.inputs.get("values") or {}, path) or default
        match = pattern.match(str(image))
        if match and match.group(1) != deployment.region:
            yield Finding(
                "image-region",
                located(release),
                f"values.{path}",
                f"{image} is pulled from {match.group(1)}, the stack is in {deployment.region}",
            )
    for registration in deployment.kubernetes_objects():
        for pod in pod_specs(registration.inputs):
            for container in [*pod.get("containers", []), *pod.get("initContainers", [])]:
                match = pattern.match(str(container.get("image", "")))
                if match and match.group(1) != deployment.region:
                    yield Finding(
                        "image-region",
                        located(registration),
                        f"containers[{container.get('name')}].image",
                        f"pulled from {match.group(1)}, the stack is in {deployment.region}",
                    )


def no_access_entry_for_the_deployer(deployment: Deployment) -> Iterator[Finding]:
    """pulumi-eks makes the cluster's creator an admin; a second access entry for it fails.

    Source: pulumi/pulumi-eks v4 nodejs/eks/cluster.ts (`bootstrapClusterCreatorAdminPermissions:
    true`); EKS CreateAccessEntry returns ResourceInUseException for an existing principal.
    """
    for entry in deployment.of_type("aws:eks/accessEntry:AccessEntry"):
        if entry.inputs.get("principalArn") == deployment.deployer_arn:
            problem = f"{deployment.deployer_arn} deploys the stack"
            yield Finding("access-entry", located(entry), "principalArn", problem)


def efa_ami_releases(deployment: Deployment) -> Iterator[Finding]:
    """The AL2023 STANDARD AMIs have the EFA kernel module only from release 20260505 on.

    Source: awslabs/amazon-eks-ami releases (AL2023 v20260505 adds the EFA driver to the
    standard x86 and ARM AMIs; the NVIDIA and Neuron AMIs always had it).
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        release = node_group.inputs.get("releaseVersion")
        standard = str(node_group.inputs.get("amiType", "")).endswith("_STANDARD")
        if release and standard and efa_interface_count(launch_template(deployment, node_group)):
            built = str(release).rsplit("-", 1)[-1]
            if built < versions.EFA_STANDARD_AMI_FLOOR:
                yield Finding(
                    "efa-ami",
                    located(node_group),
                    "releaseVersion",
                    f"{release} predates {versions.EFA_STANDARD_AMI_FLOOR}, the first STANDARD AMI with EFA",
                )
