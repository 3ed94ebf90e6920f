"""A component's args held to its TypedDict before anything is registered.

A key the component does not take (a typo, or an argument an earlier release took) would otherwise be ignored, and
an earlier release's type would fail deep inside with an AttributeError: each is refused with one line naming it and
what to use instead (the CHANGELOG's migrations).
"""

import difflib
from collections.abc import Mapping
from typing import Any

from eks_ddp.infra.errors import InvalidArgument

REMOVED = {
    "depends_on": "removed in 0.3.0: pass opts=pulumi.ResourceOptions(depends_on=[...]) instead",
    "operator": "removed in 0.3.0: put the operator's release in opts.depends_on instead",
    "mpi_operator": "removed in 0.3.0: put the MPI operator's release in opts.depends_on instead",
}
"""Arguments an earlier release took, and their replacement."""


def keys_of(typed: Any) -> frozenset[str]:
    """A TypedDict's keys, its bases' included."""
    return frozenset(typed.__required_keys__ | typed.__optional_keys__)


def check_keys(component: str, where: str, given: Any, typed: Any, migration: str = "") -> None:
    """`given` is a mapping with only `typed`'s keys; `where` is its argument path ("" at the top, "job." nested);
    `migration` says what replaced an earlier release's type for this argument."""
    if not isinstance(given, Mapping):
        argument = where.rstrip(".") or "args"
        allowed = migration or f"pass a dict ({typed.__name__})"
        raise InvalidArgument(component, argument, type(given).__name__, allowed)
    allowed_keys = keys_of(typed)
    for key in given:
        if key in allowed_keys:
            continue
        close = difflib.get_close_matches(str(key), sorted(allowed_keys), n=1)
        hint = REMOVED.get(key) or (f"did you mean {close[0]}?" if close else f"use {', '.join(sorted(allowed_keys))}")
        raise InvalidArgument(component, f"{where}{key}", given[key], f"{typed.__name__} has no such key; {hint}")
