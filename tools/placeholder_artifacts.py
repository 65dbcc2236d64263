"""Placeholder model artifacts for the emulator, which runs no container: they only make the InferenceStack's
artifact check pass (constructs_lib/endpoints/artifact_check.py). Never a model; built without torch."""

from __future__ import annotations

import io
import json
import tarfile

from workloads.planning.artifacts import ArtifactCheck, artifact_checks
from workloads.planning.planner import Plan
from workloads.config.model import attention_heads, model_shape

NOTE = "placeholder for the local emulator, which runs no container: not a model"


def placeholder(check: ArtifactCheck, plan: Plan) -> bytes:
    """The proof object's body: a Hugging Face config.json of the plan's model shape, or a small model.tar.gz."""
    if check.key.endswith("config.json"):
        layers, _, kv_heads, hidden = model_shape(plan.workload)
        return json.dumps({"_comment": NOTE, "model_type": "llama", "num_hidden_layers": layers,
                           "num_attention_heads": attention_heads(plan.workload)[0], "num_key_value_heads": kv_heads,
                           "hidden_size": hidden}, indent=2).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        body = NOTE.encode() + b"\n"
        info = tarfile.TarInfo("PLACEHOLDER.txt")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def upload_placeholders(s3, bucket: str, plan: Plan) -> list[str]:
    """Put a placeholder at every key the InferenceStack's check looks for; the keys written."""
    keys = []
    for check in artifact_checks(plan.training, plan.inference):
        s3.put_object(Bucket=bucket, Key=check.key, Body=placeholder(check, plan))
        keys.append(check.key)
    return keys
