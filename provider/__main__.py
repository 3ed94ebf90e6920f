"""The plugin's entry point: Pulumi's Python host runs `python provider/ <engine address>` (its RunPlugin,
pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go) and the plugin serves the components over gRPC.

The repository's root goes on the path first: infra/ and workloads/ sit beside this directory (a git source is
cloned whole).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi.provider import main  # noqa: E402

from eks_ddp.provider import COMPONENTS, NAMESPACE, PACKAGE, version  # noqa: E402
from eks_ddp.provider.wire_inputs import ComponentsProvider  # noqa: E402

if __name__ == "__main__":
    # component_provider_host's own steps, with the provider that maps the wire format (provider/wire_inputs.py).
    main(ComponentsProvider(COMPONENTS, PACKAGE, NAMESPACE, version()), sys.argv[1:])
