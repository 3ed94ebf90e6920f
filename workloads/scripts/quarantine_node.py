"""After a failed GPU pre-flight: taint this pod's node NoExecute, then wait for the eviction that follows.

Runs in the job's image (the bundled trainer's or the user's: both have Python) with the standard library only.
The pre-flight wrote why the node is bad to PREFLIGHT_VERDICT; without that file the node passed and this exits 0. The
taint is added with a JSON patch that tests the node's resourceVersion, so a concurrent change is not lost. Once
tainted, the taint manager evicts the pod (its controller recreates it elsewhere, and the eviction costs no container
restart); if the eviction has not come after WAIT_SECONDS, or the taint could not be set, the container fails with a
line naming the node, as the pre-flight did before.
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

VERDICT, ACCOUNT = os.environ["PREFLIGHT_VERDICT"], os.environ["QUARANTINE_ACCOUNT"]


def call(url: str, method: str, body: Any = None, kind: str = "application/json") -> dict[str, Any]:
    with open(f"{ACCOUNT}/token") as token:
        headers = {"Authorization": f"Bearer {token.read().strip()}", "Content-Type": kind}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:  # the API server's Status says why (RBAC, the admission policy)
        try:
            said = json.load(error).get("message", "")
        except ValueError:
            said = ""
        raise RuntimeError(f"HTTP {error.code} {error.reason}: {said}".rstrip(": ")) from None


def taint(url: str, key: str) -> None:
    node = call(url, "GET")
    taints = node["spec"].get("taints") or []
    if any(t["key"] == key for t in taints):
        return
    added = {"key": key, "value": "true", "effect": "NoExecute"}
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/spec/taints", "value": [*taints, added]},
    ]
    call(url, "PATCH", patch, "application/json-patch+json")


def main() -> int:
    if not os.path.exists(VERDICT):
        return 0
    node, key = os.environ["NODE_NAME"], os.environ["TAINT_KEY"]
    with open(VERDICT) as verdict:
        reason = verdict.read().strip()
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    url = f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}/api/v1/nodes/{node}"
    failed = f"GPU PREFLIGHT FAILED on node {node}: {reason}"
    try:
        taint(url, key)
    except Exception as error:  # any failure leaves the node as it was: say so and fail the pod
        print(f"{failed}; could not taint it ({error}): cordon it: kubectl cordon {node}", file=sys.stderr, flush=True)
        return 1
    print(f"{failed}; tainted {key}=true:NoExecute, the pod is evicted to another node", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get("WAIT_SECONDS", "300")))
    print(f"node {node}: no eviction after the taint; cordon it: kubectl cordon {node}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
