"""The one error type components raise for bad arguments, before creating anything."""


class InvalidArgument(ValueError):
    """Names the component, the argument, the bad value and what is allowed."""

    def __init__(self, component: str, argument: str, value: object, allowed: str) -> None:
        super().__init__(f"{component}: {argument}={value!r} is not allowed; {allowed}")
        self.component, self.argument, self.value, self.allowed = component, argument, value, allowed
