"""An instance type's facts: from EC2 when the stack runs against AWS, from the catalogue offline.

`describe` asks EC2 (`aws.ec2.get_instance_type`, DescribeInstanceTypes), so any type works in `pulumi up`, one
newer than the catalogue included; the project's mocks answer that call from `offline`, which knows every type of
the catalogue and refuses any other name with the closest real ones. A program whose target cluster is reached
without AWS (an existing cluster given by kubeconfig) asks EC2 nothing: `from_catalogue` turns `describe` to the
catalogue for the rest of the program.
"""

import contextvars
import difflib
import re
from typing import Any

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.catalogue import Architecture, InstanceType

# EC2's naming: family, generation, attributes (hyphens and digits too: p6-b200, u7i-12tb), then the size.
NAME = re.compile(r"(?P<family>[a-z]+)(?P<generation>\d+)(?P<attributes>[a-z0-9-]*)\.(?P<size>[a-z0-9-]+)")
GET_INSTANCE_TYPE = "aws:ec2/getInstanceType:getInstanceType"
_ASK_EC2 = contextvars.ContextVar("instance facts from EC2", default=True)


def from_catalogue() -> None:
    """From here on in this program, `describe` answers from the catalogue: AWS is not to be asked."""
    _ASK_EC2.set(False)


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
    """EC2's facts for `name` (in a Pulumi program; the project's mocks answer from `offline`). A name EC2 does not
    know is refused in one line with the closest names the catalogue has, as offline."""
    if not _ASK_EC2.get():
        return offline(name)
    try:
        result = aws.ec2.get_instance_type(instance_type=name, opts=opts)
    except Exception as error:  # the provider's invoke error: EC2's InvalidInstanceType, or no credentials
        answer = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidArgument(
            "EC2", "instance_type", name, f"EC2 did not describe it ({answer}); {_hint(name)}"
        ) from None
    gpus = list(result.gpuses or [])
    neuron = getattr(result, "neuron_devices", None)  # pulumi-aws 7.x; older releases leave it to the catalogue
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
        gpu_maker=gpus[0].manufacturer.lower() if gpus else "",
        neuron_devices=sum(device.count for device in neuron) if neuron else (listed.neuron_devices if listed else 0),
    )


def ami_type(instance: InstanceType) -> str:
    """The EKS AL2023 AMI for the type: NVIDIA's on NVIDIA GPUs, Neuron's on Trainium and Inferentia (drivers, and the
    EFA host software; awslabs/amazon-eks-ami v20260724 CHANGELOG's AMI types, all x86_64 for Neuron)."""
    if instance.neuron_devices:
        return "AL2023_x86_64_NEURON"
    if instance.architecture == Architecture.ARM64:
        return "AL2023_ARM_64_NVIDIA" if instance.is_gpu else "AL2023_ARM_64_STANDARD"
    return "AL2023_x86_64_NVIDIA" if instance.is_gpu else "AL2023_x86_64_STANDARD"


def offline(name: str) -> InstanceType:
    """The catalogue's facts; a name it does not know is refused with the closest real ones."""
    listed = catalogue.lookup(name)
    if listed is not None:
        return listed
    unknown = (
        "no EC2 type of that name is known offline (EC2's types as Karpenter v1.14.1 lists them; `pulumi up` asks EC2)"
    )
    raise InvalidArgument("EC2", "instance_type", name, f"{unknown}; {_hint(name)}")


def _hint(name: str) -> str:
    closest = difflib.get_close_matches(name or "", list(catalogue.INSTANCE_TYPES), n=3, cutoff=0.5)
    return f"did you mean {', '.join(closest)}?" if closest else "see EC2's instance types"


def ec2_answer(name: str) -> dict[str, Any]:
    """`offline(name)` in the shape EC2's DescribeInstanceTypes takes through the provider (for mocks)."""
    facts = offline(name)
    gpu = {"count": facts.gpus, "manufacturer": facts.gpu_maker.upper(), "name": facts.gpu_model, "memorySize": 0}
    gpus = [gpu] if facts.gpus else []
    return {
        "instanceType": name,
        "defaultVcpus": facts.vcpus,
        "memorySize": int(facts.memory_gib * 1024),
        "maximumNetworkCards": facts.network_cards,
        "efaSupported": facts.efa,
        "gpuses": gpus,
        "supportedArchitectures": [facts.architecture.value],
        "neuronDevices": [
            {"count": facts.neuron_devices, "coreCount": 0, "coreVersion": 0, "memorySize": 0, "name": ""}
        ]
        if facts.neuron_devices
        else [],
    }
