"""The rules as pulumi-policy policies (mandatory: a violation fails the preview)."""

from collections.abc import Callable

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from eks_ddp.policy.rules import RESOURCE_RULES, STACK_RULES, ResourceRule, StackResource, StackRule


def resource_validation(rule: ResourceRule) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """The engine's callback for `rule`: one violation per problem, naming the resource."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type in rule.types:
            for problem in rule.check(args.resource_type, args.props):
                report_violation(f"{args.name}: {problem}", args.urn)

    return validate


def _resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=resource_validation(rule),
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def _stack_resources(args: StackValidationArgs) -> list[StackResource]:
    return [
        StackResource(
            r.resource_type,
            r.name,
            r.urn,
            r.props,
            {key: [d.urn for d in deps] for key, deps in r.property_dependencies.items()},
        )
        for r in args.resources
    ]


def stack_validation(rule: StackRule) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for problem in rule.check(_stack_resources(args)):
            report_violation(problem, None)

    return validate


def _stack_policy(rule: StackRule) -> StackValidationPolicy:
    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=stack_validation(rule),
        enforcement_level=EnforcementLevel.MANDATORY,
    )


POLICIES = [*(_resource_policy(rule) for rule in RESOURCE_RULES), *(_stack_policy(rule) for rule in STACK_RULES)]
