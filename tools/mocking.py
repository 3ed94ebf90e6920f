"""Running components without a cloud, for the tests and the offline preview.

`RecordingMocks` answers every registration with plausible outputs; the monitor
records what each resource was created with (type, name, parent, inputs,
dependencies) so tests can check the properties that matter.
"""

import asyncio
import contextlib
import contextvars
import os
import runpy
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import resource, rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import source_pb2

from eks_ddp.infra.facts import instance_facts
from eks_ddp.stack.settings import StackConfig
from eks_ddp.stack.program import build

# How the Pulumi wire format marks a resource reference inside a struct.
_SIGNATURE_KEY = "4dabf18193072939515e22adb298388d"
_RESOURCE_REFERENCE = "5cf8f73096256a8f31e491e813e4eb8e"

ACCOUNT = "123456789012"
OIDC_ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
# Who runs `pulumi up` under mocks: a role session, as in CI with OIDC credentials.
DEPLOYER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/ci/deployer"
DEPLOYER_SESSION_ARN = f"arn:aws:sts::{ACCOUNT}:assumed-role/deployer/ci-session"


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    inputs: dict[str, Any]
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """`customTimeouts` of the resource options (create/update/delete, such as "20m"), where set."""
    id: str = ""
    """The physical id the mocks gave it: what other resources' inputs refer to."""
    replace_on_changes: list[str] = field(default_factory=list)
    """`replaceOnChanges` of the resource options: property paths whose change replaces it."""
    delete_before_replace: bool = False
    sent: dict[str, Any] = field(default_factory=dict)
    """The inputs the program sent, before the mocks added their outputs (`inputs` holds both)."""
    custom: bool = True
    """A custom resource (one a provider manages), not a component."""
    remote: bool = False
    """A component some provider constructs (pulumi-eks's Cluster, Helm v4's Chart): its children never exist here."""
    provider: str = ""
    """The URN of the provider the resource was registered with, if one was given (the resource waits for it)."""


def _replace_references(struct: Any) -> None:
    """Swap resource references for their URN strings, in place.

    The stock MockMonitor rehydrates references on a worker thread, which fails at
    random with "got Future attached to a different loop".
    """
    for key in list(struct.fields):
        value = struct.fields[key]
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            inner = value.struct_value
            if _SIGNATURE_KEY in inner.fields and inner.fields[_SIGNATURE_KEY].string_value == _RESOURCE_REFERENCE:
                struct.fields[key].string_value = inner.fields["urn"].string_value
            else:
                _replace_references(inner)
        elif kind == "list_value":
            for item in value.list_value.values:
                if item.WhichOneof("kind") == "struct_value":
                    _replace_references(item.struct_value)


# EC2's id prefixes, which CRDs that take ids check (Karpenter's EC2NodeClass: `subnet-[0-9a-z]+`, `sg-...`).
ID_PREFIXES = {"aws:ec2/subnet:Subnet": "subnet", "aws:ec2/securityGroup:SecurityGroup": "sg", "aws:ec2/vpc:Vpc": "vpc"}


def _fake_outputs(type_: str, name: str, inputs: dict[str, Any], region: str) -> dict[str, Any]:
    outputs = dict(inputs)
    outputs.setdefault("name", name)  # providers autoname; mocks do not
    outputs.setdefault("arn", f"arn:aws:{type_.split(':')[1].split('/')[0]}::{ACCOUNT}:{name}")
    if type_ == "eks:index:Cluster":
        outputs.update(
            kubeconfigJson='{"apiVersion": "v1", "kind": "Config"}',
            clusterSecurityGroupId=f"sg-{name}-cluster",
            nodeSecurityGroupId=f"sg-{name}-node",
            oidcProviderArn=f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}",
            oidcProviderUrl=f"https://{OIDC_ISSUER}",
            oidcIssuer=OIDC_ISSUER,
        )
    elif type_ == "aws:eks/nodeGroup:NodeGroup":
        outputs["resources"] = [{"autoscalingGroups": [{"name": f"eks-{name}-asg"}]}]
    elif type_ == "aws:s3/bucket:Bucket":
        outputs.update(arn=f"arn:aws:s3:::{name}", bucket=name)  # S3 ARNs carry no region or account
    elif type_ in ("aws:iam/role:Role", "aws:iam/policy:Policy"):  # IAM ARNs name the kind and carry no region
        outputs.update(arn=f"arn:aws:iam::{ACCOUNT}:{type_.rsplit(':', 1)[1].lower()}/{name}")
    elif type_ == "aws:amp/workspace:Workspace":
        outputs["prometheusEndpoint"] = f"https://aps-workspaces.{region}.amazonaws.com/workspaces/ws-{name}/"
    elif type_ == "aws:sqs/queue:Queue":
        outputs.update(
            arn=f"arn:aws:sqs:{region}:{ACCOUNT}:{name}", url=f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}"
        )
    elif type_ == "aws:ecr/repository:Repository":
        outputs.update(repositoryUrl=f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{name}", registryId=ACCOUNT)
    elif type_ == "docker-build:index:Image":
        outputs["digest"] = "sha256:" + "0" * 64
    elif type_ == "aws:ec2/vpc:Vpc":
        outputs.setdefault("defaultRouteTableId", f"rtb-{name}-default")
    return outputs


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region
        """The AWS region the provider is configured for: regional outputs (ECR URLs, zones) use it."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        prefix = ID_PREFIXES.get(args.typ)
        physical_id = f"{prefix}-{args.name}" if prefix else f"{args.name}-id"
        return physical_id, _fake_outputs(args.typ, args.name, args.inputs, self.region)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT, "arn": DEPLOYER_SESSION_ARN, "userId": "AROAEXAMPLE:ci-session"}, []
        if args.token == "aws:iam/getSessionContext:getSessionContext":
            issuer = DEPLOYER_ROLE_ARN if args.args.get("arn") == DEPLOYER_SESSION_ARN else args.args.get("arn")
            return {
                "arn": args.args.get("arn"),
                "issuerArn": issuer,
                "issuerName": "deployer",
                "issuerId": "AROAEXAMPLE",
                "sessionName": "ci-session",
                "id": args.args.get("arn"),
            }, []
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com"}, []
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{letter}" for letter in "abcdef"]
            return {"names": names, "zoneIds": [f"az{index}" for index in range(1, 7)], "id": self.region}, []
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "userName": "AWS",
                "password": "mock-token",
                "authorizationToken": "",
                "proxyEndpoint": "",
                "expiresAt": "",
                "id": ACCOUNT,
            }, []
        if args.token == instance_facts.GET_INSTANCE_TYPE:
            return instance_facts.ec2_answer(args.args["instanceType"]), []
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region}, []
        if args.token == "aws:eks/getCluster:getCluster":  # an EKS cluster made elsewhere, as EKS describes it
            name = args.args["name"]
            issuer = f"https://oidc.eks.{self.region}.amazonaws.com/id/{name.upper()}"
            return {
                "name": name,
                "endpoint": f"https://{name}.gr7.{self.region}.eks.amazonaws.com",
                "certificateAuthorities": [{"data": "bW9jay1jYQ=="}],
                "identities": [{"oidcs": [{"issuer": issuer}]}],
                "vpcConfig": {"vpcId": f"vpc-{name}", "clusterSecurityGroupId": f"sg-{name}"},
                "version": "1.35",
            }, []
        if args.token == "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider":
            host = str(args.args["url"]).removeprefix("https://")
            return {"arn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{host}", "url": args.args["url"]}, []
        return {}, []


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        _replace_references(request.object)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = self.resources[response.urn].state
            by_property = {key: list(value.urns) for key, value in request.propertyDependencies.items()}
            timeouts = {
                kind: getattr(request.customTimeouts, kind)
                for kind in ("create", "update", "delete")
                if getattr(request.customTimeouts, kind)
            }
            self.registrations.append(
                Registration(
                    request.type,
                    request.name,
                    response.urn,
                    request.parent,
                    dict(inputs),
                    list(request.dependencies),
                    by_property,
                    timeouts,
                    response.id,
                    list(request.replaceOnChanges),
                    request.deleteBeforeReplace,
                    rpc.deserialize_properties(request.object),
                    request.custom,
                    request.remote,
                    request.provider.rsplit("::", 1)[0],
                )
            )
        return response


def _as_the_cli_runs(program: Path) -> None:
    """The Python language host runs the program's file in its directory, with that directory on the path."""
    directory, cwd = str(program.resolve().parent), Path.cwd()
    sys.path.insert(0, directory)
    os.chdir(directory)
    try:
        runpy.run_path(str(program), run_name="__main__")
    finally:
        os.chdir(cwd)
        sys.path.remove(directory)


def run_offline(
    program: Callable[[], Any] | str | Path,
    region: str = "us-east-1",
    project: str = "eks-ddp",
    stack: str = "offline",
    config: dict[str, str] | None = None,
) -> list[Registration]:
    """Run a Pulumi program under these mocks and return what it registered: no CLI, no account.

    `program` is a callable, or the path of a Python file run as the Pulumi CLI would run it (`__main__`, from its
    directory, which is first on the path). `config` holds full keys and the strings the CLI would pass.
    Each call gets its own event loop, options, config and context, so calls do not leak into each other.
    """
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.settings.reset_options()
    pulumi.runtime.set_all_config({"aws:region": region, **(config or {})})
    mocks = RecordingMocks(region)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True, monitor=monitor)
    run = program if callable(program) else (lambda: _as_the_cli_runs(Path(program)))
    with _no_stack_traces():  # in a context of its own: a program's context variables (instance_facts) stay its own
        contextvars.copy_context().run(pulumi.runtime.test(run))
    return sorted(monitor.registrations, key=lambda registration: (registration.type, registration.name))


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """The SDK walks the Python stack at every registration for the engine's diagnostics (the resource's source
    position in an error); a mock monitor drops it, and the walk took 13 % of a mocked run's CPU (pulumi 3.200.0
    and 3.272.0 call `_get_stack_trace` from `register_resource` and `read_resource`)."""
    walk = resource._get_stack_trace
    resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        resource._get_stack_trace = walk


def run_under_mocks(config: StackConfig, project: str = "eks-ddp", stack: str = "dev") -> list[Registration]:
    """Every resource the stack program registers for a parsed config, with parents, inputs and dependencies."""
    return run_offline(lambda: build(config, name=project), config.region, project, stack)
