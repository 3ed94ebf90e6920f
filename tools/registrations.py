"""`python -m eks_ddp.tools.registrations > before.json`: every registration of every shipped stack, as JSON.

For a change that must not touch a live stack (a refactor, a rename): dump before and after, and compare. Each
resource is its URN (its address: type chain, parent and name), the inputs the program sent, its dependencies
and options. The trainer images' tags are masked: they hash the build context, so any change to the shipped
sources gives a new tag (and a rebuild), which is the images' job and not a change of the stack's shape.
"""

import json
import re
import sys
from pathlib import Path
from typing import Any

from eks_ddp.tools.mocking import Registration
from eks_ddp.tools.pulumi_program import Program
from eks_ddp.tools.rehearsal import comparable

_CONTENT_TAG = re.compile(r"(-repository:)[0-9a-f]{16}\b")


def described(registration: Registration) -> dict[str, Any]:
    """What `pulumi up` compares for one resource, as plain data."""
    return {
        "type": registration.type,
        "urn": registration.urn,
        "parent": registration.parent,
        "sent": comparable(registration.sent),
        "dependencies": sorted(registration.dependencies),
        "property_dependencies": {key: sorted(urns) for key, urns in registration.property_dependencies.items()},
        "custom_timeouts": registration.custom_timeouts,
        "replace_on_changes": registration.replace_on_changes,
        "delete_before_replace": registration.delete_before_replace,
        "custom": registration.custom,
        "remote": registration.remote,
        "provider": registration.provider,
    }


def dump(program: Program) -> str:
    """Every stack file's registrations, sorted by URN, with the images' content tags masked."""
    stacks = {stack: sorted(map(described, program.run(stack)), key=lambda item: item["urn"])
              for stack in program.stacks()}
    return _CONTENT_TAG.sub(r"\1<content>", json.dumps(stacks, indent=1, sort_keys=True, default=str))


if __name__ == "__main__":
    sys.stdout.write(dump(Program.at(Path(sys.argv[1] if len(sys.argv) > 1 else "."))) + "\n")
