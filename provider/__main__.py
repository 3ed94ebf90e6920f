"""The plugin's entry point: Pulumi's language host runs it with the engine's address and it serves the components.

The repository's root goes on the path first: Pulumi runs this directory, and infra/ and workloads/ sit beside it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi.provider.experimental import component_provider_host  # noqa: E402

from provider import COMPONENTS, PACKAGE, version  # noqa: E402

if __name__ == "__main__":
    component_provider_host(COMPONENTS, PACKAGE, version=version())
