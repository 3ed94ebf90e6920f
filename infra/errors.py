"""The one error type components raise for bad arguments, before creating anything."""

from collections.abc import Callable, Sequence


class InvalidArgument(ValueError):
    """Names the component, the argument, the bad value and what is allowed.

    `allowed` may name other arguments as `{}`, filled from `refers` (their paths, `existing_cluster.kubeconfig`): a
    caller that knows them by other names (a stack, by its keys) builds the message with `allowed_as`.
    """

    def __init__(
        self, component: str, argument: str, value: object, allowed: str, refers: Sequence[str] = ()
    ) -> None:
        self.template, self.refers = allowed, tuple(refers)
        self.component, self.argument, self.value, self.allowed = component, argument, value, self.allowed_as(str)
        super().__init__(f"{component}: {argument}={value!r} is not allowed; {self.allowed}")

    def under(self, component: str, prefix: str = "") -> "InvalidArgument":
        """The same refusal raised by `component`, which gave the argument at `prefix` (`node_groups[1].`)."""
        refers = [f"{prefix}{path}" for path in self.refers]
        return InvalidArgument(component, f"{prefix}{self.argument}", self.value, self.template, refers)

    def allowed_as(self, name: Callable[[str], str]) -> str:
        """What is allowed, with each argument it refers to named by `name(path)`."""
        return self.template.format(*map(name, self.refers)) if self.refers else self.template
