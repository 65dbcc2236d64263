"""Model kind (issue 32): model.architecture (decoder, encoder, vision, tabular), inferred from the artifact format,
framework and size when absent and said in the plan; a decoder is never sized as an encoder; a decoder's shape
(layers, hidden_size, kv_heads, vocab_size) sizes its KV cache, each absent field assumed and said.
Before: a 70B PyTorch model without inference.artifact.format was planned as a TorchServe model.tar.gz with
code/inference.py on ml.p4d at "15.5 req/s, 517 ms", sized with the BERT encoder model."""

from __future__ import annotations

import pytest

from workloads import ConfigError, load, plan
from workloads.planning.contracts import kv_bytes_per_token
from workloads.config.model import architecture, model_shape

# Llama 3.1 70B's config.json on the Hugging Face Hub (meta-llama/Llama-3.1-70B): num_hidden_layers 80,
# num_attention_heads 64, num_key_value_heads 8, hidden_size 8192, vocab_size 128256.
LLAMA_31_70B = {"model.parameters_billion": "70", "model.attention_heads": "64", "model.layers": "80",
                "model.kv_heads": "8", "model.hidden_size": "8192", "model.vocab_size": "128256",
                "model.intermediate_size": "28672"}
# K and V, 80 layers, 8 KV heads of 8192 / 64 = 128 dimensions, 2 bytes (bf16): 327,680 bytes a token.
LLAMA_31_70B_KV_BYTES = 2 * 80 * 8 * 128 * 2
# The case: 70B, PyTorch, no artifact format, real time only.
SEVENTY_B = {"model.parameters_billion": "70", "model.attention_heads": "64", "inference.artifact": "{}",
             "inference.realtime": "{min_instances: 1}", "inference.async": "null", "inference.batch": "null"}


def test_a_70b_pytorch_model_without_a_format_is_served_as_a_decoder_not_an_encoder():
    p = plan(load("intermediate", SEVENTY_B))
    rt = p.inference["realtime"]
    assert rt.serving.artifact_format == "huggingface" and rt.serving.container != "pytorch"
    assert "code/inference.py" not in rt.serving.artifact_layout
    assert "BERT-class" not in rt.throughput_basis and "decode streams" in rt.throughput_basis
    assert rt.ttft_ms is not None and rt.tpot_ms is not None
    assert p.model[0].startswith("architecture decoder (inferred: a 70B pytorch model")
    assert p.to_dict()["model"] == list(p.model)


@pytest.mark.parametrize("overrides, kind", [
    ({"model.parameters_billion": "0.11", "inference.artifact": "{format: framework-archive}"}, "encoder"),
    ({"model.parameters_billion": "8", "inference.artifact": "{}"}, "decoder"),
    ({"model.parameters_billion": "1", "inference.artifact.format": "huggingface"}, "decoder"),
    ({"model.framework": "xgboost", "inference.artifact": "{}"}, "tabular"),
    ({"model.framework": "tensorflow", "model.parameters_billion": "0.3", "inference.artifact": "{}"}, "encoder"),
    ({"model.architecture": "vision", "model.parameters_billion": "0.3", "inference.artifact": "{}"}, "vision"),
])
def test_the_architecture_is_inferred_or_set(overrides, kind):
    w = load("intermediate", {**overrides, "inference.realtime": "{min_instances: 1}", "inference.async": "null",
                              "inference.batch": "null", "model.attention_heads": "null"})
    assert architecture(w)[0] == kind


@pytest.mark.parametrize("overrides, field", [
    # A decoder as a TorchServe archive: the old mistake, refused.
    ({"model.parameters_billion": "70", "inference.artifact.format": "framework-archive",
      "inference.artifact.key": "models/model.tar.gz"}, "inference.artifact.format"),
    ({"model.architecture": "encoder"}, "model.architecture"),  # intermediate serves a Hugging Face directory
    ({"model.framework": "tensorflow", "model.architecture": "decoder", "inference.artifact": "{}"},
     "model.architecture"),
    ({"model.hidden_size": "3001"}, "model.hidden_size"),  # not a multiple of intermediate's 24 heads
    ({"model.kv_heads": "5"}, "model.kv_heads"),
])
def test_a_mismatched_kind_or_shape_is_refused_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as err:
        load("intermediate", overrides)
    assert field in [e.field for e in err.value.errors]


def test_classic_ml_is_tabular():
    with pytest.raises(ConfigError) as err:
        load("small", {"model.architecture": "decoder"})
    assert err.value.field == "model.architecture"


def test_the_shape_fields_size_the_kv_cache():
    w = load("intermediate", LLAMA_31_70B)
    assert model_shape(w) == (80, 64, 8, 8192)
    assert kv_bytes_per_token(w) == LLAMA_31_70B_KV_BYTES
    # Multi-head attention (every head its own K and V) holds 8 times the cache.
    assert kv_bytes_per_token(load("intermediate", {**LLAMA_31_70B, "model.kv_heads": "64"})) == 8 * LLAMA_31_70B_KV_BYTES


def test_the_plan_says_which_shape_fields_are_assumed():
    stated = plan(load("huge", LLAMA_31_70B)).model[1]  # huge serves 70B (intermediate on one L4 cannot)
    assert stated.startswith("decoder shape: 80 layers, 64 attention heads, 8 KV heads, hidden 8192, FFN width 28672, "
                             "vocabulary 128,256")
    assert "assumed" not in stated
    assumed = plan(load("intermediate")).model[1]
    assert ("model.layers, model.kv_heads, model.hidden_size, model.intermediate_size, model.vocab_size assumed"
            in assumed)
