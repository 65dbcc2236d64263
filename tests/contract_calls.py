"""What AWS services (and our nodes) do with our roles at run time, derived from the resources themselves.

The calls come from tests/sources/role_calls.yaml: one row per (resource type or API request, option
used), each naming the document and section that says what the service does with the role. `walk`
visits every resource of a world (and `walk_request` every request our code sends), finds the role
each one hands to a service, and derives the calls from the option values with the row's `derive`
function below. A resource that takes a role, or an option of one, that no row covers is reported,
so the table grows with the templates.

Only what no template or request shows stays written by hand here (`purpose`): what our own software
on the nodes does (train.py reads the datasets and writes checkpoints, the notebook's autostop), and
FSx's service-linked role.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import yaml

from constructs_lib.node_metrics import read_back
from workloads.planning import layout

from .contract_policy import PARTITION, Call, Principal, Stack, World

TABLE = yaml.safe_load((Path(__file__).parent / "sources" / "role_calls.yaml").read_text())
TABLE_FILE = "tests/sources/role_calls.yaml"


def source(key: str) -> str:
    s = TABLE["sources"][key]
    return f"{s['title']}, '{s['section']}' {s['url']}"


# ------------------------------------------------------------------ what a walk finds

@dataclass(frozen=True)
class Found:
    """One call a service makes with a role (or, for `denied`, one outside the role's purpose)."""

    where: str  # stack/logical (type) option
    role: str  # the role's ARN
    principal: Principal
    call: Call
    denied: bool = False


@dataclass
class Walk:
    found: list[Found] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)  # types and options with no row
    problems: list[str] = field(default_factory=list)  # a row's requirement that is not a call (managed policies)

    def extend(self, other: "Walk") -> None:
        self.found += other.found
        self.uncovered += other.uncovered
        self.problems += other.problems


# ------------------------------------------------------------------ paths into properties

def leaves(node: Any, path: str = ""):
    """(path, value) of every leaf: dict keys joined with '.', list items with '[]'."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list) and any(isinstance(x, dict) for x in node):
        for x in node:
            yield from leaves(x, path + "[]")
    else:
        yield path, node


def at(node: Any, path: str) -> list[tuple[Any, dict]]:
    """The values at `path` (with '[]' steps), each with the mapping that holds it."""
    out = [(node, {})]
    for step in re.findall(r"[^.\[\]]+(?:\[\])?", path):
        key, many = step.removesuffix("[]"), step.endswith("[]")
        nxt = []
        for value, _ in out:
            if isinstance(value, dict) and key in value:
                items = value[key] if many else [value[key]]
                nxt += [(item, value) for item in (items if isinstance(items, list) else [items])]
        out = nxt
    return out


def rule_for(options: dict, path: str) -> str | None:
    """The longest option key that covers `path` (the path itself, or a path above it)."""
    best = None
    for key in options:
        if path == key or path.startswith(key + ".") or path.startswith(key + "[]"):
            if best is None or len(key) > len(best):
                best = key
    return best


# ------------------------------------------------------------------ the estate a call is made in

class Ctx:
    """The world, the resource being read and the role acting, for the derive functions."""

    def __init__(self, world: World, stack: Stack, props: dict, role_arn: str, principal: Principal,
                 where: str, walk: Walk) -> None:
        self.world, self.stack, self.props, self.role_arn, self.principal = world, stack, props, role_arn, principal
        self.where, self.walk = where, walk
        self.region, self.account = stack.region, stack.account

    def resource(self, value: Any) -> tuple[Stack, str, dict] | None:
        found = self.world.lookup(value)
        if found is None:
            return None
        s, lid = found
        r = s.template["Resources"][lid]
        return s, lid, r

    def props_of(self, value: Any) -> dict:
        s, lid, r = self.resource(value)
        return self.world.resolve(s.name, r.get("Properties", {}))

    def key_arn(self, key: str | None) -> str | None:
        """A KmsKeyId as the key's ARN (our templates pass an ARN or a key ID)."""
        if not key:
            return None
        if key.startswith("arn:"):
            return key
        return f"arn:{PARTITION}:kms:{self.region}:{self.account}:key/{key}"

    def bucket_key(self, bucket: str) -> str | None:
        """The bucket's default KMS key (SSE-KMS), None for SSE-S3 or a bucket outside the world."""
        found = self.resource(bucket)
        if found is None or found[2]["Type"] != "AWS::S3::Bucket":
            return None
        rules = self.props_of(bucket).get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        for rule in rules:
            default = rule.get("ServerSideEncryptionByDefault", {})
            if default.get("SSEAlgorithm") == "aws:kms" and default.get("KMSMasterKeyID"):
                return self.key_arn(default["KMSMasterKeyID"])
        return None

    def via(self, service: str) -> dict:
        return {"kms:ViaService": f"{service}.{self.region}.amazonaws.com", "kms:CallerAccount": self.account}


def _s3(uri: str) -> tuple[str, str]:
    u = urlparse(uri)
    return u.netloc, u.path.lstrip("/")


def _obj(bucket: str, key: str) -> str:
    return f"arn:{PARTITION}:s3:::{bucket}/{key}"


# ------------------------------------------------------------------ derive: option value -> calls
# Each returns (allowed, denied): the calls the document says the service makes, and the calls just outside
# them that the role must not be able to make (`deny:` in the row names which).

Derived = tuple[list[Call], list[Call]]


def _reads(ctx: Ctx, rule: dict, doc: str, bucket: str, prefix: str, obj: str, listing: bool) -> Derived:
    allowed = [Call("s3:GetObject", _obj(bucket, obj), doc)]
    if listing:
        allowed.append(Call("s3:ListBucket", f"arn:{PARTITION}:s3:::{bucket}", doc, {"s3:prefix": prefix},
                            why=f"prefix {prefix}"))
    key = ctx.bucket_key(bucket)
    if key and "kms:Decrypt" in rule["actions"]:
        allowed.append(Call("kms:Decrypt", key, source("sse-kms"), ctx.via("s3"), why="S3 on the role's behalf"))
    denied = []
    # processed/ is written by the prepare Processing job under the same role (workloads/commands/prepare_job.py):
    # a training job's channel there is read by the job and rewritten only by the prepare step before it
    if "no_rewrite" in rule.get("deny", ()) and not obj.startswith(layout.PROCESSED):
        denied += [Call(a, _obj(bucket, obj), doc, why="it reads this, it never rewrites or deletes it")
                   for a in ("s3:PutObject", "s3:DeleteObject")]
    if "only_this" in rule.get("deny", ()):
        stem = prefix.rstrip("/") if listing else obj.rsplit(".tar.gz", 1)[0]
        for other in (f"{stem}2/part-0000", f"{stem}.tar.gz" if listing else f"{stem}2.tar.gz"):
            denied.append(Call("s3:GetObject", _obj(bucket, other), doc, why="only its own artifact"))
        if listing:
            denied.append(Call("s3:ListBucket", f"arn:{PARTITION}:s3:::{bucket}", doc, {"s3:prefix": f"{stem}2/"},
                               why="only its own artifact's prefix"))
    return allowed, denied


def read_object(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    bucket, key = _s3(value)
    return _reads(ctx, rule, doc, bucket, key, key, listing=False)


def read_prefix(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    uri = value["S3Uri"] if isinstance(value, dict) else value
    bucket, prefix = _s3(uri)
    name = holder.get(rule["object"]) if "object" in rule else "part-0000"
    obj = prefix.rstrip("/") + "/" + name if prefix else name
    return _reads(ctx, rule, doc, bucket, prefix, obj, listing=True)


def write_prefix(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    bucket, prefix = _s3(value)
    obj = prefix.rstrip("/") + "/result-1.out"
    allowed = [Call("s3:PutObject", _obj(bucket, obj), doc)]
    keys = [v for v, _ in at(ctx.props, rule["key"])] if "key" in rule else []
    key = ctx.key_arn(keys[0]) if keys else ctx.bucket_key(bucket)
    if key:
        allowed.append(Call("kms:GenerateDataKey", key, source("sse-kms"), ctx.via("s3"), why="S3 on the role's behalf"))
    return allowed, []


def read_write_prefix(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    written, _ = write_prefix(ctx, rule, value, holder, doc)
    read, _ = read_prefix(ctx, {**rule, "deny": []}, value, holder, doc)
    return written + read, []


def kms_encrypt(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return [Call("kms:Encrypt", ctx.key_arn(value), doc, ctx.via("s3"))], []


def volume_grant(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    key = ctx.key_arn(value)
    ours = {"kms:GrantIsForAWSResource": "true", "kms:CallerAccount": ctx.account}
    return ([Call("kms:CreateGrant", key, doc, ours, why="EBS attaches the encrypted volume")],
            [Call("kms:CreateGrant", key, source("kms-grant-for-aws-resource"),
                  {**ours, "kms:GrantIsForAWSResource": "false"}, why="grants for AWS resources only")])


def vpc(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """SageMaker makes network interfaces in our subnets as the role; resources and the ec2:Vpc key as EC2
    evaluates them (Service Authorization Reference, Amazon EC2)."""
    if isinstance(value, dict):
        subnets, groups = value.get("Subnets", []), value.get("SecurityGroupIds", [])
    else:
        subnets, groups = [value], holder.get(rule.get("groups", ""), [])

    def arn(kind: str, rid: str) -> str:
        return f"arn:{PARTITION}:ec2:{ctx.region}:{ctx.account}:{kind}/{rid}"

    allowed, denied = [], []
    eni = arn("network-interface", "eni-0123456789abcdef0")
    for subnet in subnets:
        vpc_id = ctx.props_of(subnet)["VpcId"] if ctx.resource(subnet) else "vpc-unknown"
        ours = {"ec2:Vpc": arn("vpc", vpc_id)}
        for action in rule["actions"]:
            if action.startswith("ec2:Describe"):
                allowed.append(Call(action, "*", doc))
            elif action == "ec2:CreateNetworkInterface":
                allowed += [Call(action, r, doc, ours) for r in
                            (arn("subnet", subnet), *(arn("security-group", g) for g in groups), eni)]
            else:
                allowed.append(Call(action, eni, doc, ours))
        theirs = {"ec2:Vpc": arn("vpc", "vpc-0ther")}
        denied += [Call("ec2:CreateNetworkInterface", arn("subnet", "subnet-0ther"), doc, theirs, why="only our subnets"),
                   Call("ec2:DeleteNetworkInterface", eni, doc, theirs, why="only interfaces in our VPC")]
    return allowed, denied


def image_pull(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    # Parsed here rather than with sagemaker_access.image_repository_arn: a contract must not share the code it checks.
    registry, _, rest = value.partition("/")
    account, region = registry.split(".")[0], registry.split(".")[3]
    repo = rest.split("@")[0].split(":")[0]

    def arn(acct: str, name: str) -> str:
        return f"arn:{PARTITION}:ecr:{region}:{acct}:repository/{name}"

    allowed = [Call(a, "*" if a == "ecr:GetAuthorizationToken" else arn(account, repo), doc) for a in rule["actions"]]
    denied = [Call("ecr:BatchGetImage", arn("999999999999", repo), doc, why="the image's own registry account only"),
              Call("ecr:BatchGetImage", arn(account, repo + "-other"), doc, why="the image's own repository only")]
    return allowed, denied


def sns_publish(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    allowed = [Call("sns:Publish", value, doc)]
    key = ctx.key_arn(ctx.props_of(value).get("KmsMasterKeyId")) if ctx.resource(value) else None
    if key:
        allowed += [Call(a, key, source("sns-sse"), ctx.via("sns"), why="SNS on the role's behalf")
                    for a in ("kms:GenerateDataKey", "kms:Decrypt")]
    return allowed, []


def async_input(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """The request object `python -m workloads invoke` uploads (workloads/commands/invoke.py), in the bucket of the outputs."""
    bucket, _ = _s3(value["OutputConfig"]["S3OutputPath"])
    return _reads(ctx, rule, doc, bucket, layout.ASYNC_INPUT, layout.ASYNC_INPUT + "request-1.json", listing=False)


def logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return _log_calls(ctx, rule["actions"], rule["group"], doc), []


def _log_calls(ctx: Ctx, actions: list[str], group: str, doc: str) -> list[Call]:
    base = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:{group}"
    return [Call(a, f"{base}:log-stream:run-1" if a in ("logs:CreateLogStream", "logs:PutLogEvents") else f"{base}:*",
                 doc) for a in actions]


def job_logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """A job writes its container's logs as its role to the kind's shared group, in streams named JOB-NAME/...:
    its own streams, never another job's (another team's) there, nor another group."""
    name = _job_name(value) if isinstance(value, str) else str(value)
    base = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:{rule['group']}"
    allowed = [Call(a, f"{base}:log-stream:{name}/algo-1-1700000000", doc) for a in rule["actions"]]
    denied = [Call(a, f"{base}:log-stream:someone-else-{name}/algo-1-1700000000", doc, why="another job's stream")
              for a in rule["actions"]]
    denied += [Call(a, f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:/aws/sagemaker/Endpoints/"
                       f"someone-else:log-stream:AllTraffic/i-0", doc, why="another team's endpoint logs")
               for a in rule["actions"]]
    return allowed, denied


def notebook_logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """SageMaker writes a notebook's lifecycle scripts' output as its role to /aws/sagemaker/NotebookInstances, in
    streams NOTEBOOK-NAME/HOOK: its own streams, never another notebook's (another team's) there."""
    name = ctx.world.resolve(ctx.stack.name, ctx.props["NotebookInstanceName"])
    base = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:{rule['group']}"
    allowed = [Call(a, f"{base}:log-stream:{name}/{hook}", doc) for a in rule["actions"]
               for hook in ("LifecycleConfigOnCreate", "LifecycleConfigOnStart")]
    denied = [Call(a, f"{base}:log-stream:someone-else-{name}/LifecycleConfigOnStart", doc,
                   why="another notebook's stream") for a in rule["actions"]]
    return allowed, denied


def endpoint_logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """A model writes the container logs of every endpoint that serves it, as its role, to
    /aws/sagemaker/Endpoints/ENDPOINT-NAME (streams VARIANT/INSTANCE-ID): those groups only."""
    me = ctx.world.lookup(ctx.role_arn)
    allowed, names = [], []
    for s in ctx.world.stacks.values():
        for lid, r in s.template["Resources"].items():
            if r["Type"] != "AWS::SageMaker::Endpoint":
                continue
            config = ctx.props_of(ctx.world.resolve(s.name, r["Properties"]["EndpointConfigName"]))
            models = [ctx.world.lookup(v["ModelName"]) for v in config.get("ProductionVariants", []) if "ModelName" in v]
            roles = [ctx.world.lookup(ctx.world.resolve(m[0].name, m[0].template["Resources"][m[1]]["Properties"]
                                                        ["ExecutionRoleArn"])) for m in models if m]
            if "ExecutionRoleArn" in config:  # an endpoint of inference components: its config names the role
                roles.append(ctx.world.lookup(config["ExecutionRoleArn"]))
            if me in roles:
                names.append(ctx.world.resolve(s.name, r["Properties"]["EndpointName"]))
    for name in names:
        base = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:/aws/sagemaker/Endpoints/{name}"
        allowed += [Call(a, f"{base}:log-stream:AllTraffic/i-0123456789abcdef0", doc) for a in rule["actions"]]
    other = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:"
    denied = [Call(a, f"{other}/aws/sagemaker/Endpoints/someone-else:log-stream:AllTraffic/i-0", doc,
                   why="another endpoint's (another team's) logs") for a in rule["actions"]]
    denied += [Call(a, f"{other}/aws/sagemaker/TrainingJobs:log-stream:someone-else/algo-1-1700000000", doc,
                    why="a training job's logs") for a in rule["actions"]]
    return allowed, denied


def cluster_logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """HyperPod's nodes log as their role to /aws/sagemaker/Clusters/NAME/ID: that cluster's groups only."""
    base = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:/aws/sagemaker/Clusters"
    allowed = [Call(a, f"{base}/{ctx.props['ClusterName']}/abcdef123456:log-stream:LifecycleConfig/controller/i-0",
                    doc) for a in rule["actions"]]
    denied = [Call(a, f"{base}/someone-else/abcdef123456:log-stream:LifecycleConfig/controller/i-0", doc,
                   why="another cluster's (another team's) logs") for a in rule["actions"]]
    return allowed, denied


def log_group(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return _log_calls(ctx, rule["actions"], value, doc), []


def function_logs(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    logical = ctx.where.split(" ")[0].split("/", 1)[1]
    group = ctx.props.get("LoggingConfig", {}).get("LogGroup") or \
        f"/aws/lambda/{ctx.props.get('FunctionName') or ctx.world._name(ctx.stack, logical)}"
    return _log_calls(ctx, rule["actions"], group, doc), []


def metrics(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return [Call("cloudwatch:PutMetricData", "*", doc, {"cloudwatch:namespace": rule["namespace"]})], []


def anywhere(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return [Call(a, "*", doc) for a in rule["actions"]], []


def pcs_register(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    s, lid, r = ctx.resource(value)
    cluster = ctx.world.get_att(s, lid, "Arn")
    other = f"arn:{PARTITION}:pcs:{ctx.region}:{ctx.account}:cluster/pcs_someone_else"
    return ([Call(a, cluster, doc) for a in rule["actions"]],
            [Call(a, other, doc, why="only its own cluster") for a in rule["actions"]])


def start_execution(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    if ":states:" not in value or ":stateMachine:" not in value:
        ctx.walk.uncovered.append(f"{ctx.where}: Target.Arn {value} is not a state machine; add a row")
        return [], []
    other = f"arn:{PARTITION}:states:{ctx.region}:{ctx.account}:stateMachine:someone-elses"
    return ([Call("states:StartExecution", value, doc)],
            [Call("states:StartExecution", other, doc, why="only its own state machine")])


def security_group(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    arn = f"arn:{PARTITION}:ec2:{ctx.region}:{ctx.account}:security-group/{value}"
    return [Call(a, arn, doc) for a in rule["actions"]], []


def deployment_sources(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    return [Call("s3:GetObject", _obj(b, k), doc) for b, k in zip(value, holder["SourceObjectKeys"])], []


def artifact_heads(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """HeadObject on each checked object (authorized by s3:GetObject); any other object of the bucket is refused."""
    bucket = holder["Bucket"]
    return [Call(a, _obj(bucket, item["Key"]), doc) for item in value for a in rule["actions"]], \
        [Call("s3:GetObject", _obj(bucket, "datasets/part-0000"), doc)]


def deployment_destination(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    prefix = holder.get("DestinationBucketKeyPrefix", "")
    return write_prefix(ctx, rule, f"s3://{value}/{prefix}", holder, doc)


def sdk_call(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    call = json.loads(value)
    prefix = TABLE["sdk_services"].get(call["service"])
    if prefix is None:
        ctx.walk.uncovered.append(f"{ctx.where}: AwsCustomResource service {call['service']} has no entry in "
                                  f"{TABLE_FILE} sdk_services")
        return [], []
    group = call.get("parameters", {}).get("logGroupName")
    resource = f"arn:{PARTITION}:logs:{ctx.region}:{ctx.account}:log-group:{group}:*" if prefix == "logs" and group else "*"
    return [Call(f"{prefix}:{call['action']}", resource, doc)], []


def bake_instance(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """The build instance: the SSM Agent registers and takes Image Builder's commands, AWSTOE reads the recipe's
    components and its own binary; no SSM parameter of the account, no other bake's log group."""
    arn = f"arn:{PARTITION}"
    where = f"{ctx.region}:{ctx.account}"
    allowed = [Call("ssm:UpdateInstanceInformation", f"{arn}:ec2:{where}:instance/i-0123456789abcdef0", doc),
               *(Call(a, "*", doc) for a in ("ssmmessages:CreateControlChannel", "ssmmessages:OpenControlChannel",
                                             "ec2messages:GetMessages", "ec2messages:SendReply")),
               Call("imagebuilder:GetComponent", f"{arn}:imagebuilder:{where}:component/node/1.0.0/1", doc),
               Call("s3:GetObject", f"{arn}:s3:::ec2imagebuilder-toe-{ctx.region}-prod/linux/amd64/awstoe", doc)]
    denied = [Call("ssm:GetParameter", f"{arn}:ssm:{where}:parameter/any", doc, why="no account-wide SSM reads"),
              Call("logs:PutLogEvents", f"{arn}:logs:{where}:log-group:/aws/imagebuilder/another:log-stream:x", doc,
                   why="another bake's log group")]
    return allowed, denied


def managed_policies(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    attached = [a.rsplit("/", 1)[-1] for a in ctx.principal.unknown_managed_policies]
    for name in rule["policies"]:
        if name not in attached:
            ctx.walk.problems.append(f"{ctx.where}: the role {ctx.role_arn} lacks the managed policy {name} "
                                     f"(per {doc})")
    return [], []


def state_machine(ctx: Ctx, rule: dict, value: Any, holder: dict, doc: str) -> Derived:
    """Each Task state's integration is a request row: the state machine's role makes the integration's calls,
    and the job's own options act with the role the request names (a transform job: the model's)."""
    allowed, denied = [], []
    for state_name, state in json.loads(value).get("States", {}).items():
        if state.get("Type") != "Task":
            continue
        integration = "states:" + state["Resource"].split(":::", 1)[-1]
        request = TABLE["requests"].get(integration)
        if request is None:
            ctx.walk.uncovered.append(f"{ctx.where}: state {state_name} integration {state['Resource']} has no row")
            continue
        params = state.get("Parameters", {})
        name = _job_name(params.get("TransformJobName.$", params.get("TransformJobName", "job")))
        job = f"arn:{PARTITION}:sagemaker:{ctx.region}:{ctx.account}:transform-job/{name}"
        rule_arn = f"arn:{PARTITION}:events:{ctx.region}:{ctx.account}:rule/StepFunctionsGetEventsForSageMakerTransformJobsRule"
        caller = source(request["caller_source"])
        model = ctx.resource(params["ModelName"])
        s, lid, _ = model
        # CreateTransformJob carries the model it names as sagemaker:ModelArn (the service authorization reference).
        model_arn = ctx.world.ref(s, lid)
        create = {"sagemaker:InstanceTypes": [params.get("TransformResources", {}).get("InstanceType", "")],
                  "sagemaker:ModelArn": model_arn}
        for action in request["caller"]:
            allowed.append(Call(action, rule_arn if action.startswith("events:") else job, caller,
                                create if action == "sagemaker:CreateTransformJob" else {}))
        denied.append(Call("sagemaker:CreateTrainingJob", job.replace("transform-job", "training-job"), caller,
                           why="it only runs its own kind of job"))
        other = model_arn.rsplit("/", 1)[0] + "/someone-elses-model"
        denied.append(Call("sagemaker:CreateTransformJob", job, caller, {**create, "sagemaker:ModelArn": other},
                           why="it transforms with the estate's model only"))
        role_arn = ctx.world.resolve(s.name, s.template["Resources"][lid]["Properties"]["ExecutionRoleArn"])
        ctx.walk.extend(walk_request(ctx.world, ctx.stack, integration, params, role_arn,
                                     where=f"{ctx.where} state {state_name}"))
    return allowed, denied


def _job_name(expr: str) -> str:
    """States.Format('{}-{}', 'batch', $$.Execution.Name) -> batch-execution-1 (the name of one execution)."""
    m = re.match(r"States\.Format\('([^']*)'(.*)\)$", expr)
    if not m:
        return expr
    args = [a.strip() for a in m.group(2).split(",") if a.strip()]
    values = [a.strip("'") if a.startswith("'") else "execution-1" for a in args]
    return m.group(1).replace("{}", "%s") % tuple(values)


DERIVE: dict[str, Callable[..., Derived]] = {f.__name__: f for f in (
    read_object, read_prefix, write_prefix, read_write_prefix, kms_encrypt, volume_grant, vpc, image_pull,
    sns_publish, async_input, logs, job_logs, notebook_logs, endpoint_logs, cluster_logs, log_group, function_logs, metrics, anywhere, pcs_register, start_execution,
    security_group, deployment_sources, deployment_destination, sdk_call, artifact_heads, managed_policies, state_machine,
    bake_instance)}


# ------------------------------------------------------------------ finding the role a resource hands over

_ROLE_HOLDERS = ("AWS::IAM::Role", "AWS::IAM::InstanceProfile")


class Roles:
    """Principals by role ARN, built once per world (with the documented content of AWS managed policies)."""

    def __init__(self, world: World) -> None:
        self.world, self.cache = world, {}

    def __call__(self, role_arn: str) -> Principal | None:
        if role_arn not in self.cache:
            found = self.world.lookup(role_arn)
            if found is None or found[0].template["Resources"][found[1]]["Type"] != "AWS::IAM::Role":
                self.cache[role_arn] = None
            else:
                p = self.world.principal(*found)
                known = TABLE["managed_policies"]
                extra = [st for arn in p.unknown_managed_policies if arn.rsplit("/", 1)[-1] in known
                         for st in known[arn.rsplit("/", 1)[-1]]["statements"]]
                self.cache[role_arn] = Principal(arn=p.arn, account=p.account, identity=p.identity + extra,
                                                 boundary=p.boundary, unknown_managed_policies=p.unknown_managed_policies)
        return self.cache[role_arn]


def _roles_of(world: World, stack: Stack, spec: Any, props: dict) -> list[str] | None:
    """The role ARNs a resource hands to its service, per the row's `role`; None when it hands none."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return sorted({v for v, _ in at(props, spec)})
    if "any" in spec:  # whichever of several the resource uses (an endpoint config's own role, or its models')
        return sorted({r for one in spec["any"] for r in (_roles_of(world, stack, one, props) or [])})
    if "via" in spec:
        out = set()
        for name, _ in at(props, spec["via"]):
            s, lid = world.lookup(name)
            out.add(world.resolve(s.name, s.template["Resources"][lid]["Properties"][spec["property"]]))
        return sorted(out)
    if "instance_profile" in spec:
        s, lid = world.lookup(props[spec["instance_profile"]])
        return [world.get_att(*world.lookup(world.resolve(s.name, r)), "Arn")
                for r in s.template["Resources"][lid]["Properties"]["Roles"]]
    if "service_token" in spec:
        s, lid = world.lookup(props[spec["service_token"]])
        return [world.resolve(s.name, s.template["Resources"][lid]["Properties"]["Role"])]
    if "service_linked" in spec:
        return []
    raise AssertionError(f"unknown role spec {spec}")


def _mentions_role(world: World, stack: Stack, node: Any) -> bool:
    """Whether raw properties refer to a role or instance profile (by Ref, GetAtt, import or a literal ARN)."""
    text = json.dumps(node)
    if ":role/" in text or ":instance-profile/" in text:
        return True
    resources = stack.template["Resources"]
    for ref in re.findall(r'"Ref": "([^"]+)"', text) + re.findall(r'"Fn::GetAtt": \["([^"]+)"', text):
        if resources.get(ref, {}).get("Type") in _ROLE_HOLDERS:
            return True
    for name in re.findall(r'"Fn::ImportValue": "([^"]+)"', text):
        if name in world.exports and _mentions_role(world, *world.exports[name]):
            return True
    return False


def _apply(world: World, stack: Stack, kind: str, row: dict, props: dict, role_arns: list[str], where: str,
           roles: Roles) -> Walk:
    """Every option of one resource (or request) against its row: calls for the covered, a report for the rest."""
    walk = Walk()
    options = row.get("options", {})
    for path, _ in leaves(props):
        if path and rule_for(options, path) is None:
            walk.uncovered.append(f"{kind}: option {path} ({where}) has no row in {TABLE_FILE}")
    for role_arn in role_arns:
        principal = roles(role_arn)
        if principal is None:
            walk.problems.append(f"{where}: the role {role_arn} is not a role of the estate")
            continue
        ctx = Ctx(world, stack, props, role_arn, principal, where, walk)
        rules = [(None, r, None, None) for r in row.get("always", [])]
        rules += [(key, r, v, h) for key, r in options.items() if "derive" in r for v, h in at(props, key)]
        for key, rule, value, holder in rules:
            doc = source(rule["source"])
            allowed, denied = DERIVE[rule["derive"]](ctx, rule, value, holder, doc)
            label = f"{where} {key or '(always)'}"
            walk.found += [Found(label, role_arn, principal, c) for c in allowed]
            walk.found += [Found(label, role_arn, principal, c, denied=True) for c in denied]
    return walk


def walk(world: World, roles: Roles | None = None) -> Walk:
    """Every resource of every stack in the world."""
    roles = roles or Roles(world)
    out = Walk()
    plumbing = set(TABLE["plumbing"]["types"])
    for stack in world.stacks.values():
        for logical, resource in stack.template["Resources"].items():
            kind, raw = resource["Type"], resource.get("Properties", {})
            where = f"{stack.name}/{logical} ({kind})"
            if kind in plumbing:
                continue
            row = TABLE["types"].get(kind)
            if row is None:
                if _mentions_role(world, stack, raw) or (kind.startswith("Custom::") and "ServiceToken" in raw):
                    out.uncovered.append(f"{kind}: takes a role ({where}) but has no row in {TABLE_FILE}")
                continue
            props = world.resolve(stack.name, raw)
            role_arns = _roles_of(world, stack, row.get("role"), props)
            if role_arns is None:
                continue
            out.extend(_apply(world, stack, kind, row, props, role_arns, where, roles))
    return out


def walk_request(world: World, stack: Stack, request: str, params: dict, role_arn: str | None = None, *,
                 where: str = "", roles: Roles | None = None) -> Walk:
    """One API request (CreateTrainingJob as `submit` sends it) against its row, with the role it names."""
    row = TABLE["requests"].get(request)
    if row is None:
        return Walk(uncovered=[f"{request}: request has no row in {TABLE_FILE}"])
    role_arn = role_arn or params[row["role"]]
    return _apply(world, stack, request, row, params, [role_arn], where or request, roles or Roles(world))


# ------------------------------------------------------------------ purpose: what no template shows

@dataclass(frozen=True)
class Contract:
    name: str
    principal: Principal
    allowed: list[Call]
    denied: list[Call] = field(default_factory=list)


FSX_S3_ROLE = ("role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
               "AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0")
NODE_DOC = ("examples/slurm/train.py on the nodes: reads the datasets, writes and reads checkpoints under "
            "CHECKPOINT_DIR and the model under output/ (workloads/planning/layout.py, the FSx links); "
            "SageMaker Developer Guide, 'Amazon SageMaker HyperPod' and AWS PCS User Guide, 'IAM instance profiles' "
            "https://docs.aws.amazon.com/pcs/latest/userguide/security-instance-profiles.html")
SSM_DOC = ("AWS Systems Manager User Guide, AmazonSSMManagedInstanceCore (agent registration and sessions) "
           "https://docs.aws.amazon.com/systems-manager/latest/userguide/setup-instance-permissions.html")
METRICS_DOC = ("constructs_lib/node_metrics.py on the compute nodes: the CloudWatch agent and Neuron's monitor publish "
               "with the node role; CloudWatch User Guide, 'Using condition keys to limit access to CloudWatch "
               "namespaces' https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/iam-cw-condition-keys-namespace.html")
AUTOSTOP_DOC = ("SageMaker Developer Guide, 'Customize a notebook instance using a lifecycle configuration script' "
                "(our autostop script calls sagemaker:DescribeNotebookInstance and StopNotebookInstance on itself) "
                "https://docs.aws.amazon.com/sagemaker/latest/dg/notebook-lifecycle-config.html")
FSX_DOC = ("FSx for Lustre User Guide, 'Working with server-side encrypted Amazon S3 buckets': the file system's "
           "S3 service-linked role must be allowed kms:Decrypt and kms:GenerateDataKey (via S3) in the key policy "
           "https://docs.aws.amazon.com/fsx/latest/LustreGuide/s3-server-side-encryption-support.html")


class Estate:
    """One estate (an unstamped app, or one team's stage) inside a world."""

    def __init__(self, world: World, scope: str = "") -> None:
        self.world, self.scope = world, scope
        stack, _ = world.find(f"{scope}DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
        self.region, self.account = stack.region, stack.account
        self.bucket_arn = world.arn(f"{scope}DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
        self.key_arn = world.arn(f"{scope}DataStack/DataKey/Key/Resource", "AWS::KMS::Key")

    def has(self, path: str, kind: str) -> bool:
        return self.world.has(self.scope + path, kind)

    def props(self, path: str, kind: str) -> dict:
        stack, logical = self.world.find(self.scope + path, kind)
        return self.world.resolve(stack.name, stack.template["Resources"][logical].get("Properties", {}))

    def obj(self, key: str) -> str:
        return f"{self.bucket_arn}/{key}"

    def s3_kms(self, action: str) -> Call:
        return Call(action, self.key_arn, source("sse-kms"),
                    {"kms:ViaService": f"s3.{self.region}.amazonaws.com", "kms:CallerAccount": self.account},
                    why="S3 on the role's behalf (SSE-KMS)")

    def read(self, key: str, doc: str) -> list[Call]:
        return [Call("s3:GetObject", self.obj(key), doc), self.s3_kms("kms:Decrypt")]

    def write(self, key: str, doc: str) -> list[Call]:
        return [Call("s3:PutObject", self.obj(key), doc), self.s3_kms("kms:GenerateDataKey")]

    def list_prefix(self, prefix: str, doc: str) -> Call:
        return Call("s3:ListBucket", self.bucket_arn, doc, {"s3:prefix": prefix}, why=f"prefix {prefix}")


def _data_calls(e: Estate) -> list[Call]:
    return [e.list_prefix(layout.DATASETS, NODE_DOC), *e.read(layout.DATASETS + "train/part-0000", NODE_DOC),
            *e.write(layout.CHECKPOINTS + "step-100/rank-0.pt", NODE_DOC),
            *e.read(layout.CHECKPOINTS + "step-100/rank-0.pt", NODE_DOC), *e.write(layout.OUTPUT + "model.tar.gz", NODE_DOC)]


def _no_rewrite_calls(e: Estate) -> list[Call]:
    return [Call("s3:PutObject", e.obj(layout.DATASETS + "train/part-0000"), NODE_DOC,
                 why="the bucket holds the dataset of record: training reads it, never rewrites it"),
            Call("s3:DeleteObject", e.obj(layout.DATASETS + "train/part-0000"), NODE_DOC, why="no dataset deletes")]


def hyperpod_nodes(e: Estate) -> Contract | None:
    """HyperPod copies the whole lifecycle prefix to the node: the plan's files beside the script are read too;
    our training on the nodes reads and writes the bucket."""
    if not e.has("TrainStack/HyperPod/Cluster", "AWS::SageMaker::Cluster"):
        return None
    group = e.props("TrainStack/HyperPod/Cluster", "AWS::SageMaker::Cluster")["InstanceGroups"][0]
    scripts = group["LifeCycleConfig"]["SourceS3Uri"].rstrip("/")
    bucket, prefix = _s3(scripts)
    beside = [f"{prefix}/{name}" for name in ("install-framework.sh", "layout.json")]
    allowed = [c for key in beside for c in (Call("s3:GetObject", _obj(bucket, key), NODE_DOC),)]
    denied = [Call("s3:PutObject", _obj(bucket, beside[0]), NODE_DOC,
                   why="the framework install runs as root on every accelerated node")]
    return Contract("HyperPod nodes (our software)", e.world.role(e.scope + "TrainStack/TrainingRole/Role/Resource"),
                    allowed, denied)


def pcs_nodes(e: Estate) -> Contract | None:
    if not e.has("TrainStack/Slurm/Cluster", "AWS::PCS::Cluster"):
        return None
    # The SSM Agent registers as the EC2 instance it runs on (ssm:UpdateInstanceInformation's `instance` resource
    # type, Service Authorization Reference for AWS Systems Manager), never as a hybrid managed instance.
    where = f"arn:{PARTITION}:{{}}:{e.region}:{e.account}"
    registers = Call("ssm:UpdateInstanceInformation", where.format("ec2") + ":instance/i-0123456789abcdef0", SSM_DOC)
    hybrid = Call("ssm:UpdateInstanceInformation", where.format("ssm") + ":managed-instance/mi-0123456789abcdef0",
                  SSM_DOC, why="an EC2 node registers as its own instance, not as a hybrid managed instance")
    allowed = [registers, Call("ssmmessages:CreateControlChannel", "*", SSM_DOC),
               Call("ec2messages:GetMessages", "*", SSM_DOC), *_data_calls(e)]
    return Contract("PCS nodes (our software)", e.world.role(e.scope + "TrainStack/TrainingRole/Role/Resource"),
                    allowed + _metric_calls(e), [hybrid] + _no_rewrite_calls(e) + _metric_calls(e, elsewhere=True))


def _metric_calls(e: Estate, *, elsewhere: bool = False) -> list[Call]:
    """What the compute nodes' user data makes them publish (the CloudWatch agent's configuration, Neuron's monitor),
    read back from the synthesized launch template; `elsewhere`: the same call to a namespace they do not write."""
    data = e.props("TrainStack/ComputeTemplate/Template", "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]
    _, spaces = read_back(data)
    assert spaces, "the compute nodes publish nothing: the cluster dashboard would stay empty"
    if elsewhere:
        return [Call("cloudwatch:PutMetricData", "*", METRICS_DOC, {"cloudwatch:namespace": "AWS/EC2"},
                     why="only the namespaces its own agents write")]
    return [Call("cloudwatch:PutMetricData", "*", METRICS_DOC, {"cloudwatch:namespace": n}) for n in spaces]


def notebook_autostop(e: Estate) -> Contract | None:
    if not e.has("TrainStack/Notebook/Role/Resource", "AWS::IAM::Role"):
        return None
    props = e.props("TrainStack/Notebook/Notebook", "AWS::SageMaker::NotebookInstance")
    tag = next(t for t in props["Tags"] if t["Key"] == "ml-estate:notebook")
    own = e.world.arn(e.scope + "TrainStack/Notebook/Notebook", "AWS::SageMaker::NotebookInstance")
    ctx = {f"aws:ResourceTag/{tag['Key']}": tag["Value"]}
    other = f"arn:{PARTITION}:sagemaker:{e.region}:{e.account}:notebook-instance/someone-elses"
    return Contract("notebook autostop (our script)", e.world.role(e.scope + "TrainStack/Notebook/Role/Resource"),
                    [Call("sagemaker:DescribeNotebookInstance", own, AUTOSTOP_DOC, ctx),
                     Call("sagemaker:StopNotebookInstance", own, AUTOSTOP_DOC, ctx)],
                    [Call("sagemaker:StopNotebookInstance", other, AUTOSTOP_DOC,
                          {f"aws:ResourceTag/{tag['Key']}": "another"}, why="only itself")])


def fsx_link(e: Estate) -> Contract | None:
    """FSx's S3 service-linked role reaching the KMS-encrypted bucket: decided by the key policy alone."""
    if not e.has("DataStack/Lustre/FileSystem", "AWS::FSx::FileSystem"):
        return None
    role = Principal(
        arn=f"arn:{PARTITION}:iam::{e.account}:{FSX_S3_ROLE}", account=e.account,
        # AWSFSxS3AccessServiceRolePolicy: S3 object and bucket-notification actions, no KMS.
        identity=[{"Effect": "Allow", "Resource": "*", "Action": [
            "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:Get*", "s3:List*", "s3:PutBucketNotification",
            "s3:PutObject"]}])
    allowed = [*e.read(layout.DATASETS + "train/part-0000", FSX_DOC), *e.write(layout.CHECKPOINTS + "step-1/x.pt", FSX_DOC)]
    denied = [Call("kms:Decrypt", e.key_arn, FSX_DOC, {"kms:CallerAccount": e.account},
                   why="only through S3, never a direct decrypt")]
    return Contract("FSx S3 service-linked role (key policy)", role, allowed, denied)


PURPOSE = (hyperpod_nodes, pcs_nodes, notebook_autostop, fsx_link)


def purpose(world: World, scope: str = "") -> list[Contract]:
    e = Estate(world, scope)
    return [c for c in (f(e) for f in PURPOSE) if c is not None]
