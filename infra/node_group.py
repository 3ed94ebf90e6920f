"""One training node group's settings: NodeGroupShape, the schema every language passes, and NodeGroup, that shape
resolved once, with every default of a group on its fields and every check of its own settings beside them.

What a launcher refuses beyond these is its own (infra.addons.karpenter_nodes.validate); what the platform refuses
of the groups together (unique names, zones of its network) is the platform's (infra.platform_validation).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NotRequired, TypedDict, cast

from eks_ddp.infra.aws.cluster import GROUP_LABEL
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import catalogue, instance_facts, versions
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.efa_cards import efa_cards
from eks_ddp.infra.facts.instance_facts import ami_type

# The checks were the managed node group's first, and their messages keep its name (as does its type token).
COMPONENT = "EfaNodeGroup"
SIZES = ("min_size", "max_size")
"""The bounds a group's sizes are checked against, as its refusals name them."""
EFA_LABEL = "vpc.amazonaws.com/efa.present"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# On GPU groups: the label the NVIDIA device plugin's chart selects on (one of its default affinity terms).
GPU_LABEL = "nvidia.com/gpu.present"
# Neuron families that train (Trainium) or run the Neuron SDK's current releases (Inferentia2); Inferentia1 (inf1)
# takes only the legacy Neuron SDK for inference (aws-neuron-sdk release notes: inf1 stays on Neuron 2.x's
# torch-neuron).
NEURON_FAMILIES = ("trn1", "trn1n", "trn2", "inf2")


class CapacityType(str, Enum):
    """How a group's instances are bought."""

    ON_DEMAND = "ON_DEMAND"
    """On-Demand instances (or an On-Demand Capacity Reservation's)."""
    SPOT = "SPOT"
    """Spot instances: cheaper, interrupted with two minutes' notice."""
    CAPACITY_BLOCK = "CAPACITY_BLOCK"
    """An EC2 Capacity Block for ML (needs `capacity_reservation_id`)."""


class TaintEffect(str, Enum):
    """A taint's effect, in the EKS API's spelling; the Kubernetes spelling (`NoSchedule`) is accepted too."""

    NO_SCHEDULE = "NO_SCHEDULE"
    """Pods that do not tolerate it are not scheduled on the node."""
    NO_EXECUTE = "NO_EXECUTE"
    """Pods that do not tolerate it are not scheduled, and running ones are evicted."""
    PREFER_NO_SCHEDULE = "PREFER_NO_SCHEDULE"
    """The scheduler avoids the node for pods that do not tolerate it."""

    @classmethod
    def _missing_(cls, value: object) -> "TaintEffect | None":
        return next((effect for effect, spelling in KUBERNETES_EFFECT.items() if spelling == value), None)


KUBERNETES_EFFECT = {
    TaintEffect.NO_SCHEDULE: "NoSchedule",
    TaintEffect.NO_EXECUTE: "NoExecute",
    TaintEffect.PREFER_NO_SCHEDULE: "PreferNoSchedule",
}


class Taint(TypedDict):
    """A node taint: which pods the group's nodes accept."""

    key: str
    """Taint key, for example `nvidia.com/gpu` or `training`."""
    value: NotRequired[str]
    """Taint value (default empty)."""
    effect: TaintEffect
    """What the taint does to pods that do not tolerate it."""


class NodeGroupShape(TypedDict):
    """What a training node group looks like, independent of the cluster it joins."""

    name: NotRequired[str]
    """Short name, unique in the platform (a DNS label; required in its `node_groups`): names the group and the
    job's target."""
    instance_type: str
    """Any EC2 instance type (EFA-capable when `efa` is on); its facts come from EC2."""
    availability_zone: str
    """The one zone the group lives in (EFA traffic stays inside a placement group)."""
    efa: NotRequired[bool]
    """Attach EFA interfaces, a placement group and the EFA security group (default true)."""
    min_size: NotRequired[int]
    """Fewest nodes (default 0: scale from zero)."""
    max_size: NotRequired[int]
    """Most nodes (default 2)."""
    desired_size: NotRequired[int]
    """Nodes at creation; the autoscaler owns it afterwards (default `min_size`)."""
    capacity_type: NotRequired[CapacityType]
    """On-demand (default), spot, or an EC2 Capacity Block."""
    capacity_reservation_id: NotRequired[str]
    """Launch into this On-Demand Capacity Reservation or Capacity Block (then no placement group is forced)."""
    labels: NotRequired[Mapping[str, str]]
    """Node labels in addition to `vpc.amazonaws.com/efa.present` (and `nvidia.com/gpu.present` on GPU types)."""
    taints: NotRequired[Sequence[Taint]]
    """Node taints (also announced to the autoscaler for scale-from-zero)."""
    root_volume_gib: NotRequired[int]
    """Size of the encrypted gp3 root volume (default 100)."""
    metadata_hop_limit: NotRequired[int]
    """IMDSv2 hop limit (default 1: pods use IRSA, not the node's credentials)."""
    release_version: NotRequired[str]
    """Pin the EKS AMI release (for example `1.33.4-20260505`); default: the latest at creation."""
    launcher: NotRequired[NodeLauncher]
    """What launches the nodes, which decides their allocatable (set by the group itself in `TrainingNodes.shape`;
    unset in a shape of your own, job pods are sized to fit either engine's nodes)."""


def shape_of(args: NodeGroupShape) -> NodeGroupShape:
    """Only the shape's keys of a wider args dict (a node group's, a platform's spec with its name)."""
    # Honest: what is kept is the shape's own keys with their values, and the given dict was a shape's or wider.
    return cast(NodeGroupShape, {key: value for key, value in args.items() if key in NodeGroupShape.__annotations__})


@dataclass(frozen=True, kw_only=True)
class NodeGroup:
    """A NodeGroupShape resolved (`of`): each setting as given, or its default here (the shape says what each is).

    The values are the shape's, unconverted: `validate` is what holds them to their types' values.
    """

    instance_type: str = ""
    """Required in a shape: left out, it is the empty name `validate` refuses."""
    name: str = ""
    availability_zone: str | None = None
    """None: not given (an existing cluster's group lives where it is)."""
    efa: bool = True
    min_size: int = 0
    max_size: int = 2
    desired_size: int
    """No default of its own: `of` gives it `min_size`'s."""
    capacity_type: CapacityType = CapacityType.ON_DEMAND
    capacity_reservation_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    root_volume_gib: int = 100
    metadata_hop_limit: int = 1
    release_version: str | None = None
    launcher: NodeLauncher | None = None

    @classmethod
    def of(cls, shape: NodeGroupShape) -> "NodeGroup":
        """The shape's settings; keys a shape does not have (a wider args dict's) are left out."""
        given: dict[str, Any] = {key: value for key, value in shape.items() if key in NodeGroupShape.__annotations__}
        given.setdefault("desired_size", given.get("min_size", cls.min_size))
        return cls(**given)

    def efa_devices(self, instance: InstanceType) -> int:
        """EFA devices per node, what a pod requests: one on each network card with EFA, none without."""
        return len(efa_cards(instance.network_cards)) if self.efa else 0

    def node_labels(self, instance: InstanceType) -> dict[str, str]:
        """The group's node labels: its name (what its jobs' pods select, so they never land on the system nodes or
        another group of the same architecture), EFA's and the GPUs' presence (what the device plugins select on),
        then the user's."""
        presence = {**({EFA_LABEL: "true"} if self.efa else {}), **({GPU_LABEL: "true"} if instance.is_gpu else {})}
        return {**self.labels, **({GROUP_LABEL: self.name} if self.name else {}), **presence}

    def placement(self, instance: InstanceType) -> tuple[int, dict[str, str], list[Taint]]:
        """EFA devices per node (what a pod requests), node labels (its selector) and taints (its tolerations)."""
        return self.efa_devices(instance), self.node_labels(instance), [*self.taints]

    def validate(self, instance: InstanceType, zoned: bool = True) -> None:
        """The group's own settings against its type's facts, independent of any cluster (stack config checks these
        early, with the catalogue's facts). `zoned`: the group is made here, in one zone it must name (an existing
        cluster's groups live where they are)."""
        instance_facts.check_name(COMPONENT, "instance_type", self.instance_type)
        self._validate_instance(instance)
        if (zoned or self.availability_zone is not None) and not re.fullmatch(
            r"[a-z]{2}(-[a-z]+)+-\d[a-z]", self.availability_zone or ""
        ):
            raise InvalidArgument(
                COMPONENT, "availability_zone", self.availability_zone, "name one zone, such as us-east-1a"
            )
        self._validate_sizes()
        self._validate_capacity()
        self._validate_nodes()
        self._validate_release_version(instance)
        if EFA_LABEL in self.labels:
            raise InvalidArgument(
                COMPONENT, "labels", dict(self.labels), f"{EFA_LABEL} is set by the component from `efa`"
            )

    def _validate_instance(self, instance: InstanceType) -> None:
        accelerator = unsupported_accelerator(instance)
        if accelerator:
            raise InvalidArgument(COMPONENT, "instance_type", instance.name, accelerator)
        if self.efa and not instance.efa:
            raise InvalidArgument(
                COMPONENT,
                "efa",
                self.efa,
                f"{instance.name} does not support EFA; turn efa off or use an "
                f"EFA type such as {', '.join(sorted(catalogue.EFA_INSTANCE_TYPES)[:4])}",
            )

    def _validate_sizes(self) -> None:
        minimum, maximum, desired = self.min_size, self.max_size, self.desired_size
        if maximum < 1:
            raise InvalidArgument(COMPONENT, "max_size", maximum, "use 1 or more")
        if not 0 <= minimum <= maximum:
            raise InvalidArgument(COMPONENT, "min_size", minimum, f"need 0 <= {{}} <= {{}} ({maximum})", SIZES)
        if not minimum <= desired <= maximum:
            raise InvalidArgument(
                COMPONENT, "desired_size", desired, f"must lie between {{}}={minimum} and {{}}={maximum}", SIZES
            )

    def _validate_capacity(self) -> None:
        capacity, reservation = self.capacity_type, self.capacity_reservation_id
        if capacity not in tuple(CapacityType):
            raise InvalidArgument(
                COMPONENT, "capacity_type", capacity, f"use one of {[item.value for item in CapacityType]}"
            )
        if reservation is not None and capacity == CapacityType.SPOT:
            raise InvalidArgument(
                COMPONENT,
                "capacity_reservation_id",
                reservation,
                "capacity reservations are for ON_DEMAND or CAPACITY_BLOCK groups, not SPOT",
            )
        if capacity == CapacityType.CAPACITY_BLOCK and reservation is None:
            raise InvalidArgument(
                COMPONENT,
                "capacity_reservation_id",
                None,
                "a CAPACITY_BLOCK group needs the Capacity Block's reservation id",
            )
        if reservation is not None and not re.fullmatch(r"cr-[0-9a-f]{8,17}", reservation):
            raise InvalidArgument(
                COMPONENT, "capacity_reservation_id", reservation, "use an id such as cr-0123456789abcdef0"
            )

    def _validate_nodes(self) -> None:
        """The nodes' own settings: instance metadata, root volume and taints."""
        if not 1 <= self.metadata_hop_limit <= 64:
            raise InvalidArgument(
                COMPONENT,
                "metadata_hop_limit",
                self.metadata_hop_limit,
                "use 1 to 64 (1 keeps pods away from the node's credentials)",
            )
        if not 20 <= self.root_volume_gib <= 16384:
            raise InvalidArgument(COMPONENT, "root_volume_gib", self.root_volume_gib, "use 20 to 16384 GiB")
        for taint in self.taints:
            if not taint.get("key") or not _is_effect(taint.get("effect")):
                spellings = ", ".join(f"{effect.value} ({KUBERNETES_EFFECT[effect]})" for effect in TaintEffect)
                raise InvalidArgument(
                    COMPONENT, "taints", dict(taint), f"each taint needs a key and an effect: one of {spellings}"
                )

    def _validate_release_version(self, instance: InstanceType) -> None:
        """An AMI pin must name a release; on STANDARD AMIs with EFA, one that has the EFA kernel module."""
        release = self.release_version
        if release is None:
            return
        match = re.fullmatch(r"\d+\.\d+\.\d+-(\d{8})", release)
        if match is None:
            raise InvalidArgument(
                COMPONENT, "release_version", release, "use an EKS AMI release such as 1.35.2-20260601"
            )
        floor = versions.EFA_STANDARD_AMI_FLOOR
        if self.efa and ami_type(instance).endswith("_STANDARD") and match.group(1) < floor:
            raise InvalidArgument(
                COMPONENT,
                "release_version",
                release,
                f"EFA on {ami_type(instance)} needs the AMI release of {floor} or later (the first with EFA)",
            )


def unsupported_accelerator(instance: InstanceType) -> str | None:
    """Why a type's accelerators cannot train here (None for CPUs, NVIDIA GPUs and current Neuron devices): the AMI,
    the device plugin and the pods' requests exist for those only, and a type taken for a CPU one would train on its
    CPUs alone."""
    family = instance.name.split(".")[0]
    if instance.neuron_devices and family not in NEURON_FAMILIES:
        return (
            f"{instance.name} is an Inferentia1 type, which the current Neuron SDK does not train on; use "
            f"{', '.join(NEURON_FAMILIES)} (Neuron), an NVIDIA GPU or a CPU type"
        )
    if instance.gpus and instance.gpu_maker != "nvidia":
        return (
            f"{instance.name} has {instance.gpu_maker or 'unknown'} GPUs ({instance.gpu_model}); eks-ddp supports "
            "NVIDIA GPUs, AWS Trainium and Inferentia2 (and CPUs) for now"
        )
    return None


def _is_effect(value: object) -> bool:
    try:
        TaintEffect(value)
    except ValueError:
        return False
    return True
