"""The placeholder ids the shipped stack files carry, found and named before they reach AWS.

The GPU, Trainium and own-code stack files name an existing VPC, subnets, a file system, a security group, a
capacity reservation and images that cannot exist in the reader's account. Offline (under the mocks) they preview as
they are and the preview marks them; under `pulumi preview` or `pulumi up` the program refuses the first one in one
line naming the key and what to put there, before anything is created.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_monitor

from eks_ddp.stack.keys import ConfigError

PLACEHOLDER_ACCOUNT = "123456789012"
# The stack files' placeholder ids: every AWS id prefix the stack takes, with the bodies the files use.
PLACEHOLDER_ID = re.compile(r"\b(vpc|subnet|fs|sg|cr)-(0123456789abcdef0|0fedcba9876543210|0a1b2c3d4e5f60718)\b")
WHAT_TO_PUT = {
    "vpc": "your VPC's id (aws ec2 describe-vpcs)",
    "subnet": "your subnet's id (aws ec2 describe-subnets)",
    "fs": "your FSx for Lustre file system's id and DNS name (aws fsx describe-file-systems)",
    "sg": "the file system's security group id (aws fsx describe-file-systems)",
    "cr": "your capacity reservation's id (aws ec2 describe-capacity-reservations)",
    "account": "an image in your own account's ECR (its URI from aws ecr describe-repositories)",
}
MOUNT_NAME = ("storage.mountName", "abcdefgh", "the file system's mount name (aws fsx describe-file-systems)")


def found(values: dict[str, Any], prefix: str = "") -> list[tuple[str, str, str]]:
    """(stack key as written, placeholder value, what to put there) for each placeholder in `values`: the keys with
    `prefix` before them (`eks-ddp:`), structured values as objects or as the CLI's JSON text."""
    return [found for key, value in values.items() for found in _walk(_structured(value), f"{prefix}{key}")]


def _structured(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _walk(value: Any, key: str) -> Iterator[tuple[str, str, str]]:
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _walk(item, f"{key}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{key}[{index}]")
    elif isinstance(value, str):
        match = PLACEHOLDER_ID.search(value)
        if match:
            yield key, value, WHAT_TO_PUT[match.group(1)]
        elif PLACEHOLDER_ACCOUNT in value:
            yield key, value, WHAT_TO_PUT["account"]
        elif key.endswith(MOUNT_NAME[0]) and value == MOUNT_NAME[1]:
            yield key, value, MOUNT_NAME[2]


def under_mocks() -> bool:
    """Whether the program runs under the Pulumi SDK's mocks (the offline preview, rehearsal and tests)."""
    return isinstance(get_monitor(), MockMonitor)


def refuse(values: dict[str, Any], prefix: str) -> None:
    """Against AWS, refuse the first placeholder (offline they stay, and the preview marks them)."""
    placeholders = found(values, prefix)
    if placeholders and not under_mocks():
        key, value, what = placeholders[0]
        raise ConfigError(key, value, f"it is the stack file's placeholder: put {what} there")
