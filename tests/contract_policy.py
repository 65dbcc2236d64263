"""Evaluate the synthesized templates' policies the way AWS evaluates one request.

The run-time contract tests ask: when an AWS service (or a node) makes call X with role R, is
it allowed? This module answers from the templates alone, with what the emulator cannot
enforce: key policies, permissions boundaries, bucket and topic policies, and conditions.

It follows the IAM policy evaluation logic (IAM User Guide, "Policy evaluation logic"):
- an explicit Deny in any policy wins;
- within one account, an identity policy OR a resource policy that names the principal allows,
  and a permissions boundary (when the role has one) must allow too;
- KMS is the exception: the key policy must allow, either naming the principal itself or naming
  the account root, which only delegates to IAM policies (AWS KMS Developer Guide, "Default key
  policy": "allows IAM policies to allow access to the KMS key").

Intrinsic functions are resolved against a fake but consistent account: every resource gets a
physical name from its stack and logical ID, exports resolve across stacks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FAKE_ACCOUNT = "111111111111"
PARTITION = "aws"


# ------------------------------------------------------------------ resolving templates

@dataclass(frozen=True)
class Stack:
    name: str  # the CloudFormation stack name (vision-InferenceStack), or a lone estate's stack ID (TrainStack)
    template: dict
    region: str
    account: str
    paths: dict[str, str] = field(default_factory=dict)  # logical ID -> CDK construct path
    deployed_as: str = ""  # the CloudFormation stack name where `name` is the stack ID (huge-TrainStack)

    @property
    def stack_name(self) -> str:
        """The name CloudFormation gives the stack: generated physical names (alarms, ...) start with it."""
        return self.deployed_as or self.name


def metadata_paths(metadata_file) -> dict[str, str]:
    """Logical ID -> construct path, from a stack's cloud-assembly metadata file."""
    import json

    out = {}
    for path, entries in json.loads(metadata_file.read_text()).items():
        for entry in entries:
            if entry.get("type") == "aws:cdk:logicalId":
                out[entry["data"]] = path.lstrip("/")
    return out


class World:
    """A set of synthesized stacks (one estate, or several teams' estates) with names made up for them."""

    def __init__(self, stacks: Sequence[Stack]) -> None:
        self.stacks = {s.name: s for s in stacks}
        self.exports: dict[str, tuple[Stack, Any]] = {}
        for s in stacks:
            for out in s.template.get("Outputs", {}).values():
                if "Export" in out:
                    self.exports[self._resolve(s, out["Export"]["Name"])] = (s, out["Value"])

    # -- physical names

    def _name(self, stack: Stack, logical: str) -> str:
        given = stack.template["Resources"].get(logical, {}).get("Properties", {}).get("StateMachineName")
        if isinstance(given, str):  # a state machine named at synthesis keeps its name
            return given
        return f"{stack.name}-{logical}".lower()[:63]

    def ref(self, stack: Stack, logical: str) -> str:
        pseudo = {"AWS::AccountId": stack.account, "AWS::Region": stack.region, "AWS::Partition": PARTITION,
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack.name, "AWS::NoValue": "",
                  "AWS::StackId": f"arn:{PARTITION}:cloudformation:{stack.region}:{stack.account}:stack/{stack.name}/"
                                  "11111111-2222-3333-4444-555555555555"}
        if logical in pseudo:
            return pseudo[logical]
        resource = stack.template["Resources"].get(logical)
        if resource is None:  # a parameter: its default (CDK's SSM parameter names, bootstrap version)
            return str(stack.template.get("Parameters", {}).get(logical, {}).get("Default", logical))
        kind, props = resource["Type"], resource.get("Properties", {})
        name = self._name(stack, logical)
        arn = self._arn_for(stack, kind, name, props)
        if kind in ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine", "AWS::IAM::ManagedPolicy",
                    "AWS::SageMaker::Endpoint", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Model",
                    "AWS::SageMaker::NotebookInstance") and arn:
            return arn
        if kind == "AWS::KMS::Key":
            return f"key-{name}"
        if kind == "AWS::FSx::FileSystem":
            return "fs-0123456789abcdef0"
        return name

    def _arn_for(self, stack: Stack, kind: str, name: str, props: dict) -> str | None:
        r, a = stack.region, stack.account
        return {
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{a}:role{props.get('Path', '/')}{name}",
            "AWS::IAM::InstanceProfile": f"arn:{PARTITION}:iam::{a}:instance-profile{props.get('Path', '/')}{name}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{r}:{a}:function:{name}",
            "AWS::IAM::ManagedPolicy": f"arn:{PARTITION}:iam::{a}:policy/{name}",
            "AWS::KMS::Key": f"arn:{PARTITION}:kms:{r}:{a}:key/key-{name}",
            "AWS::SNS::Topic": f"arn:{PARTITION}:sns:{r}:{a}:{name}",
            "AWS::StepFunctions::StateMachine": f"arn:{PARTITION}:states:{r}:{a}:stateMachine:{name}",
            "AWS::SageMaker::Model": f"arn:{PARTITION}:sagemaker:{r}:{a}:model/{name}",
            "AWS::SageMaker::Endpoint": f"arn:{PARTITION}:sagemaker:{r}:{a}:endpoint/{name}",
            "AWS::SageMaker::EndpointConfig": f"arn:{PARTITION}:sagemaker:{r}:{a}:endpoint-config/{name}",
            "AWS::SageMaker::NotebookInstance": f"arn:{PARTITION}:sagemaker:{r}:{a}:notebook-instance/{name}",
            "AWS::SageMaker::Cluster": f"arn:{PARTITION}:sagemaker:{r}:{a}:cluster/{name}",
            "AWS::PCS::Cluster": f"arn:{PARTITION}:pcs:{r}:{a}:cluster/{name}",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{r}:{a}:log-group:{name}:*",
        }.get(kind)

    def get_att(self, stack: Stack, logical: str, attr: str) -> str:
        resource = stack.template["Resources"][logical]
        kind, props = resource["Type"], resource.get("Properties", {})
        name = self._name(stack, logical)
        if attr in ("Arn", "TopicArn", "ClusterArn", "StateMachineArn") and self._arn_for(stack, kind, name, props):
            return self._arn_for(stack, kind, name, props)
        if attr in ("TopicName", "Name", "ModelName", "EndpointName", "EndpointConfigName", "NotebookInstanceName",
                    "ClusterName"):
            return name
        if kind == "AWS::KMS::Key" and attr == "KeyId":
            return f"key-{name}"
        return f"{name}.{attr}"

    # -- intrinsics

    def resolve(self, stack_name: str, node: Any) -> Any:
        return self._resolve(self.stacks[stack_name], node)

    def _resolve(self, stack: Stack, node: Any) -> Any:
        if isinstance(node, list):
            return [self._resolve(stack, n) for n in node]
        if not isinstance(node, dict):
            return node
        if len(node) != 1:
            return {k: self._resolve(stack, v) for k, v in node.items()}
        (fn, arg), = node.items()
        if fn == "Ref":
            return self.ref(stack, arg)
        if fn == "Fn::GetAtt":
            logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
            return self.get_att(stack, logical, attr)
        if fn == "Fn::Join":
            sep, parts = arg
            return sep.join(str(p) for p in self._resolve(stack, parts))
        if fn == "Fn::Select":
            index, items = arg
            return self._resolve(stack, items)[int(self._resolve(stack, index))]
        if fn == "Fn::Split":
            sep, text = arg
            return str(self._resolve(stack, text)).split(sep)
        if fn == "Fn::ImportValue":
            source, value = self.exports[self._resolve(stack, arg)]
            return self._resolve(source, value)
        if fn == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            values = {k: self._resolve(stack, v) for k, v in variables.items()}

            def sub(m: re.Match) -> str:
                key = m.group(1)
                if key in values:
                    return str(values[key])
                if "." in key:
                    return self.get_att(stack, *key.split(".", 1))
                return self.ref(stack, key)
            return re.sub(r"\$\{([^}!]+)\}", sub, text)
        if fn == "Fn::Base64":
            return self._resolve(stack, arg)
        return {k: self._resolve(stack, v) for k, v in node.items()}

    # -- finding things

    def find(self, path_suffix: str, kind: str) -> tuple[Stack, str]:
        """The one resource of `kind` whose CDK path ends with `path_suffix` (e.g. 'AsyncModel/Role/Resource')."""
        found = [(s, lid) for s in self.stacks.values() for lid, r in s.template["Resources"].items()
                 if r["Type"] == kind and _path(s, lid, r).endswith(path_suffix)]
        assert len(found) == 1, f"expected one {kind} at */{path_suffix}, found {[f'{s.name}/{l}' for s, l in found]}"
        return found[0]

    def has(self, path_suffix: str, kind: str) -> bool:
        return any(r["Type"] == kind and _path(s, lid, r).endswith(path_suffix)
                   for s in self.stacks.values() for lid, r in s.template["Resources"].items())

    def arn(self, path_suffix: str, kind: str) -> str:
        stack, logical = self.find(path_suffix, kind)
        resource = stack.template["Resources"][logical]
        return self._arn_for(stack, kind, self._name(stack, logical), resource.get("Properties", {})) or ""

    def lookup(self, value: Any) -> tuple[Stack, str] | None:
        """The resource a resolved value names (its Ref, ARN or name, or NAME.Attribute), if it is in the world."""
        if not hasattr(self, "_index"):
            self._index: dict[str, tuple[Stack, str]] = {}
            for s in self.stacks.values():
                for lid, r in s.template["Resources"].items():
                    name = self._name(s, lid)
                    for key in (name, self.ref(s, lid), self._arn_for(s, r["Type"], name, r.get("Properties", {}))):
                        if key:
                            self._index.setdefault(key, (s, lid))
        if not isinstance(value, str):
            return None
        return self._index.get(value) or self._index.get(value.rsplit(".", 1)[0])

    def role(self, path_suffix: str) -> "Principal":
        return self.principal(*self.find(path_suffix, "AWS::IAM::Role"))

    def principal(self, stack: Stack, logical: str) -> "Principal":
        """The role `logical` of `stack` with every policy the estate attaches to it, resolved."""
        props = stack.template["Resources"][logical]["Properties"]
        arn = self._arn_for(stack, "AWS::IAM::Role", self._name(stack, logical), props)
        name = self._name(stack, logical)
        identity = [st for doc in (p["PolicyDocument"] for p in props.get("Policies", [])) for st in _statements(doc)]
        unknown = []
        for s in self.stacks.values():
            for r in s.template["Resources"].values():
                if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                    if name in [self._resolve(s, x) for x in r["Properties"].get("Roles", [])]:
                        identity += _statements(self._resolve(s, r["Properties"]["PolicyDocument"]))
        for managed in self._resolve(stack, props.get("ManagedPolicyArns", [])):
            doc = self._managed_policy(managed)
            if doc is None:
                unknown.append(managed)  # an AWS managed policy: its content is not in the templates
            else:
                identity += doc
        boundary = None
        if "PermissionsBoundary" in props:
            boundary = self._managed_policy(self._resolve(stack, props["PermissionsBoundary"]))
            assert boundary is not None, "the boundary must be a policy of the estate"
        identity = [_resolved(self, stack, st) for st in identity]
        return Principal(arn=arn, account=stack.account, identity=identity, boundary=boundary,
                         unknown_managed_policies=tuple(unknown))

    def policy_holder(self, path_suffix: str, user: str) -> "Principal":
        """A user (or SSO role) with only the managed policy at `path_suffix` attached, e.g. a team's ML users."""
        stack, logical = self.find(path_suffix, "AWS::IAM::ManagedPolicy")
        statements = _statements(self._resolve(stack, stack.template["Resources"][logical]["Properties"]["PolicyDocument"]))
        return Principal(arn=f"arn:{PARTITION}:iam::{stack.account}:user/{user}", account=stack.account,
                         identity=statements)

    def _managed_policy(self, arn: str) -> list[dict] | None:
        for s in self.stacks.values():
            for lid, r in s.template["Resources"].items():
                if r["Type"] == "AWS::IAM::ManagedPolicy" and self.ref(s, lid) == arn:
                    return _statements(self._resolve(s, r["Properties"]["PolicyDocument"]))
        return None

    def resource_policy(self, service: str, resource_arn: str) -> list[dict] | None:
        """The bucket, topic or key policy that governs `resource_arn`, resolved; None when there is none."""
        for s in self.stacks.values():
            for lid, r in s.template["Resources"].items():
                props = r.get("Properties", {})
                if service == "s3" and r["Type"] == "AWS::S3::BucketPolicy":
                    bucket = self._resolve(s, props["Bucket"])
                    if resource_arn.split(":::", 1)[1].split("/", 1)[0] == bucket:
                        return _statements(self._resolve(s, props["PolicyDocument"]))
                if service == "sns" and r["Type"] == "AWS::SNS::TopicPolicy":
                    if resource_arn in self._resolve(s, props["Topics"]):
                        return _statements(self._resolve(s, props["PolicyDocument"]))
                # A role's trust policy is the resource policy of sts:AssumeRole on it (IAM User Guide, "Policy
                # evaluation logic": role trust policies are resource-based policies).
                if service == "sts" and r["Type"] == "AWS::IAM::Role" and self.get_att(s, lid, "Arn") == resource_arn:
                    return _statements(self._resolve(s, props["AssumeRolePolicyDocument"]))
                if service == "kms" and r["Type"] == "AWS::KMS::Key":
                    if self.get_att(s, lid, "Arn") == resource_arn:
                        return _statements(self._resolve(s, props["KeyPolicy"]))
        return None


def _path(stack: Stack, logical: str, resource: dict) -> str:
    return "/" + (stack.paths.get(logical) or resource.get("Metadata", {}).get("aws:cdk:path", ""))


def _statements(doc: Mapping) -> list[dict]:
    st = doc.get("Statement", [])
    return list(st) if isinstance(st, list) else [st]


def _resolved(world: World, stack: Stack, statement: dict) -> dict:
    return world._resolve(stack, statement)


# ------------------------------------------------------------------ evaluating requests

@dataclass(frozen=True)
class Principal:
    arn: str
    account: str
    identity: list[dict]
    boundary: list[dict] | None = None
    service: str | None = None  # a service principal (sns.amazonaws.com), for resource policies
    unknown_managed_policies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Call:
    """One call a service or node makes with a role at run time, and the document that says so."""

    action: str
    resource: str
    source: str
    context: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""

    def __str__(self) -> str:
        return f"{self.action} on {self.resource}" + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _glob(pattern: str, value: str, *, case: bool = True) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    regex = "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"
    return re.match(regex, value, flags=re.DOTALL) is not None


def _action_matches(statement: dict, action: str) -> bool:
    if "NotAction" in statement:
        return not any(_glob(p, action, case=False) for p in _as_list(statement["NotAction"]))
    return any(_glob(p, action, case=False) for p in _as_list(statement.get("Action", [])))


def _resource_matches(statement: dict, resource: str) -> bool:
    if "NotResource" in statement:
        return not any(_glob(p, resource) for p in _as_list(statement["NotResource"]))
    if "Resource" not in statement:  # resource policies may leave it out
        return True
    return any(_glob(str(p), resource) for p in _as_list(statement["Resource"]))


def _principal_match(statement: dict, principal: Principal) -> str | None:
    """'direct' when the statement names the principal (or *), 'root' when it names its account only."""
    spec = statement.get("Principal")
    if spec is None:
        return "direct"  # identity policy
    if spec == "*":
        return "direct"
    for kind, values in spec.items():
        for v in _as_list(values):
            if kind == "AWS":
                if v == "*" or v == principal.arn:
                    return "direct"
                if v in (principal.account, f"arn:{PARTITION}:iam::{principal.account}:root"):
                    return "root"
            if kind == "Service" and principal.service == v:
                return "direct"
    return None


_NEGATED = ("StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike", "NotIpAddress", "NumericNotEquals",
            "StringNotEqualsIgnoreCase")


def _value_test(op: str, wanted: str, actual: str) -> bool:
    base = op.replace("Not", "") if op in _NEGATED else op
    if base in ("StringEquals", "ArnEquals"):
        return wanted == actual
    if base == "StringEqualsIgnoreCase":
        return wanted.lower() == actual.lower()
    if base in ("StringLike", "ArnLike"):
        return _glob(wanted, actual)
    if base == "Bool":
        return wanted.lower() == str(actual).lower()
    if base.startswith("Numeric"):
        w, a = float(wanted), float(actual)
        return {"NumericEquals": a == w, "NumericLessThan": a < w, "NumericLessThanEquals": a <= w,
                "NumericGreaterThan": a > w, "NumericGreaterThanEquals": a >= w}[base]
    raise NotImplementedError(f"condition operator {op}")


def _condition_holds(full_op: str, key: str, wanted: Any, context: Mapping[str, Any]) -> bool:
    qualifier, _, op = full_op.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    actual = next((v for k, v in context.items() if k.lower() == key.lower()), None)
    wanted_values = [str(w) for w in _as_list(wanted)]
    if op == "Null":
        return (actual is None) == (wanted_values[0].lower() == "true")
    if actual is None:  # IAM User Guide, "Condition operators" and "Set operators for multivalued context keys"
        if qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        return if_exists or op in _NEGATED
    actual_values = [str(a) for a in _as_list(actual)]
    negated = op in _NEGATED
    if qualifier == "ForAllValues":
        return all(any(_value_test(op, w, a) for w in wanted_values) != negated for a in actual_values)
    if negated:  # ForAnyValue:StringNotLike and plain negations: some value matches none of the patterns
        return any(not any(_value_test(op, w, a) for w in wanted_values) for a in actual_values)
    return any(_value_test(op, w, a) for w in wanted_values for a in actual_values)


def _conditions_hold(statement: dict, context: Mapping[str, Any]) -> bool:
    return all(_condition_holds(op, key, wanted, context)
               for op, block in statement.get("Condition", {}).items() for key, wanted in block.items())


def _matching(statements: Sequence[dict] | None, principal: Principal, call: Call,
              context: Mapping[str, Any]) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(denies, allows with how the principal matched) among the statements that apply to the call."""
    denies, allows = [], []
    for st in statements or []:
        how = _principal_match(st, principal)
        if how is None or not _action_matches(st, call.action) or not _resource_matches(st, call.resource):
            continue
        if not _conditions_hold(st, context):
            continue
        (denies.append(st) if st.get("Effect") == "Deny" else allows.append((st, how)))
    return denies, allows


def evaluate(principal: Principal, call: Call, world: World) -> Decision:
    service = call.action.split(":", 1)[0]
    context = {"aws:PrincipalArn": principal.arn, "aws:PrincipalAccount": principal.account,
               "aws:SecureTransport": "true", **call.context}
    resource_policy = world.resource_policy(service, call.resource)
    id_deny, id_allow = _matching(principal.identity, principal, call, context)
    rp_deny, rp_allow = _matching(resource_policy, principal, call, context)
    b_deny, b_allow = _matching(principal.boundary, principal, call, context)
    for denies, where in ((id_deny, "identity policy"), (rp_deny, "resource policy"), (b_deny, "boundary")):
        if denies:
            return Decision(False, f"explicit deny in the {where}: {denies[0].get('Sid', denies[0])}")
    if principal.boundary is not None and not b_allow:
        return Decision(False, "the permissions boundary does not allow it")
    if service == "kms":
        if resource_policy is None:
            return Decision(False, "no key policy found for the key")
        if any(how == "direct" for _, how in rp_allow):
            return Decision(True, "the key policy allows the principal")
        if any(how == "root" for _, how in rp_allow):
            if id_allow:
                return Decision(True, "the key policy delegates to IAM and the identity policy allows it")
            return Decision(False, "the key policy only delegates to IAM (account root) and no identity policy allows it")
        return Decision(False, "the key policy does not allow it")
    if id_allow:
        return Decision(True, "the identity policy allows it")
    if any(how == "direct" for _, how in rp_allow):
        return Decision(True, "the resource policy allows the principal")
    return Decision(False, "no policy allows it (implicit deny)")


def s3_kms_context(world_region: str, account: str) -> dict[str, str]:
    """The request context of the KMS calls S3 makes for an SSE-KMS object on a principal's behalf."""
    return {"kms:ViaService": f"s3.{world_region}.amazonaws.com", "kms:CallerAccount": account}
