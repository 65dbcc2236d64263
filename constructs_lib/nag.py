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


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one AwsSolutions finding (`AwsSolutions-SM2`, `AwsSolutions-IAM5[Action::s3:*]`)."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge_wildcards(scope: IConstruct, *, actions: Sequence[str] = (), resources: Sequence[str] = (),
                          reason: str) -> None:
    """Acknowledge exactly these wildcard actions and resources (ARN tokens allowed) on `scope`."""
    for action in actions:
        acknowledge(scope, f"AwsSolutions-IAM5[Action::{action}]", reason)
    if resources:
        scope.node.add_validation(_ResourceAcknowledgements(scope, list(resources), reason))


@jsii.implements(IValidation)
class _ResourceAcknowledgements:
    def __init__(self, scope: IConstruct, resources: list[str], reason: str) -> None:
        self._scope, self._resources, self._reason = scope, resources, reason

    def validate(self) -> list[str]:
        stack = Stack.of(self._scope)
        for resource in self._resources:
            acknowledge(self._scope, f"AwsSolutions-IAM5[Resource::{flatten(stack.resolve(resource))}]", self._reason)
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
