"""The PCS node image bake (constructs_lib/node_image.py): where its logs go and who may write them."""

from __future__ import annotations

from constructs_lib.node_image import BAKE_LOG_PREFIX

from .contract_policy import FAKE_ACCOUNT, Call, Stack, World, evaluate, metadata_paths

BUILD_ROLE = "TrainStack/NodeImage/BuildRole/Resource"
LOGS_BUCKET = "DataStack/Datasets/AccessLogs/Resource"


def _world(synth) -> World:
    stacks = []
    for name, template in synth.templates.items():
        account, region = synth.artifact(name)["environment"].removeprefix("aws://").split("/")
        paths = metadata_paths(synth.outdir / synth.artifact(name)["additionalMetadataFile"])
        stacks.append(Stack(name, template, region, FAKE_ACCOUNT if account == "unknown-account" else account, paths))
    return World(stacks)


def test_a_failed_bake_leaves_its_logs_in_the_logs_bucket(synth):
    """The infrastructure configuration names an S3 location; the build instance may write there and nowhere else."""
    s = synth("huge")
    world = _world(s)
    stack, logical = world.find("TrainStack/NodeImage/Infrastructure", "AWS::ImageBuilder::InfrastructureConfiguration")
    logs = world.resolve(stack.name, stack.template["Resources"][logical]["Properties"]["Logging"]["S3Logs"])
    bucket = world.arn(LOGS_BUCKET, "AWS::S3::Bucket")
    assert logs == {"S3BucketName": bucket.split(":::")[1], "S3KeyPrefix": BAKE_LOG_PREFIX.rstrip("/")}
    role = world.role(BUILD_ROLE)
    region = stack.region
    key = world.arn("DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    log = f"{bucket}/{BAKE_LOG_PREFIX}node-neuron/1.0.0/1/TOE_2026-11-23/application.log"
    via_s3 = {"kms:ViaService": f"s3.{region}.amazonaws.com", "kms:CallerAccount": FAKE_ACCOUNT}
    for call in (Call("s3:PutObject", log, "S3Logs"), Call("kms:GenerateDataKey", key, "SSE-KMS", via_s3)):
        decision = evaluate(role, call, world)
        assert decision.allowed, (call, decision.reason)
    dataset = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    for elsewhere in (f"{bucket}/dataset/2026-11-23-access-log", f"{dataset}/datasets/x", f"{dataset}/{BAKE_LOG_PREFIX}x"):
        assert not evaluate(role, Call("s3:PutObject", elsewhere, "nowhere else"), world).allowed, elsewhere
    # The bake starts only once its role may upload the logs.
    image = next(r for r in stack.template["Resources"].values() if r["Type"] == "AWS::ImageBuilder::Image")
    policies = [lid for lid, r in stack.template["Resources"].items()
                if r["Type"] == "AWS::IAM::Policy" and lid.startswith("NodeImageBuildRoleDefaultPolicy")]
    assert policies and set(policies) <= set(image.get("DependsOn", []))
    assert s.templates["TrainStack"]["Outputs"]["NodeImageLogs"]["Value"]
