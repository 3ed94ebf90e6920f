"""The objects of a multi-document YAML stream (a chart's, a kustomization's, a module's CRDs), read by libyaml.

PyYAML's wheels carry libyaml: CRDs that take seconds each in pure Python parse in a fraction of one. The same
stream (a module's CRDs, a pinned chart with the same values) comes back in every cluster test of a session: it is
parsed once, kept as JSON, and each caller gets its own copy to change. A plain `=` reads as the string Go's YAML
reads (YAML 1.1's `value` tag, which PyYAML resolves but cannot construct: prometheus-operator's CRDs list `=` among
label-matching operators).
"""

import functools
import json
from typing import Any

import yaml


class _Loader(yaml.CSafeLoader):
    pass


_Loader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)


@functools.lru_cache(maxsize=128)
def _as_json(text: str) -> str:
    return json.dumps([document for document in yaml.load_all(text, Loader=_Loader) if document])


def documents(text: str) -> list[dict[str, Any]]:
    """Every non-empty document of `text`, a fresh copy for each call."""
    return json.loads(_as_json(text))
