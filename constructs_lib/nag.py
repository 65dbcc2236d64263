"""cdk-nag v3 acknowledgements: every one states why the finding does not apply here.

cdk-nag v3 has no rule-wide IAM5 acknowledgement: each wildcard action and resource is its
own finding (`AwsSolutions-IAM5[Action::s3:GetObject*]`, `...[Resource::<arn>/datasets/*]`).
Resource findings name the resolved ARN, and a cross-stack ARN only resolves after CDK's
prepare phase, so those acknowledgements are written from a construct validation hook.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsii
from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct, IValidation


# The packs every synthesis runs, and the ones the tests add (synthesis speed matters; the findings are the same
# kind, see COMPLIANCE_PACKS). cdk-nag class names, resolved in stacks/build.py.
DEFAULT_PACKS = ("AwsSolutionsChecks", "NIST80053R5Checks")
ALL_PACKS = (*DEFAULT_PACKS, "HIPAASecurityChecks", "PCIDSS321Checks")
# cdk-nag's compliance packs give one check one name (`<pack>-S3BucketReplicationEnabled`), so a finding is
# acknowledged in each of them at once; AwsSolutions names some of the same checks its own way (SAME_FINDING).
COMPLIANCE_PACKS = ("NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")
SAME_FINDING = {"AwsSolutions-SM2": "SageMakerEndpointConfigurationKMSKeyConfigured"}


def finding_ids(rule: str) -> list[str]:
    """Every pack's ID for the finding `rule` names (`NIST.800.53.R5-X` -> X in all three compliance packs)."""
    check = SAME_FINDING.get(rule)
    ids = [rule] if check else []
    for pack in COMPLIANCE_PACKS:
        if rule.startswith(pack + "-"):
            check = rule.removeprefix(pack + "-")
    return ids + [f"{pack}-{check}" for pack in COMPLIANCE_PACKS] if check else [rule]


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one finding (`AwsSolutions-IAM5[Action::s3:*]`, `NIST.800.53.R5-S3BucketReplicationEnabled`)
    with one reason, in every pack that reports it (finding_ids)."""
    acknowledge_each(scope, [(rule, reason)])


def acknowledge_each(scope: IConstruct, findings: Sequence[tuple[str, str]]) -> None:
    """Acknowledge each (rule, reason) on `scope` as `acknowledge` does, in one call: every call into the CDK is a
    round trip to jsii's node process, and a team's estate makes hundreds of acknowledgements (issue 43)."""
    acks = [Acknowledgment(id=rule_id, reason=reason) for rule, reason in findings for rule_id in finding_ids(rule)]
    if acks:
        Validations.of(scope).acknowledge(*acks)


def acknowledge_no_volume_key(config: IConstruct, reason: str) -> None:
    """An endpoint config without KmsKeyId: one reason for AwsSolutions-SM2 and the compliance packs' check."""
    acknowledge(config, "AwsSolutions-SM2", reason)


INLINE_POLICY_REASON = ("A role's own default policy: least privilege for that one role, created and deleted with it "
                        "and attachable to nothing else. A customer managed policy would add a reusable object that "
                        "other principals could be given, which is what this avoids.")


def acknowledge_inline_role_policies(root: IConstruct) -> None:
    """NIST IAMNoInlinePolicy on every role's CDK default policy under `root` (and nothing else)."""
    from aws_cdk import aws_iam as iam

    for c in root.node.find_all():
        if isinstance(c, iam.Policy) and (node := c.node).id == "DefaultPolicy" and isinstance(node.scope, iam.Role):
            acknowledge(c, "NIST.800.53.R5-IAMNoInlinePolicy", INLINE_POLICY_REASON)  # `node`: one round trip, not two


def ignore_cfn_lint(scope: IConstruct, rule: str, reason: str) -> None:
    """Tell cfn-lint to skip one rule on the resource behind `scope` (reason kept in the template)."""
    (scope.node.default_child or scope).add_metadata("cfn-lint", {"config": {"ignore_checks": [rule]}, "reason": reason})


def acknowledge_wildcards(scope: IConstruct, *, actions: Sequence[str] = (), resources: Sequence[str] = (),
                          reason: str) -> None:
    """Acknowledge exactly these wildcard actions and resources (ARN tokens allowed) on `scope`."""
    acknowledge_each(scope, [(f"AwsSolutions-IAM5[Action::{action}]", reason) for action in actions])
    if resources:
        scope.node.add_validation(_Deferred(scope, "AwsSolutions-IAM5[Resource::{}]", list(resources), reason))


def acknowledge_cdk_handler(handler: IConstruct, *, reason: str, network: str, managed_policy: bool = True) -> None:
    """A deployment-time Lambda of aws-cdk-lib's own (a singleton it creates and manages): why its findings stand.
    `reason`: what it does; `network`: what it talks to, which is why it needs no place in the estate's VPC;
    `managed_policy`: it runs with aws-cdk-lib's role (AWSLambdaBasicExecutionRole), not one of ours."""
    acknowledge(handler, "AwsSolutions-L1", reason + " The runtime is the one aws-cdk-lib pins for it.")
    if managed_policy:
        acknowledge_managed_policies(handler, ["service-role/AWSLambdaBasicExecutionRole"], reason)
    _acknowledge_deploy_time(handler, reason=reason, network=network)
    ignore_cfn_lint(handler, "W3005", "aws-cdk-lib adds a DependsOn on the handler's role next to the GetAtt")


def acknowledge_own_handler(handler: IConstruct, *, reason: str, network: str) -> None:
    """A deployment-time Lambda of ours behind a custom resource, with its own least-privilege role and log group:
    the compliance packs' Lambda findings that do not fit a function only CloudFormation invokes."""
    _acknowledge_deploy_time(handler, reason=reason, network=network)
    ignore_cfn_lint(handler, "W3005", "aws-cdk-lib adds a DependsOn on the function's role next to the GetAtt")


def _acknowledge_deploy_time(handler: IConstruct, *, reason: str, network: str) -> None:
    acknowledge_each(handler, [
        (f"NIST.800.53.R5-{rule}", f"{reason} {why[0].upper()}{why[1:]}.")
        for rule, why in (("LambdaConcurrency", "CloudFormation invokes it once per deployment of its resources"),
                          ("LambdaDLQ", "CloudFormation invokes it asynchronously with a callback URL (Lambda Developer "
                                        "Guide, \"Using AWS Lambda with CloudFormation\") and the stack operation "
                                        "fails when no success comes back through it; the failure is in the stack's "
                                        "events and the function's log group, and a queued copy of the event would "
                                        "answer an operation already over"),
                          ("LambdaInsideVPC", network))])


# The wildcard action groups CDK's bucket and key grants use.
GRANT_ACTIONS = ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*",
                 "kms:GenerateDataKey*", "kms:ReEncrypt*")


def acknowledge_prefix_grants(scope: IConstruct, *, bucket: Any, prefixes: Sequence[str], reason: str) -> None:
    """Acknowledge CDK's bucket-grant action groups on exactly these prefixes of `bucket` (an s3.IBucket)."""
    acknowledge_wildcards(scope, actions=GRANT_ACTIONS, resources=[bucket.arn_for_objects(p + "*") for p in prefixes],
                          reason=reason)


def acknowledge_managed_policies(scope: IConstruct, names: Sequence[str], reason: str) -> None:
    """Acknowledge AwsSolutions-IAM4 for exactly these AWS managed policies on `scope`."""
    from aws_cdk import aws_iam as iam

    arns = [iam.ManagedPolicy.from_aws_managed_policy_name(n).managed_policy_arn for n in names]
    scope.node.add_validation(_Deferred(scope, "AwsSolutions-IAM4[Policy::{}]", arns, reason))


@jsii.implements(IValidation)
class _Deferred:
    """Writes acknowledgements whose IDs contain resolved tokens, once references are resolved."""

    def __init__(self, scope: IConstruct, template: str, values: list[str], reason: str) -> None:
        self._scope, self._template, self._values, self._reason = scope, template, values, reason

    def validate(self) -> list[str]:
        stack = Stack.of(self._scope)
        acknowledge_each(self._scope, [(self._template.format(flatten(stack.resolve(value))), self._reason)
                                       for value in self._values])
        return []


def flatten(node: Any) -> str:
    """cdk-nag's flattenCfnReference: how a resolved ARN is spelled inside a finding ID."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return delimiter.join(flatten(i) for i in items)
        if "Fn::Sub" in node:
            return flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten(resource)}.{flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))
