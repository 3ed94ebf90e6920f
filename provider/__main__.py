"""The plugin's entry point: Pulumi's Python host runs `python provider/ <engine address>` (its RunPlugin,
pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go) and the plugin serves the components over gRPC.

The repository's root goes on the path first: infra/ and workloads/ sit beside this directory (a git source is
cloned whole).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi.provider.experimental import component_provider_host  # noqa: E402

from provider import COMPONENTS, PACKAGE, version  # noqa: E402

if __name__ == "__main__":
    component_provider_host(COMPONENTS, PACKAGE, version=version())
