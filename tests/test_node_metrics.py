"""The CloudWatch agent on the cluster's nodes (issue 35): one table (constructs_lib/node_metrics.py) decides what the
agent is configured to publish, the node role's namespaces, and what the training dashboard and idle alarm read. The
synthesized templates are held together here: the configuration the compute nodes' user data writes -> the role's
cloudwatch:namespace condition -> every CWAgent widget and alarm (name, dimensions, the Cluster value) -> the sourced
table workloads/catalog/metrics.yaml. The boot lines and the bake step run in a sandbox with stubbed binaries."""

from __future__ import annotations

import json
import subprocess

import pytest

from constructs_lib.node_bootstrap import SLURMD_DROPIN, Metrics, node_script
from constructs_lib.node_image import bake_steps
from constructs_lib.node_metrics import (AGENT_CONFIG, AGENT_CTL, AGENT_VERSION, DIMENSION,
                                         NAMESPACE, NEURON_NAMESPACE, NEURON_UNIT, agent_config,
                                         published, read_back)
from workloads import load, plan
from workloads.catalog import load_software
from workloads.planning.monitoring import metric_facts, training_alarms

from .conftest import VARIANTS
from .signing import curl_on_path, make_keys, short_tmpdir, stop_agents
from .test_node_boot_contract import LUSTRE, STUBS, _slurmd_would_start, shellcheck

FACTS = metric_facts()["metrics"]
SLURM = [n for n in VARIANTS if plan(load(*VARIANTS[n])).training.orchestrator == "slurm"]
KINDS = ("nvidia-gpu", "trainium")


# ------------------------------------------------------------------ the table, against the sourced metrics table

@pytest.mark.parametrize("kind", KINDS)
def test_what_the_agent_publishes_is_in_the_sourced_table(kind):
    for key, dims in published(agent_config(cluster="c", accelerator_kind=kind)).items():
        assert key in FACTS, f"{key}: the agent publishes it, workloads/catalog/metrics.yaml does not list it"
        assert list(dims) == FACTS[key]["dimensions"] == [DIMENSION], key


def test_every_agent_metric_the_table_lists_is_one_a_node_publishes():
    """A CWAgent row no node's configuration makes would be a widget that never draws."""
    made = {k for kind in KINDS for k in published(agent_config(cluster="c", accelerator_kind=kind))}
    assert {k for k in FACTS if k.startswith(NAMESPACE + ":")} == made


def test_gpus_only_on_gpu_nodes_and_every_node_reports_its_memory():
    gpu, trn = (published(agent_config(cluster="c", accelerator_kind=k)) for k in KINDS)
    assert "CWAgent:nvidia_smi_utilization_gpu" in gpu and not any("nvidia" in k for k in trn)
    assert "CWAgent:mem_used_percent" in gpu and "CWAgent:mem_used_percent" in trn


def test_a_configuration_without_the_roll_up_publishes_nothing_the_dashboard_reads():
    """published() reads the configuration, not the table: the check would catch a dropped roll-up."""
    config = agent_config(cluster="c", accelerator_kind="nvidia-gpu")
    config["metrics"]["aggregation_dimensions"] = []
    assert published(config) == {}


# ------------------------------------------------------------------ the synthesized estate: config -> role -> widgets

def _statements(template: dict, role_logical: str) -> list[dict]:
    out = []
    for r in template["Resources"].values():
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_logical} in r["Properties"].get("Roles", []):
            out += r["Properties"]["PolicyDocument"]["Statement"]
    return out


def _user_data(template: dict, name: str) -> str:
    (lt,) = [r for k, r in template["Resources"].items() if r["Type"] == "AWS::EC2::LaunchTemplate" and name in k]
    joined = lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    return joined if isinstance(joined, str) else "".join(p if isinstance(p, str) else "TOKEN"
                                                          for p in joined["Fn::Join"][1])


@pytest.mark.parametrize("name", SLURM)
def test_the_nodes_config_the_role_and_the_dashboard_agree(name, variant_synth_by_name):
    s = variant_synth_by_name(name)
    p = plan(load(*VARIANTS[name]))
    template = s.templates["TrainStack"]
    config, spaces = read_back(_user_data(template, "Compute"))
    assert config is not None and read_back(_user_data(template, "Login")) == (None, ())  # the login node runs no jobs
    made = published(config)
    (cluster,) = {body["append_dimensions"][DIMENSION] for body in config["metrics"]["metrics_collected"].values()}
    assert cluster == s.artifact("TrainStack").get("properties", {}).get("stackName", "TrainStack")

    # The role publishes to exactly the namespaces the nodes write, and only with the condition.
    (role,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and "TrainingRole" in k]
    puts = [st for st in _statements(template, role) if "cloudwatch:PutMetricData" in json.dumps(st["Action"])]
    assert len(puts) == 1 and puts[0]["Resource"] == "*"
    allowed = puts[0]["Condition"]["StringEquals"]["cloudwatch:namespace"]
    assert sorted([allowed] if isinstance(allowed, str) else allowed) == sorted(spaces)
    assert (NEURON_NAMESPACE in spaces) == (p.training.accelerator_kind == "trainium")

    # Every CWAgent metric a widget or alarm reads is one the configuration publishes, with its dimensions and value.
    read = []
    for r in template["Resources"].values():
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["Namespace"] == NAMESPACE:
            props = r["Properties"]
            read.append((props["MetricName"], {d["Name"]: d["Value"] for d in props["Dimensions"]}))
        if r["Type"] == "AWS::CloudWatch::Dashboard":
            body = r["Properties"]["DashboardBody"]
            text = body if isinstance(body, str) else "".join(x if isinstance(x, str) else "TOKEN"
                                                                for x in body["Fn::Join"][1])
            for widget in json.loads(text)["widgets"]:
                for row in widget["properties"].get("metrics", []):
                    fields = row[:-1] if isinstance(row[-1], dict) else row
                    if fields and fields[0] == NAMESPACE:
                        read.append((fields[1], dict(zip(fields[2::2], fields[3::2]))))
    assert read, f"{name}: the cluster dashboard reads nothing the agent publishes"
    for metric, dims in read:
        key = f"{NAMESPACE}:{metric}"
        assert key in made, f"{name}: {key} is read but the nodes' agent is not configured to publish it"
        assert tuple(dims) == made[key] and dims[DIMENSION] == cluster, (key, dims)
    idle = [a for a in training_alarms(fsx_capacity_gib=None, gpu_nodes=True)]
    if p.training.accelerator_kind == "nvidia-gpu":
        assert {a.metric for a in idle} <= set(made)
        assert any(m == "nvidia_smi_utilization_gpu" for m, _ in read)


# ------------------------------------------------------------------ the boot lines, run in a sandbox

AGENT_STUB = '#!/bin/bash\necho "$*" >> "$STATE/agent.log"\nexit "${STUB_AGENT_RC:-0}"'
SYSTEMCTL_STUB = '#!/bin/bash\necho "$*" >> "$STATE/systemctl.log"\n[[ "$1" != enable ]] || exit "${STUB_UNIT_RC:-0}"'


def _boot(tmp_path, kind: str, **env_extra: str):
    script = node_script(accelerator_kind=kind, mounts=LUSTRE, efa=True,
                         metrics=Metrics(cluster="vision-TrainStack", region="us-west-2"))
    assert not shellcheck(script), shellcheck(script)
    root, state, stubs = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    for d in (root / "etc", state, stubs, root / AGENT_CTL.lstrip("/").rsplit("/", 1)[0]):
        d.mkdir(parents=True)
    (root / "etc" / "fstab").write_text("")
    (state / "mount-failures").write_text("0")
    for name, body in {**STUBS, "systemctl": SYSTEMCTL_STUB}.items():
        (stubs / name).write_text(body + "\n")
        (stubs / name).chmod(0o755)
    ctl = root / AGENT_CTL.lstrip("/")
    ctl.write_text(AGENT_STUB + "\n")
    ctl.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "ML_ESTATE_ROOT": str(root), "STATE": str(state), **env_extra}
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)

    def lines(name: str) -> list[str]:
        return (state / name).read_text().splitlines() if (state / name).exists() else []
    return run, {"root": root, "env": env, "agent": lines("agent.log"), "systemctl": lines("systemctl.log")}


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_starts_the_agent_with_its_clusters_configuration(kind, tmp_path):
    run, seen = _boot(tmp_path, kind)
    assert run.returncode == 0, run.stderr
    written = json.loads((seen["root"] / AGENT_CONFIG.lstrip("/")).read_text())
    assert written == agent_config(cluster="vision-TrainStack", accelerator_kind=kind)
    assert seen["agent"] == [f"-a fetch-config -m ec2 -s -c file:{seen['root']}{AGENT_CONFIG}"]
    assert "warning" not in run.stderr
    unit = seen["root"] / NEURON_UNIT.lstrip("/")
    assert unit.exists() == (kind == "trainium")
    if kind == "trainium":
        assert "--namespace NeuronMonitor --region us-west-2" in unit.read_text()
        assert "enable --now ml-estate-neuron-monitor.service" in seen["systemctl"]
    assert _slurmd_would_start(seen)


@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_does_not_start_is_a_warning_and_the_node_still_takes_jobs(kind, tmp_path):
    run, seen = _boot(tmp_path, kind, STUB_AGENT_RC="1", STUB_UNIT_RC="1")
    assert run.returncode == 0, run.stderr
    assert "warning: the CloudWatch agent did not start" in run.stderr
    assert ("warning: neuron-monitor did not start" in run.stderr) == (kind == "trainium")
    assert "slurmd will not start" not in run.stderr and _slurmd_would_start(seen)
    assert (seen["root"] / "fsx" / "datasets").is_dir()  # the rest of the boot went on


# ------------------------------------------------------------------ the bake step, run in a sandbox

BAKE_STUBS = {
    "dpkg": '#!/bin/bash\necho "$*" >> "$SERVE/dpkg.log"',
    "apt-get": '#!/bin/bash\necho "$*" >> "$SERVE/apt.log"',
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    made = make_keys(tmp_path_factory.mktemp("keys"))
    yield made
    stop_agents(made)


def _bake(tmp_path, kind: str, keys, monkeypatch, *, key_file=("pinned",), signer="pinned"):
    """The bake step's own shell with real gpg and gpgv, the agent's fingerprint pinned to the test's `pinned` key:
    curl serves a key file of `key_file`'s keys and a package signed by `signer`; dpkg and apt-get record calls."""
    import constructs_lib.node_metrics as node_metrics

    monkeypatch.setattr(node_metrics, "AGENT_KEY_FINGERPRINT", keys.fingerprint("pinned"))
    script, _ = node_metrics.bake_script(accelerator_kind=kind, apt="apt-get -o DPkg::Lock::Timeout=900")
    state, stubs = tmp_path / "state", tmp_path / "bin"
    state.mkdir(parents=True)
    curl_on_path(stubs)
    for name, body in BAKE_STUBS.items():
        (stubs / name).write_text(body + "\n")
        (stubs / name).chmod(0o755)
    keys.key_file(state / "amazon-cloudwatch-agent.gpg", *key_file)
    (state / "amazon-cloudwatch-agent.deb").write_bytes(b"a package")
    keys.sign(signer, state / "amazon-cloudwatch-agent.deb")
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "SERVE": str(state), "TMPDIR": short_tmpdir()}
    run = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], capture_output=True, text=True, env=env,
                         timeout=60)

    def lines(name: str) -> list[str]:
        return (state / name).read_text().splitlines() if (state / name).exists() else []
    return run, {n: lines(f"{n}.log") for n in ("curl", "dpkg", "apt")}


@pytest.mark.parametrize("kind", KINDS)
def test_the_bake_installs_the_pinned_agent_once_its_signature_holds(kind, tmp_path, keys, monkeypatch):
    run, seen = _bake(tmp_path, kind, keys, monkeypatch)
    assert run.returncode == 0, run.stderr
    debs = [u for u in seen["curl"] if u.endswith(".deb")]
    assert debs == [f"https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/amd64/{AGENT_VERSION}/"
                    "amazon-cloudwatch-agent.deb"]
    assert not any("/latest/" in u for u in seen["curl"])
    assert seen["dpkg"] == ["-i -E ./amazon-cloudwatch-agent.deb"]
    assert bool(seen["apt"]) == (kind == "trainium")  # boto3 for Neuron's CloudWatch script


@pytest.mark.parametrize("key_file, signer, why", [
    (("pinned", "extra"), "extra", "not signed by the pinned key"),  # gpg --verify would call this good
    (("extra",), "extra", "the key file holds no key"),
    (("pinned",), "extra", "not signed by the pinned key"),
    (("impostor",), "impostor", "whose primary key is another's"),  # the pinned key bound as the impostor's subkey
])
def test_the_bake_installs_nothing_unverified(key_file, signer, why, tmp_path, keys, monkeypatch):
    run, seen = _bake(tmp_path, "nvidia-gpu", keys, monkeypatch, key_file=key_file, signer=signer)
    assert run.returncode != 0 and why in run.stderr
    assert seen["dpkg"] == []


@pytest.mark.parametrize("stack", load_software().stacks, ids=lambda s: s.device)
def test_every_node_image_bakes_the_agent_and_checks_it(stack):
    steps = {s.name: s for s in bake_steps(software=stack, region="us-west-2")}
    step = steps["InstallCloudWatchAgent"]
    assert f"test -x {AGENT_CTL}" in step.check
    assert ("neuron-monitor-cloudwatch.py" in step.check) == (stack.device != "cuda")
