"""Stack keys set by path, as `pulumi config set --path` takes them: `eks-ddp:job.replicas=0`,
`eks-ddp:nodeGroups[1].maxSize=0`, `eks-ddp:["vpc"]["cidr"]=10.1.0.0/16`.

The CLI's rules (pulumi/pulumi `pulumi config set` documentation, v3.2xx): `a.b` names a map's key, `a[0]` a list's
item, `["a.b"]` a key with dots; the leaf value `true` or `false` is a boolean, an integer is a number, anything else
a string; a top-level value stays a string. A list grows by one when the index is its length.
"""

import copy
import json
import re
from typing import Any

SEGMENT = re.compile(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]|\.?([^.\[\]"]+)')


class PathError(ValueError):
    """A path the CLI would refuse, or one that does not fit the value it goes into."""


def segments(path: str) -> list[str | int]:
    """`nodeGroups[1].maxSize` as ["nodeGroups", 1, "maxSize"]."""
    parts: list[str | int] = []
    position = 0
    while position < len(path):
        match = SEGMENT.match(path, position)
        if match is None or (position == 0 and match.group(3) is not None and path.startswith(".")):
            raise PathError(f'{path!r} is not a config path (use a.b, a[0] or ["a.b"])')
        quoted, index, name = match.groups()
        parts.append(int(index) if index is not None else quoted if quoted is not None else name)
        position = match.end()
        if position < len(path) and path[position] == "." and path[position + 1 : position + 2] == "[":
            position += 1  # the `["a"].["b"]` spelling
    if not parts:
        raise PathError(f'{path!r} is not a config path (use a.b, a[0] or ["a.b"])')
    return parts


def typed(value: str) -> Any:
    """A leaf value as the CLI stores it under a path."""
    if value in ("true", "false"):
        return value == "true"
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def with_path(base: Any, path: list[str | int], value: str) -> Any:
    """A copy of `base` with `value` set at `path` (maps and lists made as needed)."""
    root = copy.deepcopy(base) if base is not None else ([] if isinstance(path[0], int) else {})
    node: Any = root
    for here, following in zip(path, [*path[1:], None]):
        child: Any = typed(value) if following is None else ([] if isinstance(following, int) else {})
        if isinstance(here, int):
            if not isinstance(node, list):
                raise PathError(f"[{here}] does not fit: not a list")
            if here > len(node):
                raise PathError(f"[{here}] does not fit: the list has {len(node)} items")
            if here == len(node):
                node.append(child)
            elif following is None:
                node[here] = child
            node = node[here]
        else:
            if not isinstance(node, dict):
                raise PathError(f"{here!r} does not fit: not a map")
            if following is None or here not in node:
                node[here] = child
            node = node[here]
    return root


def _is_path(key: str) -> bool:
    """`ns:a.b`, `ns:a[0]`: a key set inside its top-level value; `ns:a` is a plain key."""
    namespace, colon, rest = key.partition(":")
    return bool(colon and re.search(r"[.\[]", rest))


def top_key(key: str) -> str:
    """The full key whose value a key sets: `eks-ddp:job` for `eks-ddp:job.replicas`, a plain key itself."""
    if not _is_path(key):
        return key
    namespace, _, rest = key.partition(":")
    return f"{namespace}:{segments(rest)[0]}"


def merged(config: dict[str, Any], override: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    """`config` (full keys) with `override` applied: a plain key replaced, a path key set inside its top-level value
    (the stack file's, else `defaults`' for that full key)."""
    result = dict(config)
    for key, value in override.items():
        if not _is_path(key):
            result[key] = value
            continue
        try:
            path = segments(key.partition(":")[2])
            top = top_key(key)
            base = result.get(top, defaults.get(top))
            if isinstance(base, str) and base[:1] in ("[", "{"):
                base = json.loads(base)  # a structured value given as JSON by an earlier override
            result[top] = with_path(base, path[1:], value) if len(path) > 1 else value
        except PathError as error:
            raise PathError(f"{key}={value}: {error}") from None
    return result
