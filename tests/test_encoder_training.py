"""Issue 42: a workload whose model is an encoder classifier (BERT-like, inferred by config/model.py) is planned as
sequence-classification fine-tuning: BERT's shape, batch of 32 sequences of 128 tokens, learning rate 2e-5, 3 epochs,
its memory and time. Before: a BERT-base classifier (0.11B) was planned as a one-layer 0.19B decoder language model
with Llama 2's 4M-token batch."""

from __future__ import annotations

import math

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.planning import encoder, estimates as est
from workloads.planning.parallelism import STATE_BYTES_PER_PARAM
from workloads.planning.training import plan_training
from workloads.planning.training_layout import trained_billion

CAT = load_catalog()
BERT_BASE = {"model.parameters_billion": "0.11", "model.framework": "pytorch", "model.architecture": None,
             "model.attention_heads": None, "data.dataset_size_gib": "1", "data.tokens_billion": "0.1",
             "training.epochs": None, "training.instance_type": None, "training.instance_count": None,
             "training.orchestrator": None, "inference": "none", "data.storage": None}


def _bert(**more: str):
    return load("intermediate", {**BERT_BASE, **more})


def test_a_bert_base_classifier_is_planned_as_bert_base_fine_tuning():
    w = _bert()
    t = plan_training(w, CAT)
    lay = t.parallelism
    assert lay.task == "sequence-classification" and (lay.layers, lay.hidden, lay.heads, lay.vocab) == (12, 768, 12, 30522)
    assert trained_billion(w) == pytest.approx(0.11, rel=0.03)  # bert-base-uncased: 110M
    assert (lay.sequence, lay.global_batch, lay.lr, lay.sharding, lay.recompute) == (128, 32, 2e-5, "none", False)
    tokens = 0.1e9 * 3  # 3 epochs (BERT's) of 0.1B tokens
    assert t.estimate.tokens_billion == pytest.approx(tokens / 1e9)
    assert lay.steps == math.ceil(tokens / 128 / 32) and lay.warmup_steps == math.ceil(lay.steps / 10)
    assert t.estimate.flops == pytest.approx(6 * trained_billion(w) * 1e9 * tokens)
    assert any("sequence classification" in d and "1810.04805" in d for d in t.decisions)
    assert not any("Llama 2" in d for d in t.decisions)


def test_its_memory_is_the_encoders_state_and_activations():
    w = _bert()
    lay = plan_training(w, CAT).parallelism
    state = trained_billion(w) * 1e9 * STATE_BYTES_PER_PARAM
    acts = 12 * lay.micro_batch * 128 * (34 * 768 + 5 * 12 * 128)
    assert lay.gib_per_rank == pytest.approx((state + acts) / 2**30, abs=0.05)


def test_the_epochs_and_sequence_can_be_set():
    t = plan_training(_bert(**{"training.epochs": "2", "training.sequence_length": "256"}), CAT)
    assert t.parallelism.sequence == 256 and t.estimate.tokens_billion == pytest.approx(0.2)


def test_an_encoder_trains_in_bf16_even_where_fp8_is_offered():
    t = plan_training(_bert(**{"training.instance_type": "p5.48xlarge"}), CAT)
    assert t.precision == "bf16" and any("not fp8" in d and "encoder" in d for d in t.decisions)


def test_a_large_encoder_is_sized_at_its_own_shape():
    w = _bert(**{"model.parameters_billion": "0.34"})
    assert encoder.shape(w)[:3] == (24, 1024, 16)  # BERT-large
    assert trained_billion(w) == pytest.approx(0.335, rel=0.03)


def test_decoders_are_still_planned_as_language_models():
    lay = plan(load("huge")).training.parallelism
    assert lay.task == "causal-lm" and lay.global_batch * lay.sequence >= 4 * 2**20 * 0.9


VISION = "examples/workloads/vision-classifier.yaml"
TEXT_CLASSIFIER = {"name": "reviews", "model.parameters_billion": "0.11", "model.architecture": "encoder",
                   "data.dataset_size_gib": "1", "data.tokens_billion": "0.1", "training.epochs": None,
                   "training.max_hours": None}


def _classifier(**more: str):
    from tests.conftest import ROOT

    return plan(load(str(ROOT / VISION), {**TEXT_CLASSIFIER, **more}))


def test_the_cluster_commands_prepare_labelled_examples_and_export_the_serving_archive():
    """The Submit line prepares labelled examples of the plan's sequence (prepare.py --task), trains without the
    plan's estimated steps (the trainer runs the layout's epochs over the examples it finds) and exports the framework
    archive itself where the FSx link puts it on the serving contract's key. Before: a decoder's token stream, --steps
    from the estimate and no export for a framework archive."""
    from workloads.planning.artifacts import artifact_checks
    from workloads.planning.train_commands import slurm_submit

    p = _classifier(**{"training.orchestrator": "slurm"})
    t = p.training
    assert (t.parallelism.task, t.parallelism.epochs) == ("sequence-classification", 3)
    assert t.parallelism.export_dir == "/fsx/output/model.tar.gz"
    line = slurm_submit(workload="reviews", nodes=t.instance_count, accelerator_kind=t.accelerator_kind,
                        parallelism=t.parallelism)
    prepare, train = line.split("&&")[1], line.split("&&")[2]
    assert "--output /fsx/tokens/reviews --task sequence-classification --seq 128" in prepare
    assert "--steps" not in train and "--data /fsx/tokens/reviews" in train
    assert "--export-dir /fsx/output/model.tar.gz" in train
    checks = artifact_checks(t, p.inference)
    assert {c.artifact for c in checks} == {"models/model.tar.gz"}
    assert all(c.put.startswith("train first: train.py exports /fsx/output/model.tar.gz") for c in checks)
    assert any(line.startswith("exported by train.py as model.tar.gz (a Hugging Face directory with code/inference.py")
               for line in p.path), p.path


def test_a_sagemaker_job_runs_the_shipped_trainer_with_the_classifiers_arguments():
    from workloads.commands.jobs import example_script, is_llm_trainer
    from workloads.planning.train_commands import job_hyperparameters

    p = _classifier(**{"training.orchestrator": "sagemaker-jobs"})
    source, entry = example_script(p)
    assert entry == "train.py" and source.endswith("examples/slurm")
    assert is_llm_trainer(p, source_dir=source, entry_point=entry)
    hyper = job_hyperparameters(p.training.parallelism)
    assert "steps" not in hyper and "text" not in hyper and hyper["data"] == "/opt/ml/input/data/tokens"
    assert '"task": "sequence-classification"' in p.training.parallelism.as_json()
