"""What each AWS service (or node) does with our roles at run time: the calls, and where AWS says so.

Each contract lists calls the role must be allowed to make, read from the synthesized resources
the service works from (the model's artifact location, the endpoint config's output paths and
topics, the transform job's input and output), and calls outside the role's purpose that must
be denied. `contracts(world)` returns the contracts for the roles a world has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlparse

from workloads import layout

from .contract_policy import PARTITION, Call, Principal, World

# The documents the calls come from (checked 2026-11-22).
DOC = {
    "createmodel": "SageMaker API Reference, CreateModel (ExecutionRoleArn: the role SageMaker assumes to access model "
                   "artifacts and the docker image for hosting and for batch transform jobs); SageMaker Developer "
                   "Guide, 'How to use SageMaker AI execution roles', CreateModel API: Execution Role Permissions "
                   "(s3:GetObject on the artifact, ECR image pull, CloudWatch Logs and metrics) "
                   "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html",
    "uncompressed": "SageMaker Developer Guide, 'Deploying uncompressed models' (S3Prefix model data: SageMaker lists "
                    "the prefix and downloads every object under it) "
                    "https://docs.aws.amazon.com/sagemaker/latest/dg/large-model-inference-uncompressed.html",
    "sse-kms": "Amazon S3 User Guide, 'Using server-side encryption with AWS KMS keys (SSE-KMS)': an upload needs "
               "kms:GenerateDataKey, a download kms:Decrypt, on the object's key "
               "https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html",
    "async": "SageMaker Developer Guide, Asynchronous inference, 'Complete the prerequisites': the role SageMaker runs "
             "as reads the request from S3, writes the output and failure objects and publishes to the SNS topics "
             "https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-create-endpoint-prerequisites.html; "
             "API AsyncInferenceOutputConfig.KmsKeyId (the output is encrypted with it)",
    "sns-sse": "Amazon SNS Developer Guide, 'Configure AWS KMS permissions': a publisher to an encrypted topic needs "
               "kms:GenerateDataKey* and kms:Decrypt on the topic's key "
               "https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html",
    "capture": "SageMaker Developer Guide, 'Capture data from real-time endpoint': captured requests are written to "
               "DestinationS3Uri, encrypted with DataCaptureConfig.KmsKeyId "
               "https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html",
    "transform": "SageMaker API Reference, CreateModel (the model's role is used for batch transform jobs) and "
                 "TransformOutput.KmsKeyId ('the KMS key policy must grant permission to the IAM role that you "
                 "specify in your CreateModel request'); the job lists and reads the input prefix and writes the output",
    "sfn-sagemaker": "Step Functions Developer Guide, 'IAM policies for Amazon SageMaker AI' (CreateTransformJob .sync: "
                     "sagemaker:CreateTransformJob, DescribeTransformJob, StopTransformJob, AddTags, ListTags; events "
                     "PutTargets, PutRule, DescribeRule on StepFunctionsGetEventsForSageMakerTransformJobsRule) "
                     "https://docs.aws.amazon.com/step-functions/latest/dg/sagemaker-iam.html",
    "scheduler": "EventBridge Scheduler User Guide, 'Set up the execution role': the role needs the target's action, "
                 "states:StartExecution on the state machine "
                 "https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role",
    "training": "SageMaker Developer Guide, 'How to use SageMaker AI execution roles', CreateTrainingJob API: "
                "Execution Role Permissions (list and read the input, write the output and checkpoints, ECR pull, "
                "logs, metrics; in VPC mode the ec2 network-interface actions) "
                "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html",
    "hyperpod": "SageMaker HyperPod, 'IAM role for SageMaker HyperPod' and the managed policy "
                "AmazonSageMakerClusterInstanceRolePolicy (lifecycle scripts read from S3, VPC network interfaces, "
                "CloudWatch Logs under /aws/sagemaker/Clusters, metrics, SSM sessions) "
                "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html",
    "pcs": "AWS PCS User Guide, 'IAM instance profiles for AWS PCS' (pcs:RegisterComputeNodeGroupInstance on the "
           "cluster) and Systems Manager, AmazonSSMManagedInstanceCore (agent registration and sessions) "
           "https://docs.aws.amazon.com/pcs/latest/userguide/security-instance-profiles.html",
    "notebook": "SageMaker Developer Guide, 'Customize a notebook instance using a lifecycle configuration script' "
                "(the script's output goes to CloudWatch Logs, /aws/sagemaker/NotebookInstances) and the autostop "
                "script (sagemaker:DescribeNotebookInstance, StopNotebookInstance on itself) "
                "https://docs.aws.amazon.com/sagemaker/latest/dg/notebook-lifecycle-config.html",
    "fsx-s3": "FSx for Lustre User Guide, 'Working with server-side encrypted Amazon S3 buckets': the file system's "
              "S3 service-linked role must be allowed kms:Decrypt and kms:GenerateDataKey (via S3) in the key "
              "policy; the service-linked role's own policy (AWSFSxS3AccessServiceRolePolicy) grants S3 actions only "
              "https://docs.aws.amazon.com/fsx/latest/LustreGuide/s3-server-side-encryption-support.html",
}

FSX_S3_ROLE = ("role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
               "AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0")


@dataclass(frozen=True)
class Contract:
    name: str
    principal: Principal
    allowed: list[Call]
    denied: list[Call] = field(default_factory=list)


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

    def key_id_arn(self, key_ref: str | None) -> str:
        """A KmsKeyId property as the key ARN (our templates use the ARN or the key ID)."""
        if not key_ref or key_ref.startswith("arn:"):
            return key_ref or self.key_arn
        return f"arn:{PARTITION}:kms:{self.region}:{self.account}:key/{key_ref}"

    # -- the calls S3 and KMS see

    def s3_kms(self, action: str, key_arn: str | None = None) -> Call:
        return Call(action, key_arn or self.key_arn, DOC["sse-kms"],
                    context={"kms:ViaService": f"s3.{self.region}.amazonaws.com", "kms:CallerAccount": self.account},
                    why="S3 on the role's behalf (SSE-KMS)")

    def read(self, uri_or_key: str, doc: str) -> list[Call]:
        return [Call("s3:GetObject", self._arn(uri_or_key), doc), self.s3_kms("kms:Decrypt")]

    def write(self, uri_or_key: str, doc: str, key_arn: str | None = None) -> list[Call]:
        return [Call("s3:PutObject", self._arn(uri_or_key), doc), self.s3_kms("kms:GenerateDataKey", key_arn)]

    def list_prefix(self, uri_or_prefix: str, doc: str) -> Call:
        prefix = self._key(uri_or_prefix)
        return Call("s3:ListBucket", self._bucket(uri_or_prefix), doc, context={"s3:prefix": prefix},
                    why=f"prefix {prefix}")

    def _bucket(self, uri_or_key: str) -> str:
        """An s3:// URI names its own bucket; a bare key is in the dataset bucket."""
        if uri_or_key.startswith("s3://"):
            return f"arn:{PARTITION}:s3:::{urlparse(uri_or_key).netloc}"
        return self.bucket_arn

    def _key(self, uri_or_key: str) -> str:
        return urlparse(uri_or_key).path.lstrip("/") if uri_or_key.startswith("s3://") else uri_or_key

    def _arn(self, uri_or_key: str) -> str:
        return f"{self._bucket(uri_or_key)}/{self._key(uri_or_key)}"

    def logs(self, group: str, doc: str) -> list[Call]:
        arn = f"arn:{PARTITION}:logs:{self.region}:{self.account}:log-group:{group}:log-stream:run-1"
        return [Call("logs:CreateLogStream", arn, doc), Call("logs:PutLogEvents", arn, doc)]

    def metrics(self, namespace: str, doc: str) -> Call:
        return Call("cloudwatch:PutMetricData", "*", doc, context={"cloudwatch:namespace": namespace})

    def image_pull(self, image_uri: str, doc: str) -> list[Call]:
        # Parsed here rather than with sagemaker_access.image_repository_arn: a contract must not share the code
        # it checks.
        registry, _, rest = image_uri.partition("/")
        account, region = registry.split(".")[0], registry.split(".")[3]
        repo = f"arn:{PARTITION}:ecr:{region}:{account}:repository/{rest.split(':')[0]}"
        return [Call("ecr:GetAuthorizationToken", "*", doc), Call("ecr:BatchGetImage", repo, doc),
                Call("ecr:GetDownloadUrlForLayer", repo, doc)]


# ------------------------------------------------------------------ inference

def _model_calls(e: Estate, kind: str) -> tuple[list[Call], list[Call]]:
    """What SageMaker does with a model's role when it starts the container: artifact, image, logs."""
    model = e.props(f"InferenceStack/{kind}Model/Model", "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    calls = e.image_pull(container["Image"], DOC["createmodel"])
    if "ModelDataSource" in container:
        source = container["ModelDataSource"]["S3DataSource"]
        calls += [e.list_prefix(source["S3Uri"], DOC["uncompressed"]),
                  *e.read(source["S3Uri"].rstrip("/") + "/config.json", DOC["uncompressed"])]
        artifact = source["S3Uri"].rstrip("/") + "/model.safetensors"
    else:
        calls += e.read(container["ModelDataUrl"], DOC["createmodel"])
        artifact = container["ModelDataUrl"]
    calls += [*e.logs("/aws/sagemaker/Endpoints/endpoint", DOC["createmodel"]),
              e.metrics("/aws/sagemaker/Endpoints", DOC["createmodel"])]
    denied = [Call("s3:PutObject", e._arn(artifact), DOC["createmodel"], why="a model never rewrites what it serves"),
              Call("s3:GetObject", e.obj(layout.DATASETS + "train/part-0000"), DOC["createmodel"],
                   why="serving has no business with the training data")]
    return calls, denied


def _model_role(e: Estate, kind: str) -> tuple[Principal, list[Call], list[Call]] | None:
    """A model's role with the calls its container start makes (None when the estate has no such model)."""
    path = f"InferenceStack/{kind}Model/Role/Resource"
    if not e.has(path, "AWS::IAM::Role"):
        return None
    return (e.world.role(e.scope + path), *_model_calls(e, kind))


def realtime(e: Estate) -> Contract | None:
    if (found := _model_role(e, "Realtime")) is None:
        return None
    role, allowed, denied = found
    config = e.props("InferenceStack/Realtime/Config", "AWS::SageMaker::EndpointConfig")
    capture = config.get("DataCaptureConfig")
    if capture:
        key = e.key_id_arn(capture.get("KmsKeyId"))
        allowed += e.write(capture["DestinationS3Uri"].rstrip("/") + "/endpoint/AllTraffic/2026/11/22/00/x.jsonl",
                           DOC["capture"], key)
    return Contract("real-time model role", role, allowed, denied)


def serverless(e: Estate) -> Contract | None:
    found = _model_role(e, "Serverless")
    return None if found is None else Contract("serverless model role", *found)


def async_(e: Estate) -> Contract | None:
    if (found := _model_role(e, "Async")) is None:
        return None
    role, allowed, denied = found
    out = e.props("InferenceStack/Async/Config", "AWS::SageMaker::EndpointConfig")["AsyncInferenceConfig"]["OutputConfig"]
    key = e.key_id_arn(out.get("KmsKeyId"))
    allowed += e.read(layout.ASYNC_INPUT + "request-1.json", DOC["async"])
    allowed += e.write(out["S3OutputPath"].rstrip("/") + "/result-1.out", DOC["async"], key)
    allowed += e.write(out["S3FailurePath"].rstrip("/") + "/result-1-error.out", DOC["async"], key)
    for topic in (out["NotificationConfig"]["SuccessTopic"], out["NotificationConfig"]["ErrorTopic"]):
        allowed.append(Call("sns:Publish", topic, DOC["async"]))
        topic_key = _topic_key(e, topic)
        ctx = {"kms:ViaService": f"sns.{e.region}.amazonaws.com", "kms:CallerAccount": e.account}
        allowed += [Call("kms:GenerateDataKey", topic_key, DOC["sns-sse"], ctx, why="SNS on the role's behalf"),
                    Call("kms:Decrypt", topic_key, DOC["sns-sse"], ctx, why="SNS on the role's behalf")]
    return Contract("async model role", role, allowed, denied)


def _topic_key(e: Estate, topic_arn: str) -> str:
    for suffix in ("Success", "Error"):
        if e.world.arn(e.scope + f"InferenceStack/Async/{suffix}/Resource", "AWS::SNS::Topic") == topic_arn:
            return e.key_id_arn(e.props(f"InferenceStack/Async/{suffix}/Resource", "AWS::SNS::Topic")["KmsMasterKeyId"])
    raise AssertionError(f"no topic {topic_arn}")


def _transform_job(e: Estate) -> dict:
    machine = e.props("InferenceStack/Batch/StateMachine/Resource", "AWS::StepFunctions::StateMachine")
    definition = json.loads(machine["DefinitionString"])
    return next(s for s in definition["States"].values() if "createTransformJob" in s.get("Resource", ""))["Parameters"]


def batch(e: Estate) -> Contract | None:
    if (found := _model_role(e, "Batch")) is None:
        return None
    role, allowed, denied = found
    job = _transform_job(e)
    source = job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
    output = job["TransformOutput"]
    key = e.key_id_arn(output.get("KmsKeyId"))
    allowed += [e.list_prefix(source, DOC["transform"]), *e.read(source.rstrip("/") + "/day-1.csv", DOC["transform"])]
    allowed += [*e.write(output["S3OutputPath"].rstrip("/") + "/day-1.csv.out", DOC["transform"], key),
                Call("kms:Encrypt", key, DOC["transform"], e.s3_kms("kms:Encrypt").context)]
    return Contract("batch model role", role, allowed, denied)


def state_machine(e: Estate) -> Contract | None:
    if not e.has("InferenceStack/Batch/StateMachine/Role/Resource", "AWS::IAM::Role"):
        return None
    job = f"arn:{PARTITION}:sagemaker:{e.region}:{e.account}:transform-job/batch-execution-1"
    rule = f"arn:{PARTITION}:events:{e.region}:{e.account}:rule/StepFunctionsGetEventsForSageMakerTransformJobsRule"
    # The create request carries the job's instance type (sagemaker:InstanceTypes, which team boundaries check).
    types = {"sagemaker:InstanceTypes": [_transform_job(e)["TransformResources"]["InstanceType"]]}
    allowed = [Call("sagemaker:CreateTransformJob", job, DOC["sfn-sagemaker"], types)]
    allowed += [Call(a, job, DOC["sfn-sagemaker"]) for a in
                ("sagemaker:DescribeTransformJob", "sagemaker:StopTransformJob", "sagemaker:AddTags", "sagemaker:ListTags")]
    allowed += [Call(a, rule, DOC["sfn-sagemaker"]) for a in ("events:PutTargets", "events:PutRule", "events:DescribeRule")]
    denied = [Call("sagemaker:CreateTrainingJob", f"arn:{PARTITION}:sagemaker:{e.region}:{e.account}:training-job/x",
                   DOC["sfn-sagemaker"], why="it only runs transform jobs")]
    return Contract("batch state machine role", e.world.role(e.scope + "InferenceStack/Batch/StateMachine/Role/Resource"),
                    allowed, denied)


def schedule(e: Estate) -> Contract | None:
    if not e.has("InferenceStack/Batch/ScheduleRole/Resource", "AWS::IAM::Role"):
        return None
    machine = e.world.arn(e.scope + "InferenceStack/Batch/StateMachine/Resource", "AWS::StepFunctions::StateMachine")
    other = f"arn:{PARTITION}:states:{e.region}:{e.account}:stateMachine:someone-elses"
    return Contract("batch schedule role", e.world.role(e.scope + "InferenceStack/Batch/ScheduleRole/Resource"),
                    [Call("states:StartExecution", machine, DOC["scheduler"])],
                    [Call("states:StartExecution", other, DOC["scheduler"], why="only its own state machine")])


# ------------------------------------------------------------------ training

_DESCRIBE = ("ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets",
             "ec2:DescribeSecurityGroups")


def _vpc_calls(e: Estate, doc: str) -> tuple[list[Call], list[Call]]:
    """(allowed, denied): the network interfaces SageMaker makes for a job or node in our subnet, with the
    resources and condition keys EC2 evaluates (service authorization reference: ec2:Vpc, ec2:CreateAction)."""
    w = e.world

    def ref(path: str, kind: str, attr: str | None = None) -> str:
        stack, logical = w.find(e.scope + path, kind)
        return w.get_att(stack, logical, attr) if attr else w.ref(stack, logical)

    def arn(resource: str, rid: str) -> str:
        return f"arn:{PARTITION}:ec2:{e.region}:{e.account}:{resource}/{rid}"

    vpc = arn("vpc", ref("NetworkStack/Network/Vpc/Resource", "AWS::EC2::VPC"))
    subnet = arn("subnet", ref("NetworkStack/Network/Vpc/privateSubnet1/Subnet", "AWS::EC2::Subnet"))
    group = arn("security-group", ref("NetworkStack/Security/Cluster/Resource", "AWS::EC2::SecurityGroup", "GroupId"))
    eni, ours = arn("network-interface", "eni-0123456789abcdef0"), {"ec2:Vpc": vpc}
    allowed = [*[Call("ec2:CreateNetworkInterface", r, doc, context=ours) for r in (subnet, group, eni)],
               *[Call(a, eni, doc, context=ours) for a in (
                   "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                   "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface")],
               Call("ec2:CreateTags", eni, doc, context={"ec2:CreateAction": "CreateNetworkInterface"}),
               *[Call(a, "*", doc) for a in _DESCRIBE]]
    theirs = {"ec2:Vpc": arn("vpc", "vpc-0ther")}
    denied = [Call("ec2:CreateNetworkInterface", arn("subnet", "subnet-0ther"), doc, context=theirs,
                   why="only in our subnet"),
              Call("ec2:DeleteNetworkInterface", eni, doc, context=theirs, why="only interfaces in our VPC"),
              Call("ec2:CreateTags", arn("instance", "i-0123456789abcdef0"), doc,
                   context={"ec2:CreateAction": "RunInstances"}, why="tags only on the interfaces it creates")]
    return allowed, denied


def _data_calls(e: Estate, doc: str) -> list[Call]:
    return [e.list_prefix(layout.DATASETS, doc), *e.read(layout.DATASETS + "train/part-0000", doc),
            *e.write(layout.CHECKPOINTS + "step-100/rank-0.pt", doc), *e.read(layout.CHECKPOINTS + "step-100/rank-0.pt", doc),
            *e.write(layout.OUTPUT + "model.tar.gz", doc)]


def _no_rewrite_calls(e: Estate, doc: str) -> list[Call]:
    return [Call("s3:PutObject", e.obj(layout.DATASETS + "train/part-0000"), doc,
                 why="the bucket holds the dataset of record: training reads it, never rewrites it"),
            Call("s3:DeleteObject", e.obj(layout.DATASETS + "train/part-0000"), doc, why="no dataset deletes")]


def training_job(e: Estate) -> Contract | None:
    path = "TrainStack/TrainingRole/Role/Resource"
    if not e.has(path, "AWS::IAM::Role") or e.has("TrainStack/HyperPod/Cluster", "AWS::SageMaker::Cluster") \
            or e.has("TrainStack/Slurm/Cluster", "AWS::PCS::Cluster"):
        return None
    doc = DOC["training"]
    stack, _ = e.world.find(e.scope + path, "AWS::IAM::Role")
    image = stack.template["Outputs"]["TrainingImage"]["Value"]  # what `workloads submit` runs (test_jobs pins it)
    allowed = [*_data_calls(e, doc), *e.read(layout.JOBS + "train-1/source/sourcedir.tar.gz", doc),
               *e.image_pull(image, doc), *e.logs("/aws/sagemaker/TrainingJobs", doc),
               e.metrics("/aws/sagemaker/TrainingJobs", doc)]
    vpc_allowed, vpc_denied = _vpc_calls(e, doc)
    other_image = image.split("/")[0] + "/some-other-training:1.0"
    denied = [*_no_rewrite_calls(e, doc), *vpc_denied,
              Call("ecr:BatchGetImage", f"arn:{PARTITION}:ecr:{e.region}:999999999999:repository/pytorch-training", doc,
                   why="the image's own account only"),
              Call("ecr:BatchGetImage", e.image_pull(other_image, doc)[-1].resource, doc, why="the planned image only")]
    return Contract("training job role", e.world.role(e.scope + path), [*allowed, *vpc_allowed], denied)


def hyperpod(e: Estate) -> Contract | None:
    if not e.has("TrainStack/HyperPod/Cluster", "AWS::SageMaker::Cluster"):
        return None
    doc = DOC["hyperpod"]
    cluster = e.props("TrainStack/HyperPod/Cluster", "AWS::SageMaker::Cluster")
    scripts = cluster["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"]
    script = scripts.rstrip("/") + "/" + cluster["InstanceGroups"][0]["LifeCycleConfig"]["OnInitComplete"]
    vpc_allowed, vpc_denied = _vpc_calls(e, doc)
    # HyperPod copies the whole prefix to the node: the plan's files beside the script are read too.
    beside = [scripts.rstrip("/") + "/" + name for name in ("install-framework.sh", "layout.json")]
    allowed = [e.list_prefix(scripts, doc), *e.read(script, doc), *(c for f in beside for c in e.read(f, doc)),
               *vpc_allowed,
               *e.logs("/aws/sagemaker/Clusters/cluster/node", doc), e.metrics("/aws/sagemaker/Clusters", doc),
               Call("ssmmessages:CreateControlChannel", "*", doc), Call("ssmmessages:OpenDataChannel", "*", doc)]
    denied = [Call("s3:PutObject", e._arn(script), doc, why="lifecycle scripts run as root on every node: no node "
                                                            "may rewrite them"),
              Call("s3:PutObject", e._arn(beside[0]), doc, why="the framework install runs as root on every "
                                                               "accelerated node"), *vpc_denied]
    return Contract("HyperPod instance role", e.world.role(e.scope + "TrainStack/TrainingRole/Role/Resource"),
                    allowed, denied)


def pcs_node(e: Estate) -> Contract | None:
    if not e.has("TrainStack/Slurm/Cluster", "AWS::PCS::Cluster"):
        return None
    doc = DOC["pcs"]
    cluster = e.world.arn(e.scope + "TrainStack/Slurm/Cluster", "AWS::PCS::Cluster")
    allowed = [Call("pcs:RegisterComputeNodeGroupInstance", cluster, doc),
               Call("ssm:UpdateInstanceInformation", "*", doc), Call("ssmmessages:CreateControlChannel", "*", doc),
               Call("ec2messages:GetMessages", "*", doc), *_data_calls(e, doc)]
    other = f"arn:{PARTITION}:pcs:{e.region}:{e.account}:cluster/pcs_someone_else"
    denied = [Call("pcs:RegisterComputeNodeGroupInstance", other, doc, why="only its own cluster"),
              *_no_rewrite_calls(e, doc)]
    return Contract("PCS node role", e.world.role(e.scope + "TrainStack/TrainingRole/Role/Resource"), allowed, denied)


def notebook(e: Estate) -> Contract | None:
    if not e.has("TrainStack/Notebook/Role/Resource", "AWS::IAM::Role"):
        return None
    doc = DOC["notebook"]
    props = e.props("TrainStack/Notebook/Notebook", "AWS::SageMaker::NotebookInstance")
    tag = next(t for t in props["Tags"] if t["Key"] == "ml-estate:notebook")
    own = e.world.arn(e.scope + "TrainStack/Notebook/Notebook", "AWS::SageMaker::NotebookInstance")
    ctx = {f"aws:ResourceTag/{tag['Key']}": tag["Value"]}
    allowed = [Call("sagemaker:DescribeNotebookInstance", own, doc, ctx),
               Call("sagemaker:StopNotebookInstance", own, doc, ctx),
               *e.logs("/aws/sagemaker/NotebookInstances", doc)]
    other = f"arn:{PARTITION}:sagemaker:{e.region}:{e.account}:notebook-instance/someone-elses"
    denied = [Call("sagemaker:StopNotebookInstance", other, doc, {f"aws:ResourceTag/{tag['Key']}": "another"},
                   why="only itself")]
    return Contract("notebook role", e.world.role(e.scope + "TrainStack/Notebook/Role/Resource"), allowed, denied)


def fsx_link(e: Estate) -> Contract | None:
    """FSx's S3 service-linked role reaching the KMS-encrypted bucket: decided by the key policy alone."""
    if not e.has("DataStack/Lustre/FileSystem", "AWS::FSx::FileSystem"):
        return None
    doc = DOC["fsx-s3"]
    role = Principal(
        arn=f"arn:{PARTITION}:iam::{e.account}:{FSX_S3_ROLE}", account=e.account,
        # AWSFSxS3AccessServiceRolePolicy: S3 object and bucket-notification actions, no KMS.
        identity=[{"Effect": "Allow", "Resource": "*", "Action": [
            "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:Get*", "s3:List*", "s3:PutBucketNotification",
            "s3:PutObject"]}])
    allowed = [*e.read(layout.DATASETS + "train/part-0000", doc), *e.write(layout.CHECKPOINTS + "step-1/x.pt", doc)]
    denied = [Call("kms:Decrypt", e.key_arn, doc, {"kms:CallerAccount": e.account},
                   why="only through S3, never a direct decrypt")]
    return Contract("FSx S3 service-linked role (key policy)", role, allowed, denied)


ALL = (realtime, serverless, async_, batch, state_machine, schedule, training_job, hyperpod, pcs_node, notebook,
       fsx_link)


def contracts(world: World, scope: str = "") -> list[Contract]:
    e = Estate(world, scope)
    return [c for c in (f(e) for f in ALL) if c is not None]
