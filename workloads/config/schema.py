"""The workload config: one frozen, validated object built once at the top.

Field names here are part of the interface (docs/configuration.md). Rules that need
the instance catalog or several fields at once live in `validators.py`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Framework = Literal["pytorch", "tensorflow", "xgboost", "scikit-learn"]
# What the network is: a decoder (an LLM, served by an LLM container and sized by its KV cache), an encoder (BERT-class,
# one forward pass a request), a vision model, or a tabular model.
Architecture = Literal["decoder", "encoder", "vision", "tabular"]
Storage = Literal["s3-file", "s3-fastfile", "efs", "fsx-lustre"]
Orchestrator = Literal["slurm", "hyperpod", "sagemaker-jobs"]
Traffic = Literal["steady", "spiky", "rare", "periodic"]
# What the model artifact is; each serving container reads one of these (workloads/planning/contracts.py).
ArtifactFormat = Literal["huggingface", "framework-archive", "xgboost", "scikit-learn"]
ARTIFACT_KEY = r"^[A-Za-z0-9._\-/]+$"
ARTIFACT_KEY_WORDS = "an S3 key in the dataset bucket: letters, digits and ._-/"

CLASSIC_ML: frozenset[str] = frozenset({"xgboost", "scikit-learn"})


class _Frozen(BaseModel):
    # strict: a boolean is not a number (`dataset_size_gib: true` is not 1 GiB), a number not a string; NaN and
    # infinity are no size, count or time (`.nan` would pass every `le` bound).
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True, allow_inf_nan=False)


class Model(_Frozen):
    parameters_billion: float = Field(gt=0, le=10_000)
    framework: Framework
    # Whether the model compiles with AWS Neuron: Trainium and Inferentia need it.
    neuron_supported: bool = True
    # Attention heads: a tensor-parallel degree must divide them. Absent: assumed from the size (the plan says so).
    attention_heads: int | None = Field(default=None, ge=1, le=1024)
    # Absent: inferred from the framework, the artifact format and the size (config/model.py architecture; the plan says so).
    architecture: Architecture | None = None
    # A decoder's shape (config.json's num_hidden_layers, hidden_size, num_key_value_heads, vocab_size), read by the
    # serving sizing (weights, KV cache) and by training's layout. Absent: the usual decoder at this size
    # (config/model.py model_shape), or model.family's, and a 32,000-entry vocabulary (Llama 2's) or the family's;
    # the plan says which are assumed.
    layers: int | None = Field(default=None, ge=1, le=1000)
    hidden_size: int | None = Field(default=None, ge=1, le=1_000_000)
    kv_heads: int | None = Field(default=None, ge=1, le=1024)
    # The SwiGLU width (config.json's intermediate_size): what the trainer builds and the plan counts parameters from.
    intermediate_size: int | None = Field(default=None, ge=1, le=10_000_000)
    vocab_size: int | None = Field(default=None, ge=1, le=10_000_000)
    # The decoder's family (catalog/model_families.yaml: llama2, llama3, llama3.1, llama3.2, mistral): its vocabulary,
    # rotary embedding and the published shape nearest parameters_billion, for whatever the fields above leave out.
    family: str | None = None

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str | None) -> str | None:
        from ..catalog.model_families import load_families
        if value is not None and value not in load_families():
            raise ValueError(f"not a decoder family the catalog records (catalog/model_families.yaml); allowed: "
                             f"{', '.join(load_families())}")
        return value


class Data(_Frozen):
    dataset_size_gib: float = Field(gt=0, le=10_000_000)
    storage: Storage | None = None  # the planner chooses when absent
    # Training tokens per epoch; derived from the dataset size when absent.
    tokens_billion: float | None = Field(default=None, gt=0)
    termination_protection: bool = False
    # An EFS file system mounted at /home on every node (shared home directories).
    shared_home: bool = False


class Training(_Frozen):
    instance_type: str | None = None  # the planner chooses when absent
    instance_count: int | None = Field(default=None, ge=1, le=512)
    orchestrator: Orchestrator | None = None
    capacity_reservation_id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$",
                                                description="cr- and 8 to 17 hex digits (a capacity reservation)")
    # The reservation's AZ (describe-capacity-reservations): it must be the cluster's AZ.
    capacity_reservation_az: str | None = None
    # The reservation is an EC2 Capacity Block for ML (market type capacity-block).
    capacity_block: bool = False
    epochs: float = Field(default=1, gt=0, le=1000)
    # Wall-clock target the planner sizes the cluster for when instance_count is open.
    max_hours: float | None = Field(default=None, gt=0, le=24 * 365)
    # Managed spot: allowed when the job tolerates interruption (checkpoints to S3).
    spot: bool = False
    # Compute precision: None = fp8 where the accelerator has FP8 tensor cores (Hopper, Blackwell) and the model's
    # linears take it (planning/precision.py), else bf16, or fp16 (with loss scaling) where there is no bf16 (T4, V100).
    precision: Literal["bf16", "fp8", "fp16"] | None = None
    # Tokens per training sequence and per optimizer step (the global batch, fixed whatever the node count: gradient
    # accumulation makes it up). Absent: 4,096 and Llama 2's 4M tokens (parallelism.SEQUENCE, GLOBAL_BATCH_TOKENS);
    # the plan says so.
    sequence_length: int | None = Field(default=None, ge=128, le=1_048_576)
    global_batch_tokens: int | None = Field(default=None, ge=128, le=1 << 30)
    # Fine-tuning: the base model the run starts from, a Hugging Face directory (config.json and *.safetensors of a
    # Llama decoder) in the dataset bucket under datasets/ (on FSx at /fsx/datasets/..., in a SageMaker job's train
    # channel) or a directory on FSx (/fsx/..., clusters only). The trainer reads it sharded into the layout and trains
    # with a fine-tuning recipe (examples/slurm/finetune.py). Absent: pre-training from random weights.
    init_from: str | None = Field(default=None, pattern=r"^(datasets/|/fsx/)[A-Za-z0-9._\-/]+$",
                                  description="a path under datasets/ (the dataset bucket) or /fsx/: letters, digits, "
                                  "._-/")
    # A SageMaker training plan (reserved capacity) for the HyperPod worker group or the training jobs.
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$",
        description="a training plan's ARN: arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME")

    # How often the workload trains (a nightly retrain): an EventBridge schedule, cron(...) or rate(...) as
    # inference.batch.schedule, or runs a month. The monthly estimate counts every run; absent: one run.
    schedule: str | None = None

    @field_validator("schedule")
    @classmethod
    def _training_schedule(cls, value: str | None) -> str | None:
        from .schedules import check_schedule  # the same EventBridge rules as inference.batch.schedule
        return None if value is None else check_schedule(value)
    runs_per_month: float | None = Field(default=None, gt=0, le=50_000)

    @model_validator(mode="after")
    def _base_model_reachable(self) -> "Training":
        if self.init_from and self.init_from.startswith("/fsx/") and self.orchestrator == "sagemaker-jobs":
            raise ValueError(f"init_from {self.init_from}: a SageMaker job has no FSx; give the base model's key "
                             "under datasets/ (the job's train channel)")
        return self

    @field_validator("instance_type")
    @classmethod
    def _ec2_name(cls, value: str | None) -> str | None:
        # Training types are named in EC2 form; the ml. form is accepted and normalised.
        return value.removeprefix("ml.") if value else value

    @model_validator(mode="after")
    def _one_frequency(self) -> "Training":
        if self.schedule and self.runs_per_month:
            raise ValueError(f"schedule {self.schedule!r} and runs_per_month {self.runs_per_month:g} both set; "
                             "allowed: one of them")
        return self


class Realtime(_Frozen):
    instance_type: str | None = None
    # this kind's own artifact
    artifact_key: str | None = Field(default=None, pattern=ARTIFACT_KEY, description=ARTIFACT_KEY_WORDS)
    min_instances: int = Field(default=1, ge=1, le=100)
    max_instances: int = Field(default=2, ge=1, le=100)
    # Scaling target: invocations per instance per minute.
    invocations_per_instance: int = Field(default=100, ge=1, le=100_000)
    # Share of requests and responses captured to S3 (0: off).
    data_capture_percent: int = Field(default=0, ge=0, le=100)

    @model_validator(mode="after")
    def _max_at_least_min(self) -> "Realtime":
        if self.max_instances < self.min_instances:
            raise ValueError(f"max_instances {self.max_instances} is below min_instances {self.min_instances}; "
                             f"allowed: max_instances >= {self.min_instances}")
        return self


SERVERLESS_MAX_MB = 6144  # the most memory a serverless endpoint may have (the field's bound below)


class Serverless(_Frozen):
    # this kind's own artifact
    artifact_key: str | None = Field(default=None, pattern=ARTIFACT_KEY, description=ARTIFACT_KEY_WORDS)
    memory_mb: int = Field(default=2048, ge=1024, le=SERVERLESS_MAX_MB, multiple_of=1024)
    max_concurrency: int = Field(default=20, ge=1, le=200)
    provisioned_concurrency: int | None = Field(default=None, ge=1, le=200)

    @model_validator(mode="after")
    def _provisioned_within_max(self) -> "Serverless":
        if self.provisioned_concurrency and self.provisioned_concurrency > self.max_concurrency:
            raise ValueError(f"provisioned_concurrency {self.provisioned_concurrency} exceeds max_concurrency "
                             f"{self.max_concurrency}; allowed: provisioned_concurrency <= {self.max_concurrency}")
        return self


class Async(_Frozen):
    instance_type: str | None = None
    # this kind's own artifact
    artifact_key: str | None = Field(default=None, pattern=ARTIFACT_KEY, description=ARTIFACT_KEY_WORDS)
    max_instances: int = Field(default=2, ge=1, le=100)
    # Absent: the plan's per-instance concurrency (workloads/planning/async_client.py).
    max_concurrent_invocations_per_instance: int | None = Field(default=None, ge=1, le=1000)


# SageMaker API Reference, CreateTransformJob MaxPayloadInMB: "cannot be greater than 100 MB ... the value of
# (MaxConcurrentTransforms * MaxPayloadInMB) also cannot exceed 100 MB".
TRANSFORM_MAX_MB = 100


class Batch(_Frozen):
    instance_type: str | None = None
    # this kind's own artifact
    artifact_key: str | None = Field(default=None, pattern=ARTIFACT_KEY, description=ARTIFACT_KEY_WORDS)
    instance_count: int = Field(default=1, ge=1, le=100)
    # An EventBridge schedule, checked field by field (config/schedules.py, from the EventBridge user guide).
    schedule: str = "cron(0 2 * * ? *)"
    max_payload_mb: int = Field(default=6, ge=1, le=TRANSFORM_MAX_MB)
    # Requests in flight per instance. Absent: the plan sets it to what the container serves at once (and prices
    # the job at that), within TRANSFORM_MAX_MB / max_payload_mb.
    max_concurrent_transforms: int | None = Field(default=None, ge=1, le=TRANSFORM_MAX_MB)
    # Records one scheduled run scores (for its cost); absent: an hour of inference.requests_per_second, said so.
    records_per_run: int | None = Field(default=None, ge=1, le=10_000_000_000)

    @model_validator(mode="after")
    def _payload_times_concurrency(self) -> "Batch":
        if self.max_concurrent_transforms and self.max_payload_mb * self.max_concurrent_transforms > TRANSFORM_MAX_MB:
            raise ValueError(f"max_concurrent_transforms x max_payload_mb = "
                             f"{self.max_concurrent_transforms * self.max_payload_mb} MB exceeds {TRANSFORM_MAX_MB} MB; "
                             f"allowed: max_concurrent_transforms <= {TRANSFORM_MAX_MB // self.max_payload_mb}")
        return self

    @field_validator("schedule")
    @classmethod
    def _eventbridge_schedule(cls, value: str) -> str:
        from .schedules import check_schedule  # the rules' table is read only where a batch section is
        return check_schedule(value)

    def concurrency_limit(self) -> int:
        """The most requests in flight the job may have: the configured value, or what the payload rule allows."""
        return self.max_concurrent_transforms or TRANSFORM_MAX_MB // self.max_payload_mb


class Artifact(_Frozen):
    """The model artifact in the dataset bucket (upload it before deploying the InferenceStack).

    huggingface: a Hugging Face model directory (config.json, safetensors, tokenizer) under a prefix
    ending in "/", served uncompressed by an LLM serving container; on Inferentia2 the directory is
    the Neuron export (optimum-cli export neuron) with the plan's batch, sequence and core count.
    framework-archive: model.tar.gz with the weights and code/inference.py (PyTorch: Ray Serve; TensorFlow Serving).
    xgboost: model.tar.gz holding the booster saved as `xgboost-model`.
    scikit-learn: model.tar.gz holding the model (joblib) and code/inference.py with model_fn.
    """

    format: ArtifactFormat | None = None  # from the framework when absent
    # default per format (docs/inference.md)
    key: str | None = Field(default=None, pattern=ARTIFACT_KEY, description=ARTIFACT_KEY_WORDS)


class Generation(_Frozen):
    """LLM serving limits: the serving container reserves memory for them and refuses longer requests."""

    max_input_tokens: int = Field(default=2048, ge=1, le=1_000_000)
    max_total_tokens: int = Field(default=4096, ge=2, le=1_000_000)  # input plus generated tokens
    # Requests decoded together (continuous batching). Absent: the planner sizes it from the latency targets and the
    # KV-cache room, up to what the container publishes.
    max_batch_size: int | None = Field(default=None, ge=1, le=512)
    dtype: Literal["bf16", "fp16"] = "bf16"
    # FP8 serving (vLLM --quantization fp8 --kv-cache-dtype fp8, workloads/planning/fp8_serving.py). Absent: FP8
    # candidates are compared beside the checkpoint's dtype where the GPU computes in FP8 (and warned when chosen);
    # none: never FP8; fp8: FP8 only (GPUs without FP8 are not candidates).
    quantization: Literal["fp8", "none"] | None = None
    # A typical request, for sizing (absent: 512 in, 128 out, within the limits above).
    typical_input_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    typical_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _input_below_total(self) -> "Generation":
        if self.max_input_tokens >= self.max_total_tokens:
            raise ValueError(f"max_input_tokens {self.max_input_tokens} must be below max_total_tokens "
                             f"{self.max_total_tokens}; allowed: max_input_tokens < {self.max_total_tokens}")
        if self.typical_input_tokens and self.typical_input_tokens > self.max_input_tokens:
            raise ValueError(f"typical_input_tokens {self.typical_input_tokens} exceeds max_input_tokens "
                             f"{self.max_input_tokens}; allowed: typical_input_tokens <= {self.max_input_tokens}")
        tokens_in, tokens_out = self.typical()
        if tokens_in + tokens_out > self.max_total_tokens:
            raise ValueError(f"a typical request of {tokens_in} + {tokens_out} tokens (typical_input_tokens + "
                             f"typical_output_tokens) exceeds max_total_tokens {self.max_total_tokens}; allowed: "
                             f"typical_input_tokens + typical_output_tokens <= {self.max_total_tokens}")
        return self

    def typical(self) -> tuple[int, int]:
        """(input, output) tokens of a typical request."""
        tokens_in = self.typical_input_tokens or min(512, self.max_input_tokens)
        return tokens_in, self.typical_output_tokens or max(1, min(128, self.max_total_tokens - tokens_in))


class Inference(_Frozen):
    # False: training only, no endpoints planned or deployed (kinds listed too are not deployed: a WARNING says so).
    # A workload without an inference section, or with `inference: none` (or null), is read as {serve: false}; the
    # other fields keep their defaults, so what reads them for training (the exported artifact's format and key)
    # works unchanged. `-c inference.serve=false` keeps a preset's artifact settings; `-c inference=none` drops them.
    serve: bool = True
    artifact: Artifact = Artifact()
    generation: Generation = Generation()
    # What the traffic looks like; the planner picks the kinds from it when no kind is listed.
    traffic: Traffic = "steady"
    payload_mb: float = Field(default=0.1, gt=0, le=1024)  # a typical request
    processing_seconds: float = Field(default=0.5, gt=0, le=3600)  # time to serve one request
    latency_ms: int | None = Field(default=None, ge=1)  # whole request, p95 target; absent: not latency-sensitive
    # LLM targets a user states: time to first token and time per output token (absent: none).
    time_to_first_token_ms: int | None = Field(default=None, ge=1)
    time_per_output_token_ms: int | None = Field(default=None, ge=1)
    requests_per_second: float = Field(default=10, gt=0, le=1_000_000)  # at peak
    realtime: Realtime | None = None
    serverless: Serverless | None = None
    async_: Async | None = Field(default=None, alias="async")
    batch: Batch | None = None

    def listed(self) -> dict[str, Realtime | Serverless | Async | Batch]:
        """The kinds the config lists, by name."""
        return {k: v for k, v in (("realtime", self.realtime), ("serverless", self.serverless),
                                  ("async", self.async_), ("batch", self.batch)) if v is not None}


# What `inference:` may say for a training-only workload (YAML `none`, or `null` / `~`, or no section at all).
NO_INFERENCE = (None, "none")


class Notebook(_Frozen):
    """A small notebook that stops itself when idle (the seeds' cost guardrail)."""

    instance_type: str = "ml.t3.medium"
    idle_minutes: int = Field(default=60, ge=5, le=1440)


class Workload(_Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$",
                      description="lowercase letters, digits and hyphens, a letter first, at most 31 characters")
    region: str
    availability_zone: str
    # Hosted endpoints span two AZs (availability_zone and this one); absent: another zone of the region from the
    # catalog. Clusters, FSx and jobs stay in availability_zone.
    second_availability_zone: str | None = None
    model: Model
    data: Data
    training: Training = Training()
    inference: Inference = Inference(serve=False)  # absent: training only
    notebook: Notebook | None = None

    @model_validator(mode="before")
    @classmethod
    def _training_only(cls, data: object) -> object:
        """No inference section, or `inference: none`: training only (Inference.serve false)."""
        if isinstance(data, dict) and data.get("inference", None) in NO_INFERENCE:
            return {**data, "inference": {"serve": False}}
        return data
