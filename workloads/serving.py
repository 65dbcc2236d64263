"""Serving contracts: which container serves each inference kind, the artifact it reads and the
environment it needs to start. Pure Python: the CDK side turns `Container.image` into a URI with
the sagemaker SDK's image_uris (constructs_lib/images.py).

What each container needs, checked at its source on 2026-11-22 (vLLM on 2026-11-25):

- AWS's vLLM DLC for SageMaker, Amazon Linux 2023 build (sagemaker image `vllm-server` 2.3, tag
  server-sagemaker-cuda-v2.3, vLLM 0.27.0): its sagemaker_entrypoint.sh runs sagemaker_args.py, which turns every
  SM_VLLM_<FLAG> variable into `--<flag>` of vLLM's OpenAI server (SM_VLLM_TENSOR_PARALLEL_SIZE=8 ->
  --tensor-parallel-size 8) and, when SM_VLLM_MODEL is unset, serves /opt/ml/model if it holds files, else
  HF_MODEL_ID (aws/deep-learning-containers e0ecedea, scripts/docker/vllm/sagemaker_entrypoint.sh and
  sagemaker_args.py; docker/vllm/Dockerfile.amzn2023 target vllm-sagemaker-amzn2023). Chosen over LMI (`djl-lmi`,
  which the SDK also resolves): the DLC runs upstream vLLM's own server with any vLLM flag, and AWS recommends its
  Amazon Linux images over the Ubuntu vLLM builds, which it cannot guarantee to patch (DLC Framework Support
  Policy, https://aws.github.io/deep-learning-containers/reference/support_policy/).
- Hugging Face TGI on Neuron (`huggingface-llm-neuronx` 0.3.0, optimum-neuron TGI 3.3.6): TGI's
  sagemaker-entrypoint.sh exits with "HF_MODEL_ID must be set" when HF_MODEL_ID is unset
  (huggingface/text-generation-inference, sagemaker-entrypoint.sh); tgi_env.py skips its Hugging Face Hub lookup only when HF_NUM_CORES, HF_AUTO_CAST_TYPE,
  MAX_BATCH_SIZE, MAX_TOTAL_TOKENS, MAX_INPUT_TOKENS and MAX_BATCH_PREFILL_TOKENS are all set, and refuses
  a model whose Neuron config (tp_degree, batch_size, sequence_length, cast type) does not match them
  (huggingface/optimum-neuron, text-generation-inference/tgi_env.py). A network-isolated endpoint cannot
  reach the Hub, so the artifact must be the Neuron export itself.
- PyTorch and TensorFlow DLCs: the SageMaker inference toolkit loads the handler module named by
  SAGEMAKER_PROGRAM from code/ inside the archive, and pip-installs code/requirements.txt at start, which
  fails on a network-isolated endpoint (aws/sagemaker-pytorch-inference-toolkit, torchserve.py).
- XGBoost built-in container (`xgboost` 1.7-1): model.tar.gz holding the booster as `xgboost-model`;
  no environment needed (SageMaker Developer Guide, "XGBoost algorithm", model artifacts).
- scikit-learn container (`sklearn` 1.2-1): script mode, SAGEMAKER_PROGRAM and SAGEMAKER_SUBMIT_DIRECTORY
  name the script with model_fn inside the archive (aws/sagemaker-scikit-learn-container).
- Uncompressed model data (S3Prefix, CompressionType None) is copied under /opt/ml/model
  (SageMaker Developer Guide, "Deploying uncompressed models").
"""

from __future__ import annotations

from dataclasses import dataclass

from . import estimates as est
from .catalog import NEURON_CORES_PER_CHIP, InstanceType, devices
from .errors import ConfigError
from .parallelism import VOCAB
from .schema import Workload

MODEL_DIR = "/opt/ml/model"
CODE_DIR = MODEL_DIR + "/code"
DEFAULT_KEYS = {"huggingface": "models/llm/", "framework-archive": "models/model.tar.gz",
                "xgboost": "models/model.tar.gz", "scikit-learn": "models/model.tar.gz"}
_FORMAT_OF_FRAMEWORK = {"pytorch": "framework-archive", "tensorflow": "framework-archive", "xgboost": "xgboost",
                        "scikit-learn": "scikit-learn"}
# The usual decoder's shape at each size, from the models' config.json on the Hugging Face Hub
# (num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, intermediate_size): Llama 3.2 1B
# 16/32/8/2048/8192, Llama 3.2 3B 28/24/8/3072/8192, Llama 3.1 8B 32/32/8/4096/14336, Llama 2 13B
# 40/40/40/5120/13824, Code Llama 34B 48/64/8/8192/22016, Llama 3.1 70B 80/64/8/8192/28672
# (https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json, .../Llama-3.2-3B, .../Llama-3.1-8B,
# .../Llama-2-13b-hf, https://huggingface.co/codellama/CodeLlama-34b-hf, .../meta-llama/Llama-3.1-70B; the widths
# checked 2026-11-25 in copies of those files that name them as their base, the meta-llama repositories being gated).
# Used for what the config leaves out, and for the KV cache.
_TYPICAL_SHAPES = ((1.5, 16, 32, 8, 2048, 8192), (4, 28, 24, 8, 3072, 8192), (10, 32, 32, 8, 4096, 14336),
                   (20, 40, 40, 40, 5120, 13824), (40, 48, 64, 8, 8192, 22016),
                   (float("inf"), 80, 64, 8, 8192, 28672))
# Weights and KV cache fill at most this share of accelerator memory; the rest is activations and runtime.
SERVING_MEMORY_FRACTION = 0.9
KV_BYTES = 2  # fp16/bf16 cache


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
_TGI_REQUEST = RequestContract(
    reads=("application/json",), records="one", content_type="application/json", accept="application/json",
    source="huggingface/text-generation-inference router/src/server.rs routes POST /invocations to "
           "sagemaker_compatibility (router/src/sagemaker.rs), which takes axum Json<SagemakerRequest>: one JSON "
           "generate, chat or completion request, and axum refuses a body not sent as application/json",
    sample='{"inputs": "What is the capital of France?", "parameters": {"max_new_tokens": 32}}')
REQUESTS = {
    "vllm": _VLLM_REQUEST,
    "tgi-neuronx": _TGI_REQUEST,  # optimum-neuron's TGI image runs the same router
    "pytorch": RequestContract(
        reads=("application/json", "text/csv", "application/x-npy"), records="one", content_type="application/json",
        accept="application/json",
        source="aws/sagemaker-pytorch-inference-toolkit default_pytorch_inference_handler.py default_input_fn -> "
               "aws/sagemaker-inference-toolkit decoder.py (application/json: json.loads of the whole body, so one "
               "document a request; text/csv; application/x-npy); default_output_fn encodes application/json",
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
        source="aws/sagemaker-xgboost-container 1.7-1 algorithm_mode/serve_utils.py parse_content_data (text/csv "
               "rows into one DMatrix; libsvm; recordio-protobuf) and data_utils.get_content_type (no content type "
               "parses as libsvm); serve.py invocations writes one prediction a line in batch (SAGEMAKER_BATCH)",
        sample="0.5,1.5,2.5\n"),
    "sklearn": RequestContract(
        reads=("application/json", "text/csv", "application/x-npy"), records="many", content_type="text/csv",
        accept="text/csv",
        source="aws/sagemaker-scikit-learn-container src/sagemaker_sklearn_container/handler_service.py "
               "default_input_fn -> sagemaker-inference-toolkit decoder (text/csv rows into one 2-D array) and "
               "default_output_fn -> encoder (text/csv, one prediction a row)",
        sample="0.5,1.5,2.5\n"),
}


@dataclass(frozen=True)
class Container:
    key: str
    title: str
    image: tuple[tuple[str, str], ...]  # sagemaker image_uris.retrieve arguments
    reads: str  # the artifact format
    accelerators: tuple[str | None, ...]  # accelerator kinds it runs on (None: CPU)

    @property
    def request(self) -> RequestContract:
        return REQUESTS[self.key]


CONTAINERS = {c.key: c for c in (
    # vllm-server 2.3 is the newest Amazon Linux vLLM DLC for SageMaker in AWS's published list read here
    # (tests/sources/published_images/dlc_frameworks.yaml); the SDK's table goes to 2.6, not confirmed published.
    Container("vllm", "AWS vLLM DLC for SageMaker (vLLM 0.27.0, Amazon Linux 2023)",
              (("framework", "vllm-server"), ("version", "2.3")), "huggingface", ("nvidia-gpu",)),
    # inference_tool "neuronx": the published tag is 2.7.0-optimum3.3.6-neuronx-py310-ubuntu22.04 (Hugging Face,
    # "Deploying on AWS: Available DLCs on AWS", https://huggingface.co/docs/sagemaker/dlcs/available); without it
    # image_uris builds an `-inf2-` tag that no registry holds. The SDK's own LLM helper passes it too
    # (aws/sagemaker-python-sdk v2, src/sagemaker/huggingface/llm_utils.py, get_huggingface_llm_image_uri,
    # backend "huggingface-neuronx"; sagemaker v3 has no such helper).
    Container("tgi-neuronx", "Hugging Face TGI 3.3.6 on Neuron (optimum-neuron)",
              (("framework", "huggingface-llm-neuronx"), ("version", "0.3.0"), ("inference_tool", "neuronx")),
              "huggingface", ("inferentia",)),
    Container("pytorch", "PyTorch 2.6 inference DLC",
              (("framework", "pytorch"), ("version", "2.6"), ("py_version", "py312"), ("image_scope", "inference")),
              "framework-archive", (None, "nvidia-gpu")),
    Container("tensorflow", "TensorFlow 2.20 Serving DLC",
              (("framework", "tensorflow"), ("version", "2.20"), ("image_scope", "inference")),
              "framework-archive", (None, "nvidia-gpu")),
    Container("xgboost", "SageMaker XGBoost 1.7-1", (("framework", "xgboost"), ("version", "1.7-1")), "xgboost",
              (None, "nvidia-gpu")),
    Container("sklearn", "SageMaker scikit-learn 1.2-1",
              (("framework", "sklearn"), ("version", "1.2-1"), ("py_version", "py3")), "scikit-learn", (None,)),
)}
ARTIFACT_LAYOUT = {
    "huggingface": "Hugging Face model directory (config.json, *.safetensors, tokenizer files) under the prefix, "
                   "uncompressed",
    "framework-archive": "model.tar.gz: the weights and code/inference.py (no code/requirements.txt: the endpoint "
                         "has no internet)",
    "xgboost": "model.tar.gz holding the booster saved as `xgboost-model`",
    "scikit-learn": "model.tar.gz: the model (joblib) and code/inference.py with model_fn",
}

NEURON_LAYOUT = ("Neuron export of the Hugging Face model (optimum-cli export neuron) with the batch size, sequence "
                 "length, core count and cast type below, uncompressed")


def proof_key(artifact_key: str) -> str:
    """The one object whose presence proves an artifact is uploaded: a Hugging Face directory's config.json, which the
    LLM containers read first (vLLM and TGI load the model's config before any weight), or the single archive itself."""
    return artifact_key + "config.json" if artifact_key.endswith("/") else artifact_key


def layout_of(container: str, fmt: str) -> str:
    """Artifacts two containers can share have the same layout."""
    return "neuron-export" if container == "tgi-neuronx" else fmt


@dataclass(frozen=True)
class ServingPlan:
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


# Above this size a PyTorch model without model.architecture is taken for a decoder: the largest common encoders are
# about this size (DeBERTa-v2-xxlarge, 1.5B parameters: microsoft/deberta-v2-xxlarge on the Hugging Face Hub), while
# decoders start below it, so a small decoder should say model.architecture: decoder (the plan says what it assumed).
DECODER_ABOVE_BILLION = 1.5
# A decoder's vocabulary when model.vocab_size is absent: Llama 2's tokenizer, what the trainer uses.
DEFAULT_VOCAB = VOCAB


def architecture(w: Workload) -> tuple[str, str]:
    """(kind, why): the config's model.architecture, or inferred from the artifact format, the framework and size."""
    m = w.model
    if m.architecture:
        return m.architecture, "set by model.architecture"
    if w.inference.artifact.format == "huggingface":
        return "decoder", "inferred: a Hugging Face artifact is served by an LLM container; set model.architecture"
    if m.framework in ("xgboost", "scikit-learn"):
        return "tabular", f"inferred from the framework ({m.framework})"
    if m.framework == "pytorch" and m.parameters_billion > DECODER_ABOVE_BILLION:
        return "decoder", (f"inferred: a {m.parameters_billion:g}B pytorch model, above {DECODER_ABOVE_BILLION:g}B "
                           "(the largest common encoders); set model.architecture")
    return "encoder", (f"inferred: a {m.parameters_billion:g}B {m.framework} model"
                       + (f", at most {DECODER_ABOVE_BILLION:g}B" if m.framework == "pytorch" else
                          " (tensorflow has no LLM serving container here)") + "; set model.architecture")


def artifact_format(w: Workload) -> tuple[str, str]:
    if w.inference.artifact.format:
        return w.inference.artifact.format, "set by the config"
    if architecture(w)[0] == "decoder" and w.model.framework == "pytorch":
        # Never a TorchServe archive sized as an encoder: a decoder is served by an LLM container.
        return "huggingface", "from the architecture (a decoder: an LLM serving container reads a Hugging Face directory)"
    return _FORMAT_OF_FRAMEWORK[w.model.framework], f"from the framework ({w.model.framework})"


def model_shape(w: Workload) -> tuple[int, int, int, int]:
    """(layers, heads, KV heads, hidden): the config's model.layers, attention_heads, kv_heads and hidden_size, each
    absent one the usual decoder's at this size."""
    m = w.model
    layers, heads, kv_heads, hidden, _ = _typical(m.parameters_billion)
    heads = m.attention_heads or heads
    # The usual decoder's KV heads cannot exceed the heads the config names (multi-head attention then).
    kv_heads = m.kv_heads or min(kv_heads, heads)
    return m.layers or layers, heads, kv_heads, m.hidden_size or hidden


def _typical(parameters_billion: float) -> tuple[int, int, int, int, int]:
    return next(tuple(shape) for limit, *shape in _TYPICAL_SHAPES if parameters_billion <= limit)


def ffn_width(w: Workload) -> int:
    """The SwiGLU width (config.json's intermediate_size): model.intermediate_size, else the usual decoder's at this
    size, in proportion where the config sets its own hidden_size (a multiple of 8)."""
    m = w.model
    *_, hidden, width = _typical(m.parameters_billion)
    if m.intermediate_size:
        return m.intermediate_size
    if m.hidden_size and m.hidden_size != hidden:
        return max(8, 8 * round(width * m.hidden_size / hidden / 8))
    return width


def shape_line(w: Workload) -> str:
    """The decoder's shape as sized, each assumed value said."""
    m = w.model
    layers, heads, kv_heads, hidden = model_shape(w)
    assumed = [f for f, v in (("layers", m.layers), ("attention_heads", m.attention_heads), ("kv_heads", m.kv_heads),
                              ("hidden_size", m.hidden_size), ("intermediate_size", m.intermediate_size),
                              ("vocab_size", m.vocab_size)) if v is None]
    vocab = m.vocab_size or DEFAULT_VOCAB
    line = (f"{layers} layers, {heads} attention heads, {kv_heads} KV heads, hidden {hidden}, FFN width "
            f"{ffn_width(w)}, vocabulary {vocab:,}")
    if assumed:
        line += (f" ({', '.join('model.' + f for f in assumed)} assumed: the usual decoder at "
                 f"{m.parameters_billion:g}B, from Llama-family config.json files, and Llama 2's vocabulary)")
    return line


def model_lines(w: Workload) -> tuple[str, ...]:
    """What the plan says about the model: its architecture and why, and a decoder's shape as sized."""
    kind, why = architecture(w)
    lines = [f"architecture {kind} ({why})"]
    if kind == "decoder":
        lines.append(f"decoder shape: {shape_line(w)}")
    return tuple(lines)


def attention_heads(w: Workload) -> tuple[int, bool]:
    """(heads, assumed): the config's value, or the usual decoder's at this size."""
    return model_shape(w)[1], w.model.attention_heads is None


def kv_bytes_per_token(w: Workload) -> int:
    """KV cache bytes one token holds: 2 (K and V) x layers x KV heads x head size x bytes."""
    layers, heads, kv_heads, hidden = model_shape(w)
    return 2 * layers * kv_heads * (hidden // heads) * KV_BYTES


def kv_cache_gib(w: Workload, batch: int, *, tokens: int | None = None) -> float:
    """The KV cache of `batch` sequences of `tokens` each (absent: max_total_tokens, the shape Neuron compiles)."""
    return kv_bytes_per_token(w) * (tokens or w.inference.generation.max_total_tokens) * batch / 2**30


def paged_kv_cache_gib(w: Workload, batch: int) -> float:
    """The KV cache vLLM's paged attention holds for `batch` typical requests: blocks are allocated as a sequence
    grows, so a request holds its own context (typical input plus output), not max_total_tokens; the configured
    maximum stays a limit (one sequence of max_total_tokens must fit: vLLM refuses to start when its cache cannot
    hold one request of max_model_len). Kwon et al., "Efficient Memory Management for Large Language Model Serving
    with PagedAttention" (SOSP 2023, https://arxiv.org/abs/2309.06180)."""
    tokens_in, tokens_out = w.inference.generation.typical()
    return max(kv_cache_gib(w, batch, tokens=tokens_in + tokens_out), kv_cache_gib(w, 1))


def weights_gib(parameters_billion: float) -> float:
    return parameters_billion * 1e9 * est.SERVE_BYTES_PER_PARAM / 2**30


def holds(parameters_billion: float, itype: InstanceType, degree: int, kv_gib: float) -> bool:
    """Weights and KV cache within SERVING_MEMORY_FRACTION of `degree` devices' memory."""
    _, per_device = devices(itype)
    return weights_gib(parameters_billion) + kv_gib <= per_device * degree * SERVING_MEMORY_FRACTION


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
        key = {"nvidia-gpu": "vllm", "inferentia": "tgi-neuronx"}.get(acc or "")
        if key == "vllm" and itype and itype.accelerator.model in VLLM_TOO_OLD:
            raise ConfigError(field, where, "a Turing or newer GPU type (g4dn, g5, g6, g6e, p4d, p5) or Inferentia2 (inf2)",
                              reason=f"vLLM needs compute capability 7.5 or newer; the {itype.accelerator.model} is 7.0 "
                                     "(vLLM docs, GPU installation)")
        if key is None or (acc == "inferentia" and itype and itype.accelerator.model not in NEURON_CORES_PER_CHIP):
            raise ConfigError(field, where, "a GPU (g5, g6, p4d, p5) or Inferentia2 (inf2) type; or "
                              "inference.artifact.format framework-archive",
                              reason="a Hugging Face LLM is served by an LLM serving container on GPU or Inferentia2")
        return CONTAINERS[key]
    # A framework archive runs on its framework's container (pytorch, tensorflow).
    container = CONTAINERS[{"framework-archive": framework, "xgboost": "xgboost", "scikit-learn": "sklearn"}[fmt]]
    if acc not in container.accelerators:
        neuron = "; Inferentia needs a Neuron-compiled model" if acc == "inferentia" else ""
        raise ConfigError(field, where, "CPU types (c5, m5)" if container.accelerators == (None,) else
                          "CPU or GPU types", reason=f"the {container.title} container does not run on {acc}{neuron}")
    return container


def plan_serving(kind: str, w: Workload, itype: InstanceType | None, *, degree: int | None = None,
                 batch: int | None = None) -> ServingPlan:
    """The serving contract of one kind on its instance type (None: serverless). LLMs: `degree` and `batch` are the
    planner's sizing (absent: the largest degree that holds one sequence, batch 1)."""
    fmt, _ = artifact_format(w)
    section = {"realtime": w.inference.realtime, "serverless": w.inference.serverless,
               "async": w.inference.async_, "batch": w.inference.batch}[kind]
    key = w.inference.artifact.key or DEFAULT_KEYS[fmt]
    container = container_for(kind, fmt, w.model.framework, itype)
    layout = ARTIFACT_LAYOUT[fmt]
    if container.key == "tgi-neuronx":
        # A Neuron export is its own directory: the GPU containers read the plain weights.
        key, layout = key.rstrip("/") + "-neuron/", NEURON_LAYOUT
    if section is not None and section.artifact_key:
        key = section.artifact_key
    common = dict(container=container.key, container_title=container.title, artifact_format=fmt, artifact_key=key,
                  artifact_layout=layout, compressed=fmt != "huggingface", request=container.request)
    if fmt != "huggingface":
        env = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": CODE_DIR} \
            if container.key in ("pytorch", "sklearn") else {}
        return ServingPlan(**common, environment=env, tensor_parallel=None)
    return _llm(kind, w, itype, common, degree, batch)


def _llm(kind: str, w: Workload, itype: InstanceType | None, common: dict, degree: int | None,
         batch: int | None) -> ServingPlan:
    assert itype is not None
    g = w.inference.generation
    heads, assumed = attention_heads(w)
    batch = batch or g.max_batch_size or 1
    kv = kv_cache_gib(w, batch)
    degree = degree or tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv)
    count, per_device = devices(itype)
    if degree is None:
        raise ConfigError(f"inference.{kind}.instance_type", f"ml.{itype.name}",
                          "a type with more accelerator memory, or lower inference.generation limits",
                          reason=f"no tensor-parallel degree up to {count} the container allows holds "
                                 f"the {w.model.parameters_billion:g}B model's weights and its {kv:.1f} GiB KV cache "
                                 f"({per_device:g} GiB per device)")
    notes = [f"KV cache {kv:.1f} GiB at {batch} x {g.max_total_tokens} tokens (the usual decoder shape at "
             f"{w.model.parameters_billion:g}B); weights and cache within {SERVING_MEMORY_FRACTION:.0%} of memory"]
    if assumed:
        notes.append(f"{heads} attention heads assumed for a {w.model.parameters_billion:g}B decoder; set "
                     "model.attention_heads")
    prefill = str(batch * g.max_input_tokens)
    limits = {"MAX_INPUT_TOKENS": str(g.max_input_tokens), "MAX_TOTAL_TOKENS": str(g.max_total_tokens),
              "MAX_BATCH_PREFILL_TOKENS": prefill}
    if common["container"] == "tgi-neuronx":
        env = {"HF_MODEL_ID": MODEL_DIR, "HF_NUM_CORES": str(degree), "HF_AUTO_CAST_TYPE": g.dtype,
               "MAX_BATCH_SIZE": str(batch), **limits}
        notes.append(f"the prefix holds the Neuron export made with these settings: optimum-cli export neuron "
                     f"--model <model> --batch_size {batch} --sequence_length {g.max_total_tokens} "
                     f"--num_cores {degree} --auto_cast_type {g.dtype} <dir>")
    else:
        # GPUs without bf16 (T4) serve in fp16. SM_VLLM_* become vLLM server flags (sagemaker_args.py): the model
        # directory, the shards, the longest sequence (max_total_tokens: a limit; paged attention allocates the
        # cache as sequences grow) and the most sequences decoded together.
        dtype = "bfloat16" if g.dtype == "bf16" and itype.peak_tflops_dtype == "bf16" else "float16"
        env = {"SM_VLLM_MODEL": MODEL_DIR, "SM_VLLM_TENSOR_PARALLEL_SIZE": str(degree),
               "SM_VLLM_MAX_MODEL_LEN": str(g.max_total_tokens), "SM_VLLM_MAX_NUM_SEQS": str(batch),
               "SM_VLLM_DTYPE": dtype}
    return ServingPlan(**common, environment=env, tensor_parallel=degree, notes=tuple(notes))
