"""An instance type's facts: from EC2 when the stack runs against AWS, from the catalogue offline.

`describe` asks EC2 (`aws.ec2.get_instance_type`, DescribeInstanceTypes), so any type works in
`pulumi up`; the project's mocks answer that call from `offline`, which knows the catalogue's
types and, for any other, guesses from the name and says what it guessed (`InstanceType.assumed`):
an offline preview of such a type is only as right as the guess.
"""

import re
from typing import Any

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.catalogue import Architecture, InstanceType

NAME = re.compile(r"(?P<family>[a-z]+)(?P<generation>\d+)(?P<attributes>[a-z-]*)\.(?P<size>[a-z0-9-]+)")
GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8, "x": 16, "i": 8, "z": 8, "t": 4}
"""Memory per vCPU of the common families (EC2's published shapes); 2 GiB, the least, for others."""
ASSUMED_METAL_VCPUS = 4
"""A metal size's vCPUs vary by family: assume few, so a pod sized from it still fits the node."""
MINIMUM_EFA_VCPUS = 32
"""EC2 offers EFA on the largest sizes of a family (8xlarge and up on GPUs, 16xlarge and up mostly) and on
hpc types: assume it there only, so a small type with `efa` on is refused offline as EC2 would refuse it."""
GET_INSTANCE_TYPE = "aws:ec2/getInstanceType:getInstanceType"


def name_problem(name: str) -> str | None:
    """Why `name` cannot be an EC2 instance type, or None."""
    if NAME.fullmatch(name or "") is None:
        return "give an EC2 instance type such as c7g.16xlarge, m5.large or p5.48xlarge"
    return None


def check_name(component: str, argument: str, name: str) -> None:
    """Refuse, naming the argument, a `name` that cannot be an EC2 instance type (before EC2 is asked about it)."""
    problem = name_problem(name)
    if problem:
        raise InvalidArgument(component, argument, name, problem)


def describe(name: str, opts: pulumi.InvokeOptions | None = None) -> InstanceType:
    """EC2's facts for `name` (in a Pulumi program; the project's mocks answer from `offline`)."""
    result = aws.ec2.get_instance_type(instance_type=name, opts=opts)
    gpus = list(result.gpuses or [])
    listed = catalogue.lookup(name)
    return InstanceType(
        name=name,
        architecture=Architecture.ARM64 if "arm64" in (result.supported_architectures or []) else Architecture.X86_64,
        vcpus=result.default_vcpus,
        memory_gib=result.memory_size / 1024,
        network_cards=result.maximum_network_cards,
        gpus=sum(gpu.count for gpu in gpus),
        hourly_usd=listed.hourly_usd if listed else None,
        efa=bool(result.efa_supported),
        gpu_model=gpus[0].name if gpus else "",
    )


def ami_type(instance: InstanceType) -> str:
    """The EKS AL2023 AMI for the type: NVIDIA's on NVIDIA GPUs (drivers, and the EFA host software)."""
    if instance.architecture == Architecture.ARM64:
        return "AL2023_ARM_64_NVIDIA" if instance.is_gpu else "AL2023_ARM_64_STANDARD"
    return "AL2023_x86_64_NVIDIA" if instance.is_gpu else "AL2023_x86_64_STANDARD"


def offline(name: str) -> InstanceType:
    """The catalogue's facts, or a guess from the name that says what it assumed."""
    listed = catalogue.lookup(name)
    if listed is not None:
        return listed
    match = NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r}: {name_problem(name)}")
    size, family = match["size"], match["family"]
    vcpus = {"nano": 1, "micro": 1, "small": 1, "medium": 1, "large": 2, "xlarge": 4}.get(size)
    if vcpus is None:
        multiple = re.fullmatch(r"(\d+)xlarge", size)
        vcpus = 4 * int(multiple[1]) if multiple else ASSUMED_METAL_VCPUS
    architecture = Architecture.ARM64 if "g" in match["attributes"] else Architecture.X86_64
    memory = vcpus * GIB_PER_VCPU.get(family[0], 2)
    efa = vcpus >= MINIMUM_EFA_VCPUS or family.startswith("hpc")
    assumed = (
        f"{name} is not in infra.facts.catalogue: assumed {vcpus} vCPUs, {memory} GiB, {architecture.value}, "
        f"1 network card, {'EFA' if efa else 'no EFA'}, no GPU, no price "
        "(EC2's facts replace these in `pulumi up`)"
    )
    return InstanceType(name, architecture, vcpus, memory, 1, 0, None, efa=efa, assumed=assumed)


def ec2_answer(name: str) -> dict[str, Any]:
    """`offline(name)` in the shape EC2's DescribeInstanceTypes takes through the provider (for mocks)."""
    facts = offline(name)
    gpu = {"count": facts.gpus, "manufacturer": "NVIDIA", "name": facts.gpu_model, "memorySize": 0}
    gpus = [gpu] if facts.gpus else []
    return {
        "instanceType": name,
        "defaultVcpus": facts.vcpus,
        "memorySize": int(facts.memory_gib * 1024),
        "maximumNetworkCards": facts.network_cards,
        "efaSupported": facts.efa,
        "gpuses": gpus,
        "supportedArchitectures": [facts.architecture.value],
    }
