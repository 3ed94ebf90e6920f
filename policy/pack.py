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

from eks_ddp.policy.rules import (
    RESOURCE_RULES,
    ResourceRule,
    StackResource,
    efa_groups_consistent,
    pods_denied_by_default,
    training_jobs_queued,
)


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


def stack_validation(
    rule: Callable[[list[StackResource]], list[str]],
) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for problem in rule(_stack_resources(args)):
            report_violation(problem, None)

    return validate


POLICIES = [
    *(_resource_policy(rule) for rule in RESOURCE_RULES),
    StackValidationPolicy(
        name="efa-node-groups-consistent",
        description="EFA node groups and Karpenter node classes sit in one subnet, in a cluster placement group, with a self-referencing security group (node classes: EFA on every card).",
        validate=stack_validation(efa_groups_consistent),
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
    StackValidationPolicy(
        name="pods-denied-by-default",
        description="Every object that makes pods sits in a namespace with a default-deny NetworkPolicy.",
        validate=stack_validation(pods_denied_by_default),
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
    StackValidationPolicy(
        name="training-jobs-queued",
        description="With Kueue's queues in the stack, every job on a training group is labelled for one of them.",
        validate=stack_validation(training_jobs_queued),
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
]
