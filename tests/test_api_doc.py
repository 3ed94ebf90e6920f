"""docs/api.md names only what exists: each stable row's module imports and has every name the row lists."""

import importlib
import re
from pathlib import Path

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_every_name_the_api_page_lists_exists() -> None:
    rows = re.findall(r"^\| `(eks_ddp\.[\w.]+)` \| (.+) \|$", API.read_text(), re.M)
    assert len(rows) >= 10
    for module_name, names in rows:
        module = importlib.import_module(module_name)
        listed = re.findall(r"`(\w+)`", names)
        assert listed and [name for name in listed if not hasattr(module, name)] == [], module_name
