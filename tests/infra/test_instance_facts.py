"""Any EC2 instance type: EC2's facts in `pulumi up` (the mocks stand in), the catalogue's (every type) offline."""

from typing import Any

import pulumi
import pytest

from eks_ddp.infra.aws.cluster import Cluster
from eks_ddp.infra.aws.efa_node_group import EfaNodeGroup
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import instance_facts
from eks_ddp.tools.mocking import RecordingMocks
from tests.infra.test_efa_node_group import _args
from tests.pulumi_harness import Recorded


def test_offline_facts_are_ec2s_for_every_type_and_a_typo_is_refused_with_the_closest_names() -> None:
    p4de = instance_facts.offline("p4de.24xlarge")
    assert (p4de.gpus, p4de.gpu_maker, p4de.gpu_model, p4de.network_cards, p4de.hourly_usd) == (8, "nvidia", "A100", 4, 27.44705)
    hpc = instance_facts.offline("hpc7a.48xlarge")  # not sold on demand in us-east-1: unknown, not guessed
    assert (hpc.vcpus, hpc.architecture.value, hpc.efa, hpc.hourly_usd) == (96, "x86_64", True, None)
    b200 = instance_facts.offline("p6-b200.48xlarge")  # EC2's naming, with a hyphen
    assert (b200.gpus, b200.gpu_model, b200.network_cards, b200.efa) == (8, "B200", 8, True)
    assert instance_facts.name_problem("p6e-gb200.36xlarge") is None and instance_facts.name_problem("c5-large")
    with pytest.raises(InvalidArgument, match=r"'c7g\.16xlarg' is not allowed; no EC2 type of that name is known offline .*; did you mean c7g\.16xlarge"):
        instance_facts.offline("c7g.16xlarg")
    with pytest.raises(InvalidArgument, match="no EC2 type of that name is known offline"):
        instance_facts.offline("c7g.huge")


class OtherEc2(RecordingMocks):
    """EC2 answering differently from the catalogue: the components must follow EC2."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == instance_facts.GET_INSTANCE_TYPE and args.args["instanceType"] == "c7g.16xlarge":
            return {**instance_facts.ec2_answer("c7g.16xlarge"), "maximumNetworkCards": 2}, []
        return super().call(args)


def test_node_groups_take_their_facts_from_ec2(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.monitor.mocks = OtherEc2()
    pulumi_mocks.run(lambda: EfaNodeGroup("workers", _args()))
    template = pulumi_mocks.named("workers-template").inputs
    assert [interface["interfaceType"] for interface in template["networkInterfaces"]] == ["efa", "efa-only"]
    tag = pulumi_mocks.named("workers-asg-node-template-resources-vpc-amazonaws-com-efa").inputs["tag"]
    assert tag["value"] == "2"


def test_any_type_for_any_group_x86_arm_cpu_gpu_system_or_training(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        Cluster("c", {"vpc_id": "v", "private_subnet_ids": ["s"], "system_instance_type": "c5.2xlarge"})
        EfaNodeGroup("gpu", _args(instance_type="p4de.24xlarge", capacity_reservation_id="cr-0123456789abcdef0"))
        EfaNodeGroup("cpu", _args(instance_type="c5.4xlarge", efa=False))
        EfaNodeGroup("other", _args(instance_type="r7i.48xlarge"))

    pulumi_mocks.run(program)
    assert pulumi_mocks.named("c-system").inputs["amiType"] == "AL2023_x86_64_STANDARD"
    gpu = pulumi_mocks.named("gpu-nodes").inputs
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA" and gpu["labels"]["nvidia.com/gpu.present"] == "true"
    assert len(pulumi_mocks.named("gpu-template").inputs["networkInterfaces"]) == 4
    assert pulumi_mocks.named("cpu-nodes").inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert pulumi_mocks.named("other-nodes").inputs["instanceTypes"] == ["r7i.48xlarge"]


class Ec2Answers(RecordingMocks):
    """EC2 under `pulumi up`: a Neuron type newer than the catalogue, and a name it refuses."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == instance_facts.GET_INSTANCE_TYPE and args.args["instanceType"] == "trn3.48xlarge":
            return {**instance_facts.ec2_answer("trn2.48xlarge"), "instanceType": "trn3.48xlarge"}, []
        if args.token == instance_facts.GET_INSTANCE_TYPE and args.args["instanceType"] == "c7g.16xlarg":
            return {}, [("instanceType", "InvalidInstanceType: the supplied instance types do not exist: [c7g.16xlarg]")]
        return super().call(args)


def test_under_pulumi_up_ec2s_neuron_devices_count_and_a_name_it_refuses_is_one_line(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.monitor.mocks = Ec2Answers()
    found: dict[str, Any] = {}

    def program() -> None:
        found["trn3"] = instance_facts.describe("trn3.48xlarge")
        try:
            instance_facts.describe("c7g.16xlarg")
        except InvalidArgument as error:
            found["error"] = str(error)

    pulumi_mocks.run(program)
    assert found["trn3"].neuron_devices == 16 and found["trn3"].network_cards == 16
    assert "'c7g.16xlarg' is not allowed; EC2 did not describe it (" in found["error"]
    assert "InvalidInstanceType" in found["error"] and "did you mean c7g.16xlarge" in found["error"]
