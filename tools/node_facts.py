"""What a reviewer checks per node group before `pulumi up`: type, capacity, EFA, GPUs and the jobs' image.

Facts are the offline ones (infra.facts.catalogue, every EC2 type); `pulumi up` takes EC2's. The image line
follows the same plan the program builds from (stack.images); a GPU group with EFA says what its NCCL check
holds it to.
"""

from typing import Any

from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.instance_facts import offline
from eks_ddp.infra.node_group import CapacityType, NodeGroup
from eks_ddp.infra.platform import AutoscalerKind, system_shape
from eks_ddp.stack import images
from eks_ddp.stack.config import SYSTEM_GROUP, StackConfig
from eks_ddp.workloads.nccl_check import FLOORS, LARGEST_MESSAGE


def node_groups(config: StackConfig) -> list[dict[str, Any]]:
    """One record per node group, the system group first."""
    platform = config.platform
    system = NodeGroup.of(system_shape(platform))
    karpenter = platform.get("autoscaler") == AutoscalerKind.KARPENTER
    groups = platform.get("node_groups", [])
    trained = {group.get("name", ""): offline(group["instance_type"]) for group in groups}
    instances = images.needing_images(config, trained, offline)
    choices = {name: images.choose(config, name, instance) for name, instance in instances.items()}
    builds = images.builds(choices, instances)

    def image(name: str) -> str | None:
        choice = choices.get(name)
        return choice.describe(builds.get(choice.accelerator, [instances[name].architecture])) if choice else None

    system_sizes = (system.min_size, system.max_size)
    records = [_record(SYSTEM_GROUP, system.instance_type, "ON_DEMAND", None, 0, system_sizes, image(SYSTEM_GROUP))]
    checked = config.checked_group(gpu=True)
    for group in map(NodeGroup.of, groups):
        instance = instances[group.name]
        minimum = 0 if karpenter else group.min_size  # Karpenter keeps no idle nodes
        records.append(
            _record(
                group.name,
                group.instance_type,
                CapacityType(group.capacity_type).value,
                group.capacity_reservation_id,
                group.efa_devices(instance),
                (minimum, group.max_size),
                image(group.name),
                "Karpenter NodePool" if karpenter else "managed node group",
                _nccl_line(group.name, instance, checked) if instance.is_gpu and group.efa else None,
            )
        )
    return records


def _nccl_line(group: str, instance: InstanceType, checked: str | None) -> str:
    if group == checked:
        return nccl_floor(instance)
    where = (
        f"it runs on {checked} (the job's group, or the first that qualifies)"
        if checked
        else "eks-ddp:fabricCheck or ncclCheck is off, or no GPU group with EFA holds two nodes"
    )
    return f"not run on this group: {where}; here it would hold {nccl_floor(instance)}"


def nccl_floor(instance: InstanceType) -> str:
    """What the NCCL check holds the group's bus bandwidth to, or that it has no published figure to compare."""
    floor = FLOORS.get(instance.name)
    if floor is None:
        return f"no published figure for {instance.name}: the check reports the bandwidth and passes"
    return f"at least {floor.gb_per_second:g} GB/s at {LARGEST_MESSAGE} ({floor.source})"


def _record(
    name: str,
    instance_type: str,
    capacity: str,
    reservation: str | None,
    efa: int,
    sizes: tuple[int, int],
    image: str | None,
    launcher: str = "managed node group",
    nccl: str | None = None,
) -> dict[str, Any]:
    instance = offline(instance_type)
    return {
        "name": name,
        "instance_type": instance_type,
        "architecture": instance.architecture.value,
        "vcpus": instance.vcpus,
        "memory_gib": instance.memory_gib,
        "gpus": f"{instance.gpus} x {instance.gpu_model}" if instance.gpus else "none",
        "neuron_devices": instance.neuron_devices,
        "efa_interfaces": efa,
        "capacity_type": capacity,
        "capacity_reservation": reservation,
        "nodes": f"{sizes[0]}-{sizes[1]}",
        "launcher": launcher,
        "image": image,
        "price_known": instance.hourly_usd is not None,
        "nccl_check": nccl,
    }


def lines(records: list[dict[str, Any]]) -> list[str]:
    text = []
    for r in records:
        capacity = r["capacity_type"] + (f" from {r['capacity_reservation']}" if r["capacity_reservation"] else "")
        accelerators = f"{r['neuron_devices']} Neuron devices" if r["neuron_devices"] else f"GPUs {r['gpus']}"
        shape = f"{r['architecture']}, {r['vcpus']} vCPUs, {r['memory_gib']:g} GiB, {accelerators}"
        text.append(
            f"  {r['name']}: {r['instance_type']} ({shape}, {r['efa_interfaces']} EFA interfaces), "
            f"{capacity}, {r['nodes']} nodes ({r['launcher']})"
        )
        if r["image"]:
            text.append(f"    jobs run: {r['image']}")
        if r["nccl_check"]:
            text.append(f"    NCCL check: {r['nccl_check']}")
        if not r["price_known"]:
            text.append(f"    note: no list price is known for {r['instance_type']}: the cost total leaves it out")
    return text
