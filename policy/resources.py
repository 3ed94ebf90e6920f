"""What the policy pack's rules read: one resource's inputs, or every resource of the stack.

Inputs are the engine's view (camelCase). Inputs unknown during a preview (computed by the cloud) are skipped, never
guessed: pulumi-policy raises on reading one, and the preview says the policy could not run for that resource.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Props = Mapping[str, Any]


@dataclass(frozen=True)
class StackResource:
    """What a stack rule needs of each resource: during a preview, ids are unknown,
    so resources are linked through the properties that reference them."""

    type: str
    name: str
    urn: str
    props: Props
    property_dependencies: Mapping[str, Sequence[str]]

    def referenced(self, prop: str) -> set[str]:
        return set(self.property_dependencies.get(prop, ()))
