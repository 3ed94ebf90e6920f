"""What Pulumi waits for: a resource that names another (the cluster by its name, a role by its ARN, a namespace)
must wait for it through its own dependencies, not only through the component it sits in.

Read from the sources rather than assumed (pulumi 3.272.0, the Python SDK this project pins, and pulumi/pulumi
v3.259.0 for the engine, the newest engine tag here; the code involved is unchanged between them as far as read):
- sdk/python/lib/pulumi/runtime/resource.py `prepare_resource`: a resource's `dependencies` are its own
  `opts.depends_on` and the resources behind the outputs in its inputs (`propertyDependencies`); its parent's
  `depends_on` is not among them. runtime/rpc.py `_add_dependency`: a dependency on a component of this program
  stands for the component's custom and remote descendants, not for what the component itself waited for.
- The same `prepare_resource` awaits the parent's URN before registering, and the engine answers a registration
  only once its step is done (pkg/resource/deploy/source_eval.go `RegisterResource`, "block waiting for the
  operation to finish"): on a first `pulumi up` a child is created after its parent's dependencies
  (tests/stack/test_dependencies.py shows both under the mocks). The engine's graph of dependents does not know it:
  pkg/resource/deploy/step_generator.go `calculateDependentReplacements` walks `DependingOn(root, ...,
  includeChildren=false)` (pkg/resource/graph/dependency_graph.go), which follows `Dependencies`,
  `PropertyDependencies` and providers, not parents, so a resource that waits for another only through its
  component is not among that resource's dependents when it is replaced delete-before-replace; and the order holds
  only while the resource stays where it is, under that component.
So a resource waits for what its recorded `dependencies`, `propertyDependencies` and provider reach, transitively;
a remote component (pulumi-eks's Cluster) counts as the resources it constructs (its registration returns once they
exist). Under the mocks those children never exist, so the component's own inputs name the cluster.
"""

from collections.abc import Iterator
from typing import Any

from eks_ddp.engine_models.base import Deployment, Finding, located
from eks_ddp.tools.mocking import Registration

NAMESPACE = "kubernetes:core/v1:Namespace"
NAMED_BY = ("name", "bucket")
"""Inputs that set a resource's physical name where the program gives it (otherwise the provider picks one)."""


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every scalar of an input, with its path (`spec.template.metadata.namespace`); keys are not values."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _identities(registration: Registration) -> set[str]:
    """What other resources would call an AWS resource (or pulumi-eks's cluster) by: its physical id and ARN, and a
    name the program set; none for components of this program and for Kubernetes objects."""
    if registration.type.startswith("kubernetes:") or not (registration.custom or registration.remote):
        return set()
    named = {registration.sent.get(key) for key in NAMED_BY}
    found = {registration.id, registration.inputs.get("arn") if registration.custom else None, *named}
    return {value for value in found if isinstance(value, str) and value}


def _named(deployment: Deployment) -> dict[str, list[Registration]]:
    """Each identity, with the resources it names."""
    names: dict[str, list[Registration]] = {}
    for registration in deployment.registrations:
        for identity in _identities(registration):
            names.setdefault(identity, []).append(registration)
    return names


def _edges(registration: Registration, parents: bool) -> set[str]:
    """The URNs a resource waits for directly: its dependencies, those of its inputs, its provider (and, with
    `parents`, its parent: what the SDK also awaits, but the engine's graph of dependents does not follow)."""
    edges = {*registration.dependencies, *(u for urns in registration.property_dependencies.values() for u in urns)}
    edges |= {registration.provider} if registration.provider else set()
    return edges | ({registration.parent} if parents else set())


def waited_for(by_urn: dict[str, Registration], start: Registration, parents: bool = False) -> set[str]:
    """Every URN `start` waits for, transitively."""
    seen: set[str] = set()
    pending = list(_edges(start, parents))
    while pending:
        urn = pending.pop()
        if urn in seen:
            continue
        seen.add(urn)
        if urn in by_urn:
            pending.extend(_edges(by_urn[urn], parents))
    return seen


def _mentions(deployment: Deployment, registration: Registration) -> Iterator[tuple[str, str, list[Registration]]]:
    """(path, value, resources named) for each value of the resource's inputs that names another resource: an AWS
    resource's identity anywhere, a Namespace (one the stack creates) as a Kubernetes object's namespace."""
    names = _named(deployment)
    namespaces = {
        r.sent.get("metadata", {}).get("name"): r
        for r in deployment.of_type(NAMESPACE)
        if isinstance(r.sent.get("metadata"), dict)
    }
    for path, value in _leaves(registration.sent):
        if not isinstance(value, str):
            continue
        named = [r for r in names.get(value, []) if r.urn != registration.urn]
        if path == "metadata.namespace" and value in namespaces and registration.type.startswith("kubernetes:"):
            named.append(namespaces[value])
        if named:
            yield path, value, named


def waits_for_what_it_names(deployment: Deployment) -> Iterator[Finding]:
    """Every resource waits for each resource its inputs name by a plain value: the cluster by its name, a role
    by its ARN, a namespace; not only through its component's `depends_on`."""
    by_urn = {r.urn: r for r in deployment.registrations}
    for registration in deployment.registrations:
        if not (registration.custom or registration.remote):
            continue
        waits = waited_for(by_urn, registration)
        for path, value, named in _mentions(deployment, registration):
            if any(target.urn in waits for target in named):
                continue
            target = named[0]
            through = target.urn in waited_for(by_urn, registration, parents=True)
            how = "only its component waits for it" if through else "nothing makes it wait"
            yield Finding(
                "dependencies",
                located(registration),
                path,
                f"names {located(target)} ({value!r}) but does not depend on it ({how}): take that resource's "
                "output, or put the resource in this one's depends_on",
            )
