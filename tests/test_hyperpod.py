"""Issue 4: SageMaker HyperPod with the Slurm orchestrator, and the idle-stopping notebook."""

from __future__ import annotations

import base64
import json

import pytest

from constructs_lib.hyperpod_cluster import FRAMEWORK_SCRIPT, LAYOUT_FILE, LIFECYCLE, LIFECYCLE_PREFIX, LIFECYCLE_SCRIPT
from constructs_lib.node_bootstrap import LAYOUT_ON_NODE
from constructs_lib.node_image import ML_VENV, framework_script
from workloads.catalog import load_catalog, load_software
from constructs_lib.notebook import autostop_script

PLAN_ARN = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/reserved-p5"
HYPERPOD = {"training.orchestrator": "hyperpod", "notebook.idle_minutes": "30"}


@pytest.fixture(scope="module", params=["p5.48xlarge"])
def hyperpod(request, synth):
    return request.param, synth("huge", {**HYPERPOD, "training.instance_type": request.param,
                                         "training.training_plan_arn": PLAN_ARN})


def _groups(s) -> dict[str, dict]:
    cluster = s.one("TrainStack", "AWS::SageMaker::Cluster")["Properties"]
    return {g["InstanceGroupName"]: g for g in cluster["InstanceGroups"]}


def test_cluster_uses_the_slurm_orchestrator_in_the_private_subnet(hyperpod):
    _, s = hyperpod
    cluster = s.one("TrainStack", "AWS::SageMaker::Cluster")["Properties"]
    assert cluster["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    assert cluster["NodeRecovery"] == "Automatic"
    vpc = cluster["VpcConfig"]
    assert "privateSubnet" in json.dumps(vpc["Subnets"]) and "SecurityCluster" in json.dumps(vpc["SecurityGroupIds"])
    assert not s.resources("TrainStack", "AWS::PCS::Cluster")


def test_controller_login_and_worker_groups(hyperpod):
    itype, s = hyperpod
    groups = _groups(s)
    assert set(groups) == {"controller", "login", "workers"}
    assert (groups["controller"]["SlurmConfig"]["NodeType"], groups["controller"]["InstanceCount"]) == ("Controller", 1)
    assert groups["login"]["SlurmConfig"]["NodeType"] == "Login"
    workers = groups["workers"]
    assert (workers["InstanceType"], workers["InstanceCount"]) == (f"ml.{itype}", 16)
    assert workers["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["train"]}
    assert workers["TrainingPlanArn"] == PLAN_ARN
    assert all(g["ThreadsPerCore"] == 1 for g in groups.values())


def test_deep_health_checks_on_accelerated_workers_only(hyperpod):
    itype, s = hyperpod
    groups = _groups(s)
    expected = ["InstanceStress", "InstanceConnectivity"] if itype.startswith("p") else ["InstanceStress"]
    assert groups["workers"]["OnStartDeepHealthChecks"] == expected
    assert "OnStartDeepHealthChecks" not in groups["controller"] and "OnStartDeepHealthChecks" not in groups["login"]


def test_fsx_mounted_at_fsx_on_every_group(hyperpod):
    _, s = hyperpod
    for group in _groups(s).values():
        fsx = group["InstanceStorageConfigs"][0]["FsxLustreConfig"]
        assert fsx["MountPath"] == "/fsx" and "DNSName" in json.dumps(fsx["DnsName"])
        assert "LustreMountName" in json.dumps(fsx["MountName"])


def test_lifecycle_scripts_are_an_asset_unpacked_into_the_bucket(hyperpod):
    _, s = hyperpod
    deployment = s.one("TrainStack", "Custom::CDKBucketDeployment")["Properties"]
    assert deployment["DestinationBucketKeyPrefix"] == LIFECYCLE_PREFIX
    assert deployment["SourceObjectKeys"][0].endswith(".zip")  # the project's folder, as a CDK asset
    for group in _groups(s).values():
        life = group["LifeCycleConfig"]
        assert life["OnInitComplete"] == LIFECYCLE_SCRIPT and LIFECYCLE_PREFIX in json.dumps(life["SourceS3Uri"])
    assert (LIFECYCLE / LIFECYCLE_SCRIPT).is_file()
    assert (LIFECYCLE / "examples" / "train-trainium.sbatch").is_file()


def test_lifecycle_gets_the_plans_layout_and_pinned_stack(hyperpod):
    """The sbatch examples read the layout and activate the pinned stack's venv: on HyperPod both come from the
    lifecycle prefix (HyperPod's AMI is not baked), beside the script that puts them in place."""
    itype, s = hyperpod
    deployment = s.one("TrainStack", "Custom::CDKBucketDeployment")["Properties"]
    shipped = {}
    for key in deployment["SourceObjectKeys"]:
        folder = s.outdir / f"asset.{key.removesuffix('.zip')}"
        shipped.update({f.name: f.read_text() for f in folder.iterdir() if f.is_file()})
    layout = json.loads(shipped[LAYOUT_FILE])
    assert layout["ranks"] == 16 * 8 and layout["data"] * layout["tensor"] * layout["pipeline"] == layout["ranks"]
    assert shipped[FRAMEWORK_SCRIPT] == framework_script(load_software().for_type(load_catalog().types[itype]))
    script = (LIFECYCLE / LIFECYCLE_SCRIPT).read_text()
    assert f'"$HERE/{LAYOUT_FILE}" {LAYOUT_ON_NODE}' in script and f'bash "$HERE/{FRAMEWORK_SCRIPT}"' in script
    for example in ("train-gpu.sbatch", "train-trainium.sbatch"):
        sbatch = (LIFECYCLE / "examples" / example).read_text()
        assert f"ML_VENV=${{ML_VENV:-{ML_VENV}}}" in sbatch and 'source "$ML_VENV/bin/activate"' in sbatch
        assert LAYOUT_ON_NODE in sbatch


def test_execution_role_is_least_privilege(hyperpod):
    _, s = hyperpod
    role = next(r for k, r in s.resources("TrainStack", "AWS::IAM::Role").items() if k.startswith("TrainingRole"))
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert "ManagedPolicyArns" not in role["Properties"]
    policy = next(p for k, p in s.resources("TrainStack", "AWS::IAM::Policy").items() if k.startswith("TrainingRole"))
    text = json.dumps(policy["Properties"]["PolicyDocument"])
    for needed in ("ec2:CreateNetworkInterface", "ssmmessages:OpenDataChannel", "/lifecycle/hyperpod/*", "/datasets/*"):
        assert needed in text


def test_notebook_stops_itself_when_idle(hyperpod):
    _, s = hyperpod
    nb = s.one("TrainStack", "AWS::SageMaker::NotebookInstance")["Properties"]
    assert nb["InstanceType"] == "ml.t3.medium" and nb["DirectInternetAccess"] == "Disabled"
    assert nb["RootAccess"] == "Disabled" and "KmsKeyId" in nb and "SubnetId" in nb
    assert nb["InstanceMetadataServiceConfiguration"] == {"MinimumInstanceMetadataServiceVersion": "2"}  # IMDSv2 only
    config = s.one("TrainStack", "AWS::SageMaker::NotebookInstanceLifecycleConfig")["Properties"]
    script = config["OnStart"][0]["Content"]["Fn::Base64"]
    assert "IDLE_SECONDS=1800" in script and "stop_notebook_instance" in script and "crontab" in script
    policy = s.resources("TrainStack", "AWS::IAM::Policy")
    stop = [st for p in policy.values() for st in p["Properties"]["PolicyDocument"]["Statement"]
            if st["Action"] == ["sagemaker:DescribeNotebookInstance", "sagemaker:StopNotebookInstance"]
            or st["Action"] == ["sagemaker:StopNotebookInstance", "sagemaker:DescribeNotebookInstance"]]
    assert stop and "aws:ResourceTag/ml-estate:notebook" in json.dumps(stop[0]["Condition"])


def test_autostop_script_is_valid_bash_and_python():
    import subprocess

    script = autostop_script(45)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    python = script.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    compile(python, "autostop.py", "exec")
    assert len(base64.b64encode(script.encode())) < 16384  # SageMaker's lifecycle-config limit


def test_no_notebook_unless_asked(synth):
    assert not synth("huge").resources("TrainStack", "AWS::SageMaker::NotebookInstance")


def test_training_plan_needs_hyperpod():
    from workloads import ConfigError, load

    with pytest.raises(ConfigError, match="training.orchestrator = 'slurm': a training plan reserves capacity"):
        load("huge", {"training.training_plan_arn": PLAN_ARN})


def test_lifecycle_scripts_live_in_their_own_bucket_that_only_the_deployment_writes(hyperpod):
    _, s = hyperpod
    source = _groups(s)["workers"]["LifeCycleConfig"]["SourceS3Uri"]
    assert "HyperPodScripts" in json.dumps(source) and "Datasets" not in json.dumps(source)
    scripts = next(k for k in s.resources("TrainStack", "AWS::S3::Bucket") if k.startswith("HyperPodScripts"))
    bucket = s.templates["TrainStack"]["Resources"][scripts]
    assert bucket["DeletionPolicy"] == "RetainExceptOnCreate"  # kept, but not after a failed first deploy (issue 31)
    assert bucket["Properties"]["VersioningConfiguration"]["Status"] == "Enabled"
    # The deployment's handler may write the scripts bucket and nothing of the dataset bucket.
    handler_policies = [p["Properties"]["PolicyDocument"] for k, p in s.resources("TrainStack", "AWS::IAM::Policy").items()
                        if k.startswith("CustomCDKBucketDeployment")]
    assert handler_policies and scripts in json.dumps(handler_policies)
    assert "Datasets" not in json.dumps(handler_policies) and "DatasetBucket" not in json.dumps(handler_policies)
