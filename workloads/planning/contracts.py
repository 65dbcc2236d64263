"""Serving contracts: which container serves each inference kind, the artifact it reads and the
environment it needs to start. Pure Python: the CDK side turns `Container.image` into a URI with
the sagemaker SDK's image_uris (constructs_lib/images.py).

What each container needs, checked at its source on 2026-11-22 (vLLM on 2026-11-25):

- AWS's vLLM DLC for SageMaker, Amazon Linux 2023 build (sagemaker image `vllm-server` 2.6, tag
  server-sagemaker-cuda-v2.6, vLLM 0.30.0, CUDA 13.0; checked 2026-11-28): its sagemaker_entrypoint.sh runs
  sagemaker_args.py, which turns every SM_VLLM_<FLAG> variable into `--<flag>` of vLLM's OpenAI server (SM_VLLM_TENSOR_PARALLEL_SIZE=8 ->
  --tensor-parallel-size 8) and, when SM_VLLM_MODEL is unset, serves /opt/ml/model if it holds files, else
  HF_MODEL_ID (aws/deep-learning-containers e0ecedea, scripts/docker/vllm/sagemaker_entrypoint.sh and
  sagemaker_args.py; docker/vllm/Dockerfile.amzn2023 target vllm-sagemaker-amzn2023). Chosen over LMI (`djl-lmi`,
  which the SDK also resolves): the DLC runs upstream vLLM's own server with any vLLM flag, and AWS recommends its
  Amazon Linux images over the Ubuntu vLLM builds, which it cannot guarantee to patch (DLC Framework Support
  Policy, https://aws.github.io/deep-learning-containers/reference/support_policy/).
- vLLM on Neuron (Hugging Face's `huggingface-vllm-inference-neuronx`, vLLM 0.11.0 on optimum-neuron 0.4.5, Neuron SDK
  2.26.1, NxD Inference): its entrypoint turns every SM_ON_<ARG> variable into `--<arg>` of `optimum-cli neuron serve`
  (SM_ON_TENSOR_PARALLEL_SIZE=24 -> --tensor_parallel_size 24; huggingface/optimum-neuron v0.4.5, docker/vllm/
  Dockerfile). `serve` reads the model directory's Neuron config and refuses a batch_size, sequence_length or
  tensor_parallel_size that differs from the export's, or an export for another instance family; without a Neuron
  config it looks the model up in the Hugging Face Hub cache, which a network-isolated endpoint cannot reach, so the
  artifact must be the Neuron export itself. It then starts vLLM's OpenAI server with --max-num-seqs = batch_size and
  --max-model-len = sequence_length (optimum/commands/neuron/serve.py).
- Ray Serve DLC for SageMaker (`ray-serve` 1.4, Ray 2.57, PyTorch, Amazon Linux 2023) for PyTorch models that are not
  LLMs: the PyTorch 2.6 TorchServe images ended on 2026-06-30 and AWS's PyTorch images since are not configured for
  serving ("For inference workloads, use the vLLM, vLLM-Omni, or Ray DLCs": aws/deep-learning-containers e0ecedea,
  docs/pytorch/deployment/sagemaker.md). Its sagemaker_entrypoint.sh puts /opt/ml/model and /opt/ml/model/code on
  PYTHONPATH, pip-installs code/requirements.txt if present (fails with no internet), and runs `serve run` on
  /opt/ml/model/config.yaml, else on SM_RAYSERVE_APP (module:app); sagemaker_serve.py proxies POST /invocations
  (body, Content-Type, Accept) to the application's route "/" (scripts/docker/ray/). Its GPU build needs a host AMI
  other than the default (docs/ray/deployment/sagemaker.md: "GPU deployments require inference_ami_version").
- TensorFlow DLC: the SageMaker inference toolkit loads the handler module named by SAGEMAKER_PROGRAM from code/
  inside the archive, and pip-installs code/requirements.txt at start, which fails on a network-isolated endpoint.
- XGBoost built-in container (`xgboost` 3.2-0: XGBoost 3.2.0, Python 3.12, Amazon Linux 2023 on a CUDA 12.9 base;
  checked 2026-11-25): built from aws/sagemaker-xgboost-container master (cb8df91, 2026-06-25) by the Deep Learning
  Containers (aws/deep-learning-containers e0ecedea, .github/config/image/xgboost/sagemaker.yml and
  docker/xgboost/{Dockerfile,pyproject.toml}). Without SAGEMAKER_PROGRAM it serves in algorithm mode
  (serving.py main: `serving_env.module_name is None`), loading every top-level file of model.tar.gz as a booster
  (serve_utils.get_loaded_booster, ensemble on unless SAGEMAKER_INFERENCE_ENSEMBLE is "false"): first as a pickle,
  else with Booster.load_model, which reads the UBJSON XGBoost 3 saves (the repository's own test model
  `xgboost-model` was regenerated "with XGBoost 3.2.0 native UBJSON format", 7eefe63). So the archive holds only the
  booster, by convention `xgboost-model`; no environment needed. Since 1.7-1: libsvm requests with 1-based indices
  are shifted to 0-based, recordio-protobuf is parsed without MLIO, and a script-mode module is imported by name
  (importlib) rather than from SAGEMAKER_SUBMIT_DIRECTORY; the content types are the same.
- scikit-learn container (`sklearn` 1.9-0: scikit-learn 1.9.0, Python 3.12, Amazon Linux 2023; checked 2026-11-25):
  built from aws/sagemaker-scikit-learn-container master (eae7b6b, 2026-07-14) by the Deep Learning Containers
  (.github/config/image/sklearn/sagemaker-1.9-0.yml, docker/sklearn/1.9-0/{Dockerfile,pyproject.toml}). Script mode:
  SAGEMAKER_PROGRAM and SAGEMAKER_SUBMIT_DIRECTORY name the script with model_fn inside the archive; the handler
  (handler_service.py, multi-model only) is unchanged since 1.2-1; the single-model path (serving.py main) now also
  takes a transform_fn (not with input_fn, predict_fn or output_fn). Its default_input_fn (sagemaker-containers
  encoders.decode) squeezes a one-row CSV request to 1-D, which scikit-learn refuses, so the shipped code/inference.py
  has its own input_fn (examples/classic/sklearn_inference.py). A joblib model loads in the scikit-learn it was saved
  with, so training and processing run the same image (workloads/commands/jobs.py).
- Uncompressed model data (S3Prefix, CompressionType None) is copied under /opt/ml/model
  (SageMaker Developer Guide, "Deploying uncompressed models").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..catalog import NEURON_CORES_PER_CHIP, InstanceType, devices, load_serving
from ..config.model import artifact_format, attention_heads, model_shape
from ..config.schema import Workload
from ..errors import ConfigError
from . import hosts, neuron_hosting, neuron_memory
from .fp8_serving import CHECKPOINT, WeightFormat, named

MODEL_DIR = "/opt/ml/model"
CODE_DIR = MODEL_DIR + "/code"
RAY_APP = "inference:app"  # the Ray Serve application: `app` in code/inference.py
DEFAULT_KEYS = {"huggingface": "models/llm/", "framework-archive": "models/model.tar.gz",
                "xgboost": "models/model.tar.gz", "scikit-learn": "models/model.tar.gz"}
# Weights and KV cache fill at most this share of accelerator memory; the rest is activations and runtime.
SERVING_MEMORY_FRACTION = 0.9


@dataclass(frozen=True)
class RequestContract:
    """What a container's /invocations reads, and how batch transform must cut and join a dataset for it.

    Batch transform (SageMaker API Reference, CreateTransformJob and TransformInput/TransformOutput): SplitType Line
    cuts the input files at newlines; BatchStrategy SingleRecord sends one line a request, MultiRecord as many lines
    as fit in MaxPayloadInMB; ContentType and Accept are the request's headers; AssembleWith Line puts a newline after
    each response in the output file.
    """

    reads: tuple[str, ...]  # the content types /invocations parses
    records: str  # "one": one document a request; "many": a request may carry a batch of lines
    content_type: str  # what batch transform sends (one of `reads`)
    accept: str  # what batch transform asks back
    source: str
    split_type: str = "Line"
    assemble_with: str = "Line"
    # A request of content_type the container parses: `invoke`'s default body. Features of a tabular model are the
    # user's; the sample has three, so send a row of yours (--data) to a model trained on other columns.
    sample: str = ""

    @property
    def batch_strategy(self) -> str:
        return "SingleRecord" if self.records == "one" else "MultiRecord"


# Checked at each container's source on 2026-11-22 (vLLM's on 2026-11-25).
_VLLM_REQUEST = RequestContract(
    reads=("application/json",), records="one", content_type="application/json", accept="application/json",
    source="vllm-project/vllm vllm/entrypoints/sagemaker/api_router.py: POST /invocations depends on "
           "validate_json_request (application/json only) and validates the one JSON body against each generate "
           "request type in turn (chat completion with messages, completion with prompt), answering with that "
           "endpoint's JSON",
    sample='{"prompt": "What is the capital of France?", "max_tokens": 32}')
REQUESTS = {
    "vllm": _VLLM_REQUEST,
    # optimum-neuron's serve runs vLLM 0.11.0's OpenAI server (run_server), whose /invocations takes the same JSON
    # requests. Read in vLLM's api_server.py of the 0.11 line as stored here, not at the v0.11.0 tag itself.
    "vllm-neuronx": _VLLM_REQUEST,
    # The adapter passes the body through; the application in code/inference.py parses it. The contract asks it to
    # read one JSON document a request, the adapter's default Content-Type and Accept.
    "ray-serve": RequestContract(
        reads=("application/json",), records="one", content_type="application/json", accept="application/json",
        source="aws/deep-learning-containers scripts/docker/ray/sagemaker_serve.py invocations: POST /invocations "
               "forwards the body with its Content-Type and Accept (application/json when absent) to the Ray Serve "
               "application's route '/', which parses it (code/inference.py's `app`: one JSON document a request)",
        sample="[[0.5, 1.5, 2.5]]"),
    "tensorflow": RequestContract(
        reads=("application/json", "application/jsonlines", "text/csv"), records="many",
        content_type="application/jsonlines", accept="application/jsonlines",
        source="aws/sagemaker-tensorflow-serving-container docker/build_artifacts/sagemaker/tensorflow-serving.js "
               "invocations: application/json, application/jsonlines and text/csv; json_lines_request turns each "
               "line into one of the request's instances",
        sample="[0.5, 1.5, 2.5]\n"),
    "xgboost": RequestContract(
        reads=("text/csv", "text/libsvm", "text/x-libsvm", "application/x-recordio-protobuf"), records="many",
        content_type="text/csv", accept="text/csv",
        source="aws/sagemaker-xgboost-container cb8df91 (built into sagemaker-xgboost 3.2-0) algorithm_mode/"
               "serve_utils.py parse_content_data (text/csv rows into one DMatrix; libsvm, 1-based indices shifted "
               "to 0-based; recordio-protobuf) and data_utils.get_content_type (no content type parses as libsvm); "
               "serve.py invocations writes one prediction a line in batch (SAGEMAKER_BATCH)",
        sample="0.5,1.5,2.5\n"),
    "sklearn": RequestContract(
        reads=("application/json", "text/csv", "application/x-npy"), records="many", content_type="text/csv",
        accept="text/csv",
        source="aws/sagemaker-scikit-learn-container eae7b6b (built into sagemaker-scikit-learn 1.9-0) "
               "src/sagemaker_sklearn_container/serving.py: the script's input_fn replaces default_input_fn "
               "(sagemaker-containers encoders.decode: json, csv, npy; one CSV row squeezed to 1-D), here "
               "examples/classic/sklearn_inference.py (text/csv one row a line, JSON, .npy; always 2-D), and "
               "default_output_fn -> encoders.encode (text/csv, one prediction a line)",
        sample="0.5,1.5,2.5\n"),
}


@dataclass(frozen=True)
class Container:
    """A serving container: its image arguments, the artifact format it reads and the accelerators it runs on."""
    key: str
    title: str
    image: tuple[tuple[str, str], ...]  # sagemaker image_uris.retrieve arguments
    reads: str  # the artifact format
    accelerators: tuple[str | None, ...]  # accelerator kinds it runs on (None: CPU)
    tag: str | None = None  # the published tag, where the SDK builds another

    @property
    def request(self) -> RequestContract:
        return REQUESTS[self.key]


# GPU builds name their host AMI (workloads/planning/hosts.py, catalog/hosts.yaml): the driver runs the image's CUDA.
# The vLLM DLC's own example passes al2-ami-sagemaker-inference-gpu-3-1 (driver 550) for its CUDA 13.0 build; NVIDIA's
# minimum for CUDA 13 is driver 580, so the planner asks for al2023-ami-sagemaker-inference-gpu-4-1.
VLLM_NEURON_TAG = "0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04"

CONTAINERS = {c.key: c for c in (
    # vllm-server 2.6 (vLLM 0.30.0, CUDA 13.0) is the newest Amazon Linux vLLM DLC for SageMaker in AWS's published
    # data (tests/sources/published_images/dlc_frameworks.yaml), and the newest the installed SDK's table names.
    Container("vllm", "AWS vLLM DLC for SageMaker (vLLM 0.30.0, Amazon Linux 2023)",
              (("framework", "vllm-server"), ("version", "2.6")), "huggingface", ("nvidia-gpu",)),
    # The SDK's huggingface-vllm-neuronx goes to 0.4.4 and cannot build it for an inf2 type (processor "inf" refused);
    # asked with no type it names the account and repository, and the tag is pinned to the one AWS publishes:
    # 0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04 (aws/deep-learning-containers e0ecedea, docs/src/data/
    # huggingface-vllm-inference-neuronx/0.11-neuronx-sdk2.26.1.yml; tests/sources/published_images).
    Container("vllm-neuronx", "vLLM 0.11.0 on Neuron (optimum-neuron 0.4.5, Neuron SDK 2.26.1)",
              (("framework", "huggingface-vllm-neuronx"), ("version", "0.4.4"), ("image_scope", "inference")),
              "huggingface", ("inferentia",), tag=VLLM_NEURON_TAG),
    # Ray Serve DLC 1.4.0 (2026-08-12, Ray 2.57.0; docs/ray/changelog/index.md): tags serve-ml-sagemaker-{cpu,cuda}-v1.4
    # (the SDK's ray-serve 1.4). Its GPU build is CUDA 12.9: driver 535 runs it, in batch transform too.
    Container("ray-serve", "Ray Serve DLC 1.4 (Ray 2.57, PyTorch, Amazon Linux 2023)",
              (("framework", "ray-serve"), ("version", "1.4")), "framework-archive", (None, "nvidia-gpu")),
    Container("tensorflow", "TensorFlow 2.20 Serving DLC",
              (("framework", "tensorflow"), ("version", "2.20"), ("image_scope", "inference")),
              "framework-archive", (None, "nvidia-gpu")),
    # The newest XGBoost and scikit-learn versions AWS's support policy lists (catalog/serving_images.yaml); training
    # and processing run the same images (jobs.TRAINING_IMAGES, jobs.PROCESSING_IMAGE). The SDK builds the tags
    # 3.2-0 and 1.9-0-cpu-py3, both published (the DLC release configs' prod_image: sagemaker-xgboost:3.2-0-cpu-py3,
    # sagemaker-scikit-learn:1.9-0-cpu-py3; the data files' tags 3.2-0 and 1.9-0). XGBoost's one image is built on a
    # CUDA base (nvidia/cuda:12.9.1-base-amzn2023, with dask-cuda; its repository fixed "Dask GPU training (XGBoost
    # 3.2.0)"), so GPU types stay allowed as for 1.7-1, though AWS's data file labels it accelerator "cpu" and no GPU
    # endpoint of 3.2-0 was seen documented here; scikit-learn's is CPU only (amazonlinux:2023).
    Container("xgboost", "SageMaker XGBoost 3.2-0", (("framework", "xgboost"), ("version", "3.2-0")), "xgboost",
              (None, "nvidia-gpu")),
    # The SDK builds 1.9-0-cpu-py3 (the release config's prod_image); AWS's image data lists the tag 1.9-0 only
    # (docs/src/data/sagemaker-scikit-learn/1.9-0-cpu-sagemaker.yml, catalog/serving_images.yaml `tags`): pinned.
    Container("sklearn", "SageMaker scikit-learn 1.9-0",
              (("framework", "sklearn"), ("version", "1.9-0"), ("py_version", "py3")), "scikit-learn", (None,),
              tag="1.9-0"),
)}
ARTIFACT_LAYOUT = {
    "huggingface": "Hugging Face model directory (config.json, *.safetensors, tokenizer files) under the prefix, "
                   "uncompressed",
    "framework-archive": "model.tar.gz: the weights and code/inference.py (PyTorch: a Ray Serve application named "
                         "`app`, or a config.yaml at the top; TensorFlow: the handler) (no code/requirements.txt: the "
                         "endpoint has no internet)",
    "xgboost": "model.tar.gz holding the booster saved as `xgboost-model`",
    "scikit-learn": "model.tar.gz: the model (joblib) and code/inference.py with model_fn",
}

NEURON_LAYOUT = ("Neuron export of the Hugging Face model (optimum-cli export neuron --instance_type inf2) with the "
                 "batch size, sequence length, tensor parallel size and dtype below, uncompressed")


def proof_key(artifact_key: str) -> str:
    """The one object whose presence proves an artifact is uploaded: a Hugging Face directory's config.json, which the
    LLM containers read first (vLLM loads the model's config before any weight), or the single archive itself."""
    return artifact_key + "config.json" if artifact_key.endswith("/") else artifact_key


def layout_of(container: str, fmt: str) -> str:
    """Artifacts two containers can share have the same layout."""
    return "neuron-export" if container == "vllm-neuronx" else fmt


@dataclass(frozen=True)
class ServingPlan:
    """What an endpoint's container is given: the artifact, its layout in S3, and the environment."""
    container: str
    container_title: str
    artifact_format: str
    artifact_key: str
    artifact_layout: str
    compressed: bool  # False: an S3 prefix copied uncompressed to /opt/ml/model
    environment: dict[str, str]
    tensor_parallel: int | None
    request: RequestContract  # what /invocations reads; how batch transform splits and joins for it
    notes: tuple[str, ...] = ()
    inference_ami_version: str | None = None  # the endpoint variant's host AMI (None: SageMaker's default)
    transform_ami_version: str | None = None  # the transform job's host AMI (None: SageMaker's default)
    host_problem: str = ""  # why no host runs this container here ('' : one does)
    # Batch only: "async" where the scheduled run sends the batch prefix's requests to the async endpoint, whose host
    # runs the image, instead of a transform job, whose hosts do not (hosts.drain_route); "": a transform job.
    drain: str = ""
    quantization: str = ""  # LLMs: "fp8" where vLLM quantizes the weights and cache (fp8_serving.py); "": as trained


def kv_bytes_per_token(w: Workload, fmt: WeightFormat = CHECKPOINT) -> int:
    """KV cache bytes one token holds: 2 (K and V) x layers x KV heads x head size x bytes (FP8: one)."""
    layers, heads, kv_heads, hidden = model_shape(w)
    return 2 * layers * kv_heads * (hidden // heads) * fmt.kv_bytes


def kv_cache_gib(w: Workload, batch: int, *, tokens: int | None = None, fmt: WeightFormat = CHECKPOINT) -> float:
    """The KV cache of `batch` sequences of `tokens` each (absent: max_total_tokens, the shape Neuron compiles)."""
    return kv_bytes_per_token(w, fmt) * (tokens or w.inference.generation.max_total_tokens) * batch / 2**30


def paged_kv_cache_gib(w: Workload, batch: int, fmt: WeightFormat = CHECKPOINT) -> float:
    """The KV cache vLLM's paged attention holds for `batch` typical requests: blocks are allocated as a sequence
    grows, so a request holds its own context (typical input plus output), not max_total_tokens; the configured
    maximum stays a limit (one sequence of max_total_tokens must fit: vLLM refuses to start when its cache cannot
    hold one request of max_model_len). Kwon et al., "Efficient Memory Management for Large Language Model Serving
    with PagedAttention" (SOSP 2023, https://arxiv.org/abs/2309.06180)."""
    tokens_in, tokens_out = w.inference.generation.typical()
    return max(kv_cache_gib(w, batch, tokens=tokens_in + tokens_out, fmt=fmt), kv_cache_gib(w, 1, fmt=fmt))


def weights_gib(parameters_billion: float, fmt: WeightFormat = CHECKPOINT) -> float:
    return parameters_billion * 1e9 * fmt.weight_bytes / 2**30


def device_room(itype: InstanceType) -> tuple[float, str]:
    """(GiB, basis) vLLM fills with weights and KV cache on one device. On GPUs: gpu_memory_utilization
    (SERVING_MEMORY_FRACTION) of the memory the driver reports (serving.yaml driver_memory_mib; the catalog's
    marketing figure where none is recorded), less what vLLM keeps for activations, CUDA graphs and its runtime
    (vllm_runtime_reserve). Elsewhere: the share of the catalog's figure."""
    _, catalog_gib = devices(itype)
    acc = itype.accelerator
    if acc is None or acc.kind != "nvidia-gpu":
        return catalog_gib * SERVING_MEMORY_FRACTION, f"{SERVING_MEMORY_FRACTION:.0%} of {catalog_gib:g} GiB"
    facts = load_serving()
    recorded = facts.driver_mib.get(acc.model)
    total = recorded[0] / 1024 if recorded else catalog_gib
    reserve, reserve_source = facts.vllm_reserve_gib
    told = f"{recorded[0]} MiB the driver reports (source: {recorded[1]})" if recorded else \
        f"{catalog_gib:g} GiB (the catalog's figure: no driver-reported total recorded for {acc.model})"
    return (total * SERVING_MEMORY_FRACTION - reserve,
            f"{SERVING_MEMORY_FRACTION:.0%} (gpu_memory_utilization) of the {told}, less {reserve:g} GiB for "
            f"activations, CUDA graphs and runtime (assumed; source: {reserve_source})")


def holds(parameters_billion: float, itype: InstanceType, degree: int, kv_gib: float,
          fmt: WeightFormat = CHECKPOINT) -> bool:
    """Weights and KV cache within the room vLLM leaves them on `degree` devices (device_room)."""
    return weights_gib(parameters_billion, fmt) + kv_gib <= device_room(itype)[0] * degree


def neuron_holds(w: Workload, itype: InstanceType, degree: int, batch: int) -> bool:
    """vLLM on Neuron: each core's weights and compiled KV cache, with the heads NxD Inference pads and replicates,
    within SERVING_MEMORY_FRACTION of one NeuronCore's memory (neuron_memory.py)."""
    _, per_core = devices(itype)
    return neuron_memory.per_core_gib(w, degree, batch) <= per_core * SERVING_MEMORY_FRACTION


# Tensor-parallel degrees each LLM container allows. vLLM shards attention heads over GPUs, so the degree divides
# them (vllm-project/vllm, ModelConfig.verify_with_parallel_config: "Total number of attention heads must be
# divisible by tensor parallel size"). Neuron pads the heads instead: Hugging Face
# compiles Llama-3.3-70B (64 heads) for all 24 NeuronCores of inf2.48xlarge (hf-optimum-neuron-llama2-7b source
# note), so any core count that divides the instance's (1 or even) is a candidate.
def tensor_degrees(itype: InstanceType, heads: int) -> list[int]:
    """Every degree the type's LLM container can run, largest first."""
    count, _ = devices(itype)
    if itype.accelerator and itype.accelerator.kind == "inferentia":
        return [d for d in range(count, 0, -1) if count % d == 0 and (d == 1 or d % 2 == 0)]
    return [d for d in range(count, 0, -1) if heads % d == 0]


def tensor_parallel(parameters_billion: float, heads: int, itype: InstanceType, *,
                    kv_cache_gib: float = 0.0) -> int | None:
    """The largest degree the container allows that holds the fp16 weights and the KV cache; None if none does."""
    return next((d for d in tensor_degrees(itype, heads) if holds(parameters_billion, itype, d, kv_cache_gib)), None)


def copy_degrees(w: Workload, itype: InstanceType, fmt: WeightFormat = CHECKPOINT) -> list[int]:
    """Inference Components (vLLM on GPUs, real-time): the tensor-parallel degrees a copy may run at, fewest first.
    Powers of two that divide the attention heads and the KV heads (vLLM shards both; a power of two also divides the
    GPUs of every serving type, so devices / degree copies leave none idle), from the fewest whose memory holds the
    weights plus one typical request's KV cache (paged attention: its own context, not max_total_tokens)."""
    count, _ = devices(itype)
    _, heads, kv_heads, _ = model_shape(w)
    tokens_in, tokens_out = w.inference.generation.typical()
    typical = kv_cache_gib(w, 1, tokens=tokens_in + tokens_out, fmt=fmt)
    out, d = [], 1
    while d <= count:
        if heads % d == 0 and kv_heads % d == 0 and count % d == 0 and (out or holds(
                w.model.parameters_billion, itype, d, typical, fmt)):
            out.append(d)
        d *= 2
    return out


# vLLM runs on compute capability 7.5 or newer (vLLM docs, "GPU installation", v0.31.0: "compute capability 7.5 or
# higher (e.g., T4, RTX20xx, A100, L4, H100, B200"), https://docs.vllm.ai/en/v0.31.0/getting_started/installation/
# gpu/): never plan it on Volta (7.0).
VLLM_TOO_OLD = frozenset({"NVIDIA V100 16GB", "NVIDIA V100 32GB"})


def container_for(kind: str, fmt: str, framework: str, itype: InstanceType | None) -> Container:
    """The serving container for an artifact format on a type (None: serverless, CPU); refused where it cannot run."""
    acc = itype.accelerator.kind if itype and itype.accelerator else None
    where = f"ml.{itype.name}" if itype else "serverless (CPU only)"
    field = f"inference.{kind}.instance_type" if itype else "inference.serverless"
    if fmt == "huggingface":
        key = {"nvidia-gpu": "vllm", "inferentia": "vllm-neuronx"}.get(acc or "")
        if key == "vllm" and itype and itype.accelerator.model in VLLM_TOO_OLD:
            raise ConfigError(field, where, "a Turing or newer GPU type (g4dn, g5, g6, g6e, p4d, p5) or Inferentia2 (inf2)",
                              reason=f"vLLM needs compute capability 7.5 or newer; the {itype.accelerator.model} is 7.0 "
                                     "(vLLM docs, GPU installation)")
        if key is None or (acc == "inferentia" and itype and itype.accelerator.model not in NEURON_CORES_PER_CHIP):
            raise ConfigError(field, where, "a GPU (g5, g6, p4d, p5) or Inferentia2 (inf2) type; or "
                              "inference.artifact.format framework-archive",
                              reason="a Hugging Face LLM is served by an LLM serving container on GPU or Inferentia2")
        return CONTAINERS[key]
    # A framework archive runs on its framework's container (PyTorch: Ray Serve; TensorFlow Serving).
    archive = {"pytorch": "ray-serve"}.get(framework, framework)
    container = CONTAINERS[{"framework-archive": archive, "xgboost": "xgboost", "scikit-learn": "sklearn"}[fmt]]
    if kind == "batch" and acc == "nvidia-gpu" and hosts.transform_host(container.key) is None:
        raise ConfigError(field, where, "a CPU type (c5, c6i, m5)",
                          reason=hosts.no_transform_host(container.key, container.title))
    if acc not in container.accelerators:
        neuron = "; Inferentia needs a Neuron-compiled model" if acc == "inferentia" else ""
        raise ConfigError(field, where, "CPU types (c5, m5)" if container.accelerators == (None,) else
                          "CPU or GPU types", reason=f"the {container.title} container does not run on {acc}{neuron}")
    return container


def plan_serving(kind: str, w: Workload, itype: InstanceType | None, *, degree: int | None = None,
                 batch: int | None = None, quantization: str = "") -> ServingPlan:
    """The serving contract of one kind on its instance type (None: serverless). LLMs: `degree` and `batch` are the
    planner's sizing (absent: the largest degree that holds one sequence, batch 1)."""
    fmt, _ = artifact_format(w)
    section = {"realtime": w.inference.realtime, "serverless": w.inference.serverless,
               "async": w.inference.async_, "batch": w.inference.batch}[kind]
    key = w.inference.artifact.key or DEFAULT_KEYS[fmt]
    container = container_for(kind, fmt, w.model.framework, itype)
    layout = ARTIFACT_LAYOUT[fmt]
    if container.key == "vllm-neuronx":
        # A Neuron export is its own directory: the GPU containers read the plain weights.
        key, layout = key.rstrip("/") + "-neuron/", NEURON_LAYOUT
    if section is not None and section.artifact_key:
        key = section.artifact_key
    gpu = itype is not None and itype.accelerator is not None and itype.accelerator.kind == "nvidia-gpu"
    # GPU endpoint variants and transform jobs name the host AMI whose driver runs the image (hosts.py).
    host = hosts.endpoint_host(container.key) if gpu and kind != "batch" else None
    batch_host = hosts.transform_host(container.key) if gpu and kind == "batch" else None
    # Neuron endpoint variants name the Neuron host AMI, as the published deployments do (neuron_hosting.py).
    neuron_ami = neuron_hosting.inference_ami() if container.key == "vllm-neuronx" and kind != "batch" else None
    if neuron_ami and (refusal := hosts.neuron_refusal(container.key, neuron_ami)):
        # The driver is the host AMI's, and SageMaker documents no other Neuron host: the image cannot start.
        raise ConfigError(f"inference.{kind}.instance_type", itype and f"ml.{itype.name}",
                          "a GPU type, until SageMaker offers a Neuron host AMI with a newer driver", reason=refusal)
    common = dict(container=container.key, container_title=container.title, artifact_format=fmt, artifact_key=key,
                  artifact_layout=layout, compressed=fmt != "huggingface", request=container.request,
                  inference_ami_version=host.ami if host else neuron_ami,
                  transform_ami_version=batch_host.ami if batch_host else None)
    if fmt != "huggingface":
        env = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": CODE_DIR} \
            if container.key == "sklearn" else {}
        if container.key == "ray-serve":
            env = {"SM_RAYSERVE_APP": RAY_APP}  # code/ is on PYTHONPATH; a config.yaml at the top wins over it
        return ServingPlan(**common, environment=env, tensor_parallel=None)
    plan = _llm(kind, w, itype, common, degree, batch, named(quantization))
    if gpu and kind == "batch" and batch_host is None:
        plan = replace(plan, host_problem=hosts.no_transform_host(container.key, container.title))
    return plan


def _llm(kind: str, w: Workload, itype: InstanceType | None, common: dict, degree: int | None,
         batch: int | None, fmt: WeightFormat = CHECKPOINT) -> ServingPlan:
    assert itype is not None
    g = w.inference.generation
    heads, assumed = attention_heads(w)
    batch = batch or g.max_batch_size or 1
    # Neuron compiles max_total_tokens a sequence and reserves it; vLLM on GPUs pages the cache as sequences grow.
    neuron = common["container"] == "vllm-neuronx"
    kv = kv_cache_gib(w, batch) if neuron else paged_kv_cache_gib(w, batch, fmt)
    if neuron:  # per core, with the heads NxD Inference adds at each degree
        degree = degree or next((d for d in tensor_degrees(itype, heads) if neuron_holds(w, itype, d, batch)), None)
        if degree is not None:
            kv = neuron_memory.kv_cache_gib(w, degree, batch)
    else:
        degree = degree or tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv)
    count, per_device = devices(itype)
    if degree is None:
        raise ConfigError(f"inference.{kind}.instance_type", f"ml.{itype.name}",
                          "a type with more accelerator memory, or lower inference.generation limits",
                          reason=f"no tensor-parallel degree up to {count} the container allows holds "
                                 f"the {w.model.parameters_billion:g}B model's weights and its {kv:.1f} GiB KV cache "
                                 f"({per_device:g} GiB per device" + ("" if neuron else
                                 f"; vLLM fills {device_room(itype)[0]:.1f} GiB of each: {device_room(itype)[1]}") + ")")
    tokens_in, tokens_out = g.typical()
    held = (f"{batch} x {g.max_total_tokens} tokens (compiled: Neuron reserves the longest sequence)" if neuron else
            f"{batch} typical requests of {tokens_in + tokens_out} tokens (paged attention; {g.max_total_tokens} a "
            "sequence at most)")
    where = (f"{degree} NeuronCore(s) of {per_device:g} GiB each ({neuron_memory.basis(w, degree, batch)})" if neuron
             else f"{degree} device(s)")
    shape = f"model.family {w.model.family}'s shape" if w.model.family else "the usual decoder shape"
    room = f"within {SERVING_MEMORY_FRACTION:.0%} of the memory of {where}" if neuron else \
        f"within {degree} x {device_room(itype)[0]:.1f} GiB: on each device {device_room(itype)[1]}"
    notes = [f"KV cache {kv:.1f} GiB at {held}, {shape} at {w.model.parameters_billion:g}B; weights "
             f"and cache {room}"]
    if assumed:
        notes.append(f"{heads} attention heads assumed for a {w.model.parameters_billion:g}B decoder; set "
                     "model.attention_heads")
    if common["container"] == "vllm-neuronx":
        # SM_ON_* become `optimum-cli neuron serve` flags, checked against the export's Neuron config; serve passes
        # them to vLLM as --tensor-parallel-size, --max-num-seqs and --max-model-len (NxD Inference compiles them).
        dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(g.dtype, "bfloat16")
        env = {"SM_ON_MODEL": MODEL_DIR, "SM_ON_TENSOR_PARALLEL_SIZE": str(degree), "SM_ON_BATCH_SIZE": str(batch),
               "SM_ON_SEQUENCE_LENGTH": str(g.max_total_tokens)}
        notes.append(f"the prefix holds the Neuron export made with these settings: optimum-cli export neuron "
                     f"--model <model> --instance_type inf2 --batch_size {batch} --sequence_length "
                     f"{g.max_total_tokens} --tensor_parallel_size {degree} --torch_dtype {dtype} <dir>")
    else:
        # GPUs without bf16 (T4) serve in fp16. SM_VLLM_* become vLLM server flags (sagemaker_args.py): the model
        # directory, the shards, the longest sequence (max_total_tokens: a limit; paged attention allocates the
        # cache as sequences grow) and the most sequences decoded together.
        dtype = "bfloat16" if g.dtype == "bf16" and itype.peak_tflops_dtype == "bf16" else "float16"
        env = {"SM_VLLM_MODEL": MODEL_DIR, "SM_VLLM_TENSOR_PARALLEL_SIZE": str(degree),
               "SM_VLLM_MAX_MODEL_LEN": str(g.max_total_tokens), "SM_VLLM_MAX_NUM_SEQS": str(batch),
               "SM_VLLM_DTYPE": dtype, **dict(fmt.environment)}
        if fmt.name:  # FP8 (fp8_serving.py): the linears quantized as vLLM loads the checkpoint, the cache in FP8
            notes.append(f"{fmt.name.upper()}: weights at {fmt.weight_bytes:g} B/parameter (quantized by vLLM as it "
                         f"loads the {dtype} checkpoint) and the KV cache at {fmt.kv_bytes} B an element")
    return ServingPlan(**common, environment=env, tensor_parallel=degree, notes=tuple(notes), quantization=fmt.name)
