"""What a component's own resources wait for: the component's `opts.depends_on`.

Every component takes what it waits for as Pulumi's own resource option rather than an argument, so its args stay
plain data (Pulumi infers a schema from them: provider/). Pulumi does not pass a component's `depends_on` to the
resources it creates, so each component hands it on.
"""

from collections.abc import Sequence
from typing import cast

import pulumi


def waits_for(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """`opts.depends_on` as a list (it may be absent, one resource, or several)."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    return list(cast(Sequence[pulumi.Resource], depends_on))
