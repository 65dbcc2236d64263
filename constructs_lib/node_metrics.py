"""What the Slurm nodes publish to CloudWatch, from one table: the CloudWatch agent (memory, and on NVIDIA nodes its
nvidia_gpu section) rolled up to the cluster's own dimension, and on Trainium Neuron's monitor piped to its CloudWatch
companion script. The bake installs both (bake_script), each node's user data writes the agent's configuration
and starts them (boot_lines), the node role may publish to exactly these namespaces (namespaces), and the training
dashboard and idle alarm read only metrics published() finds in the configuration (tests/test_node_metrics.py holds
all four together and to workloads/catalog/metrics.yaml).
"""

from __future__ import annotations

import json
import re

from .signed_download import pinned_keyring, verified

# The agent's package, pinned and verified as the CloudWatch User Guide shows ("Verifying the signature of the
# CloudWatch agent package", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/verify-CloudWatch-Agent-Package-Signature.html):
# the public key from .../assets/amazon-cloudwatch-agent.gpg, its fingerprint checked against the published one, then
# the package's detached .sig; the Ubuntu amd64 package lives at .../ubuntu/amd64/<latest>/amazon-cloudwatch-agent.deb.
# The version: AWS Elastic Beanstalk's platform release notes (2026-09-16) name CloudWatch agent 1.300072.0b1766
# (https://docs.aws.amazon.com/elasticbeanstalk/latest/relnotes/release-2026-09-16-windows.html). NOT CONFIRMED at
# AWS's source: that the bucket serves a version in place of `latest` (the guide's table shows `latest` only; the
# versioned path is seen in third-party build scripts). A version that is not there fails the bake (curl -f), and
# nothing unsigned is ever installed.
AGENT_VERSION = "1.300072.0b1766"
AGENT_BUCKET = "https://amazoncloudwatch-agent.s3.amazonaws.com"
AGENT_KEY_FINGERPRINT = "9376 16F3 450B 7D80 6CBD 9725 D581 6730 3B78 9C72"
AGENT_HOME = "/opt/aws/amazon-cloudwatch-agent"
AGENT_CTL = f"{AGENT_HOME}/bin/amazon-cloudwatch-agent-ctl"
AGENT_CONFIG = f"{AGENT_HOME}/etc/ml-estate.json"

# The agent's default namespace (CloudWatch User Guide, "Manually create or edit the CloudWatch agent configuration
# file": metrics `namespace`, default CWAgent), written explicitly so the role's condition and the config agree.
NAMESPACE = "CWAgent"
# A per-section custom dimension (append_dimensions, "Common scenarios with the CloudWatch agent": custom dimensions)
# rolled up by aggregation_dimensions: the agent publishes each metric once more with only this dimension, so one
# series per cluster averages every node and GPU (the agent's Rollup Processor keeps only the group's attributes and
# skips data points that lack one).
DIMENSION = "Cluster"
INTERVAL_S = 60  # one sample a node a minute: SampleCount over a minute counts the nodes reporting

# Section -> (measurement as configured, metric name as published). NVIDIA: CloudWatch User Guide, "Collect NVIDIA
# GPU metrics" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-NVIDIA-GPU.html):
# utilization_gpu is published as nvidia_smi_utilization_gpu, and so on. mem: the configuration page's sample.
SECTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "mem": (("mem_used_percent", "mem_used_percent"),),
    "nvidia_gpu": (("utilization_gpu", "nvidia_smi_utilization_gpu"),
                   ("utilization_memory", "nvidia_smi_utilization_memory"),
                   ("memory_used", "nvidia_smi_memory_used")),
}

# Trainium: the Neuron Monitor User Guide's CloudWatch path, `neuron-monitor | neuron-monitor-cloudwatch.py
# --namespace <namespace> --region <region>`, the script installed with neuron-monitor at this path and needing
# python3 with boto3 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-monitor-user-guide.html,
# "Companion scripts"). The namespace is ours to name. The metric names the script publishes are NOT CONFIRMED at the
# source (the guide does not list them): the dashboard draws none of them; they are browsable under this namespace.
NEURON_NAMESPACE = "NeuronMonitor"
NEURON_MONITOR = "/opt/aws/neuron/bin/neuron-monitor"
NEURON_CLOUDWATCH = "/opt/aws/neuron/bin/neuron-monitor-cloudwatch.py"
NEURON_UNIT = "/etc/systemd/system/ml-estate-neuron-monitor.service"


# The trainer's own metrics (examples/slurm/evaluation.py: loss, tokens/s, MFU beside the plan's, held-out loss) are
# CloudWatch embedded metric format lines that rank 0 appends to a node-local file: the sbatch scripts export
# TRAIN_METRICS_FILE there when the node made the directory. The agent ships the file to the TrainStack's log group
# ("logs" section, collect_list), where CloudWatch Logs extracts the metrics: EMF sent with PutLogEvents needs no header
# (CloudWatch User Guide, "Using the PutLogEvents API to send manually-created embedded metric format logs",
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Generation_PutLogEvents.html).
# One stream per instance; the directory is sticky and world-writable, as /tmp, for jobs of any user.
TRAIN_METRICS_DIR = "/var/log/ml-estate"
TRAIN_METRICS_FILE = f"{TRAIN_METRICS_DIR}/train-metrics.log"


def sections(accelerator_kind: str | None) -> tuple[str, ...]:
    return ("mem", "nvidia_gpu") if accelerator_kind == "nvidia-gpu" else ("mem",)


def namespaces(accelerator_kind: str | None) -> tuple[str, ...]:
    """Where the nodes of this kind publish: the node role's cloudwatch:namespace condition."""
    return (NAMESPACE, NEURON_NAMESPACE) if accelerator_kind == "trainium" else (NAMESPACE,)


def agent_config(*, cluster: str, accelerator_kind: str | None, training_log_group: str | None = None) -> dict:
    """The agent's configuration for a node of `cluster` (the Cluster dimension's value: the TrainStack's name); with
    `training_log_group`, it also ships the trainer's metrics file there."""
    config = {"agent": {"metrics_collection_interval": INTERVAL_S},
              "metrics": {"namespace": NAMESPACE, "aggregation_dimensions": [[DIMENSION]], "metrics_collected": {
                  section: {"measurement": [m for m, _ in SECTIONS[section]], "append_dimensions": {DIMENSION: cluster}}
                  for section in sections(accelerator_kind)}}}
    if training_log_group:
        config["logs"] = {"logs_collected": {"files": {"collect_list": [{
            "file_path": TRAIN_METRICS_FILE, "log_group_name": training_log_group, "log_stream_name": "{instance_id}"}]}}}
    return config


def published(config: dict) -> dict[str, tuple[str, ...]]:
    """'NAMESPACE:MetricName' -> dimensions, for every rolled-up metric this configuration makes the agent publish (read
    from the configuration itself: a section, measurement or dimension removed there disappears here)."""
    metrics = config["metrics"]
    namespace = metrics.get("namespace", "CWAgent")
    out = {}
    for section, body in metrics["metrics_collected"].items():
        names = dict(SECTIONS[section])
        for measurement in body["measurement"]:
            for group in metrics.get("aggregation_dimensions", []):
                if all(d in body.get("append_dimensions", {}) for d in group):  # a group the points carry
                    out[f"{namespace}:{names[measurement]}"] = tuple(group)
    return out


def bake_script(*, accelerator_kind: str | None, apt: str) -> tuple[str, str]:
    """The bake step's (script, check): the pinned agent package, installed only if its signature is good under the
    fingerprint-checked AWS key; on Trainium, boto3 for Neuron's CloudWatch script (with `apt`, the image's apt-get
    command). Nothing is started at bake time: each node starts them with its own configuration."""
    deb = f"{AGENT_BUCKET}/ubuntu/amd64/{AGENT_VERSION}/amazon-cloudwatch-agent.deb"
    script = f"""WORK=$(mktemp -d)
cd "$WORK"
{pinned_keyring(key_url=f"{AGENT_BUCKET}/assets/amazon-cloudwatch-agent.gpg", fingerprint=AGENT_KEY_FINGERPRINT,
                keyring="$WORK/agent-pinned.gpg", what="CloudWatch agent key")}
{verified(url=deb, name="amazon-cloudwatch-agent.deb", keyring="$WORK/agent-pinned.gpg",
          fingerprint=AGENT_KEY_FINGERPRINT)}
dpkg -i -E ./amazon-cloudwatch-agent.deb"""
    check = f"test -x {AGENT_CTL}"
    if accelerator_kind == "trainium":
        script += f"\n{apt} install -y python3-boto3"
        check += f" && test -x {NEURON_MONITOR} && test -f {NEURON_CLOUDWATCH} && python3 -c 'import boto3'"
    return script, check


def boot_lines(*, cluster: str, accelerator_kind: str | None, region: str,
               training_log_group: str | None = None) -> list[str]:
    """User data lines (paths under $R, node_bootstrap.node_script's sandbox root): write the agent's configuration
    and start it; on Trainium, run Neuron's monitor into CloudWatch as a service. Monitoring is not the node's job:
    if either fails the node still takes jobs, and says so."""
    config = json.dumps(agent_config(cluster=cluster, accelerator_kind=accelerator_kind,
                                     training_log_group=training_log_group), sort_keys=True)
    lines = ["# The CloudWatch agent (node_metrics.py): the cluster's dashboard and idle alarm read what it publishes",
             f'mkdir -p "$R{AGENT_CONFIG.rsplit("/", 1)[0]}"', f"cat > \"$R{AGENT_CONFIG}\" <<'EOF'", config, "EOF",
             f'if ! "$R{AGENT_CTL}" -a fetch-config -m ec2 -s -c "file:$R{AGENT_CONFIG}"; then',
             '  echo "warning: the CloudWatch agent did not start: the cluster dashboard misses this node '
             f'(see {AGENT_HOME}/logs); it still takes jobs" >&2',
             "fi"]
    if training_log_group:
        lines += ["# Where training jobs write their metrics for the agent to ship (the sbatch scripts look for it)",
                  f'install -d -m 1777 "$R{TRAIN_METRICS_DIR}"']
    if accelerator_kind == "trainium":
        pipe = f"{NEURON_MONITOR} | python3 {NEURON_CLOUDWATCH} --namespace {NEURON_NAMESPACE} --region {region}"
        unit = NEURON_UNIT.rsplit("/", 1)[1]
        lines += ["# Neuron's monitor into CloudWatch, restarted if it stops",
                  f'mkdir -p "$R{NEURON_UNIT.rsplit("/", 1)[0]}"', f"cat > \"$R{NEURON_UNIT}\" <<'EOF'",
                  "[Unit]", "Description=neuron-monitor to CloudWatch", "After=network-online.target",
                  "Wants=network-online.target", "[Service]", f"ExecStart=/bin/bash -c '{pipe}'", "Restart=always",
                  "RestartSec=30", "[Install]", "WantedBy=multi-user.target", "EOF",
                  f"if ! {{ systemctl daemon-reload && systemctl enable --now {unit}; }}; then",
                  '  echo "warning: neuron-monitor did not start: no Neuron metrics from this node; it still takes '
                  'jobs" >&2',
                  "fi"]
    return lines


def read_back(user_data: str) -> tuple[dict | None, tuple[str, ...]]:
    """From a node's user data (its text, tokens resolved or not): the agent configuration it writes, or None, and
    every namespace it publishes to (the configuration's, and Neuron's monitor's --namespace)."""
    found = re.search(re.escape(AGENT_CONFIG) + r"\" <<'EOF'\n(.*?)\nEOF\n", user_data, re.S)
    config = json.loads(found.group(1)) if found else None
    spaces = [config["metrics"].get("namespace", "CWAgent")] if config else []
    spaces += re.findall(re.escape(NEURON_CLOUDWATCH) + r" --namespace (\S+)", user_data)
    return config, tuple(dict.fromkeys(spaces))
