"""Deploy the huge preset's synthesized assembly to a local moto server with the real CDK CLI, and the
intermediate preset beside it in the same account and region."""

from __future__ import annotations

import pytest

from tools.emulator import NotLocalError, deployed_resources, require_local, running
from workloads import load, plan

# moto 5.2 has no CloudFormation model for these: they are in the templates, skipped locally.
KNOWN_SKIPPED = {"AWS::S3::BucketPolicy", "AWS::EC2::SecurityGroupEgress", "AWS::ImageBuilder::Image",
                 "AWS::ImageBuilder::Component", "AWS::ImageBuilder::ImageRecipe",
                 "AWS::ImageBuilder::InfrastructureConfiguration", "AWS::PCS::ComputeNodeGroup", "AWS::ApplicationAutoScaling::ScalableTarget",
                 "AWS::ApplicationAutoScaling::ScalingPolicy", "AWS::EC2::PlacementGroup", "AWS::FSx::FileSystem",
                 "AWS::FSx::DataRepositoryAssociation", "AWS::PCS::Cluster", "AWS::PCS::ComputeNodeGroup",
                 "AWS::PCS::Queue", "AWS::CloudWatch::Alarm", "AWS::SNS::TopicPolicy", "AWS::Scheduler::Schedule",
                 "AWS::SageMaker::Cluster", "Custom::CDKBucketDeployment", "Custom::VpcRestrictDefaultSG",
                 "Custom::AWS"}


def test_emulator_refuses_a_real_endpoint():
    with pytest.raises(NotLocalError):
        require_local("https://cloudformation.us-west-2.amazonaws.com")
    require_local("http://localhost:5000")


@pytest.mark.e2e  # an emulator deploy: make test-e2e (CI)
def test_deploy_all_stacks_to_the_emulator(synth):
    s = synth("huge")
    beside = synth("intermediate", {"region": "us-east-2", "availability_zone": "us-east-2b"})  # huge's region
    with running("us-east-2") as emulator:
        emulator.bootstrap(quiet=True)
        emulator.deploy_estate("--app", str(s.outdir), plan=plan(load("huge")), quiet=True)
        reports = {r.name: r for r in deployed_resources(emulator, s.outdir)}
        subnets = emulator.client("ec2").describe_subnets()["Subnets"]
        configs = emulator.client("sagemaker").list_endpoint_configs()["EndpointConfigs"]
        config = emulator.client("sagemaker").describe_endpoint_config(
            EndpointConfigName=configs[0]["EndpointConfigName"])
        # A second workload in the same account and region: its stacks and exports are its own.
        emulator.deploy("--app", str(beside.outdir), stacks=("NetworkStack", "DataStack"), quiet=True)
        cf = emulator.client("cloudformation")
        stacks = {st["StackName"] for st in cf.describe_stacks()["Stacks"]}
        exports = [e["Name"] for e in cf.list_exports()["Exports"]]
        after = {r.name: r for r in deployed_resources(emulator, s.outdir)}

    assert {"huge-NetworkStack", "huge-DataStack", "huge-TrainStack", "huge-InferenceStack",
            "intermediate-NetworkStack", "intermediate-DataStack"} <= stacks
    assert len(exports) == len(set(exports)) and any(e.startswith("intermediate-NetworkStack:") for e in exports)
    assert all(r.status == "CREATE_COMPLETE" for r in after.values())  # huge untouched by the second workload
    assert after["DataStack"].outputs == reports["DataStack"].outputs

    assert set(reports) == set(s.templates)
    assert all(r.status == "CREATE_COMPLETE" for r in reports.values())
    assert reports["DataStack"].outputs["DatasetBucketName"]
    assert reports["InferenceStack"].outputs["RealtimeInstanceType"] == plan(load("huge")).inference["realtime"].instance_type
    assert reports["TrainStack"].outputs["Cluster"] == f"16 x {plan(load('huge')).training.instance_type} (slurm)"
    skipped = {t for r in reports.values() for t in r.skipped.values()}
    assert skipped <= KNOWN_SKIPPED, skipped - KNOWN_SKIPPED
    assert "AWS::SageMaker::Endpoint" in {t for r in reports.values() for t in r.created.values()}
    ours = [sn for sn in subnets if not sn.get("DefaultForAz")]
    # Public and private subnets in the training zone (us-east-2b) and the hosted endpoints' second zone.
    assert len(ours) == 4 and {sn["AvailabilityZone"] for sn in ours} == {"us-east-2b", "us-east-2a"}
    assert config["ProductionVariants"][0]["InstanceType"] == plan(load("huge")).inference["realtime"].instance_type
