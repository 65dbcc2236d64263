"""Issue 42: a workload whose model is an encoder classifier is fine-tuned as one. The plan's own layout (task
sequence-classification, BERT's batch, learning rate and epochs) launches examples/slurm/train.py as the cluster and
the SageMaker job do; it hands over to classifier.py, which fine-tunes a BERT encoder on the prepare step's labelled
examples on two CPU ranks (DDP), and exports what the Ray Serve application and transformers read: config.json with
id2label, model.safetensors, the tokenizer's files and code/. Before: train.py trained a decoder language model on the
text whatever the task, and exported LlamaForCausalLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from workloads import load, plan

pytestmark = pytest.mark.trainer

SLURM = Path(__file__).resolve().parent.parent / "examples" / "slurm"
TRAINER, PREPARE = SLURM / "train.py", SLURM / "prepare.py"
BERT = {"model.parameters_billion": "0.11", "model.framework": "pytorch", "model.architecture": None,
        "model.attention_heads": None, "data.dataset_size_gib": "1", "data.tokens_billion": "0.1",
        "training.epochs": None, "training.instance_type": None, "training.instance_count": None,
        "training.orchestrator": None, "inference": "none", "data.storage": None}
GOOD, BAD = ("good", "great", "fine", "lovely", "superb"), ("bad", "awful", "poor", "dreadful", "terrible")
FILLER = ("the", "movie", "was", "quite", "really", "a", "film", "plot", "and", "acting")


def _tokenizer(directory: Path) -> Path:
    """A BERT-style WordPiece tokenizer trained here on the examples' words ([CLS] ... [SEP], [PAD] 0)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator([" ".join(GOOD + BAD + FILLER)] * 10, trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    directory.mkdir(parents=True)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "[PAD]", "unk_token": "[UNK]",
        "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}))
    return directory


def _examples(directory: Path, count: int = 1536) -> Path:
    """Sentences whose label is the sentiment word in them, in two JSONL files."""
    import random

    rng = random.Random(3)
    directory.mkdir(parents=True)
    for part in range(2):
        with (directory / f"part-{part}.jsonl").open("w") as f:
            for _ in range(count // 2):
                positive = rng.random() < 0.5
                words = rng.sample(FILLER, 4) + [rng.choice(GOOD if positive else BAD)]
                rng.shuffle(words)
                f.write(json.dumps({"text": " ".join(words), "label": "positive" if positive else "negative"}) + "\n")
    return directory


def _layout(tmp: Path) -> Path:
    """The plan's layout for a BERT-base classifier, its shape made small for CPU (the task and recipe the plan's)."""
    spread = plan(load("intermediate", BERT)).training.parallelism
    assert spread.task == "sequence-classification" and spread.epochs == 3 and spread.global_batch == 32
    small = replace(spread, layers=2, hidden=64, heads=4, sequence=16, micro_batch=8, lr=3e-3, export_dir="",
                    checkpoint_every=4)
    path = tmp / "layout.json"
    path.write_text(small.as_json())
    return path


def _run(tmp: Path, *args: str, ranks: int = 2) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("LAYOUT_JSON", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                           str(TRAINER), "--device", "cpu", "--log-every", "1", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _prepare(tmp: Path, text: Path, tokenizer: Path, out: Path) -> None:
    done = subprocess.run([sys.executable, str(PREPARE), "--input", str(text), "--tokenizer", str(tokenizer),
                           "--output", str(out), "--task", "sequence-classification", "--seq", "16", "--workers", "1"],
                          cwd=tmp, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("encoder")
    tokenizer, text = _tokenizer(tmp / "tokenizer"), _examples(tmp / "text")
    _prepare(tmp, text, tokenizer, tmp / "tokens")
    out = _run(tmp, "--layout", str(_layout(tmp)), "--data", str(tmp / "tokens"), "--tokenizer", str(tokenizer),
               "--checkpoint-dir", str(tmp / "ckpt"), "--export-dir", str(tmp / "export"))
    return tmp, out


def test_the_prepare_step_writes_labelled_examples_of_the_planned_length(trained):
    import numpy as np

    tmp, _ = trained
    info = json.loads((tmp / "tokens" / "meta.json").read_text())
    assert (info["task"], info["seq"], info["pad_id"]) == ("sequence-classification", 16, 0)
    ids = np.load(tmp / "tokens" / "part-0.jsonl.ids.npy")
    labels = json.loads((tmp / "tokens" / "part-0.jsonl.labels.json").read_text())
    held = json.loads((tmp / "tokens" / "heldout" / "part-0.jsonl.labels.json").read_text())
    assert ids.shape == (len(labels), 16) and len(labels) + len(held) == 768
    assert set(labels) == {"positive", "negative"}


def test_the_plans_layout_fine_tunes_a_classifier_and_its_loss_goes_down(trained):
    _, out = trained
    assert "fine-tuning an encoder classifier" in out and "2 labels" in out, out
    steps = int(re.search(r"= (\d+) steps", out)[1])
    assert steps == -(-3 * int(re.search(r"([\d,]+) examples x 3 epochs", out)[1].replace(",", "")) // 32)
    losses = {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.]+)", out, re.M)}
    assert sorted(losses) == list(range(1, steps + 1))
    first, last = sum(losses[s] for s in (1, 2, 3)) / 3, sum(losses[s] for s in range(steps - 2, steps + 1)) / 3
    assert first > 0.6 and last < 0.5 * first, losses  # from chance (ln 2) towards the labels


def test_the_export_loads_in_transformers_and_classifies(trained):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    tmp, out = trained
    export = tmp / "export"
    assert f"exported {export}" in out
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert {"model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {p.name for p in export.iterdir()}
    model = AutoModelForSequenceClassification.from_pretrained(export)
    classify = pipeline("text-classification", model=model, tokenizer=AutoTokenizer.from_pretrained(export))
    assert classify("the movie was great")[0]["label"] == "positive"
    assert classify("a dreadful film plot")[0]["label"] == "negative"
    # The serving application (code/inference.py, no transformers) answers as transformers does.
    sys.path[:0] = [str(export / "code")]
    try:
        import inference

        ours = inference.Classifier(export)
        texts = inference.texts_of(json.dumps({"inputs": ["the acting was lovely", "really poor and awful"]}))
        answers = ours.predict(texts)
    finally:
        del sys.path[0]
        sys.modules.pop("inference", None)
    assert [a["label"] for a in answers] == ["positive", "negative"]
    tok = AutoTokenizer.from_pretrained(export)
    with torch.no_grad():
        theirs = model(**tok(texts, return_tensors="pt", padding=True)).logits.softmax(-1).max(-1).values
    assert [a["score"] for a in answers] == pytest.approx(theirs.tolist(), abs=1e-5)


def test_a_resumed_run_continues_and_the_archive_is_the_serving_contracts(trained, tmp_path):
    """A second start on the finished run's checkpoints resumes at its last step; an export path ending in .tar.gz
    packs the directory as the framework archive (its files at the top, code/inference.py among them)."""
    tmp, _ = trained
    ckpt = tmp_path / "ckpt"
    common = ["--layout", str(tmp / "layout.json"), "--data", str(tmp / "tokens"), "--tokenizer",
              str(tmp / "tokenizer"), "--checkpoint-dir", str(ckpt), "--steps", "6"]
    first = _run(tmp_path, *common, "--checkpoint-every", "2")
    assert "step 6 loss" in first and (ckpt / "latest").read_text().strip() == "step-00000006.pt"
    again = _run(tmp_path, *[a if a != "6" else "8" for a in common], "--export-dir", str(tmp_path / "model.tar.gz"))
    assert "resumed at step 6" in again and "step 7 loss" in again and "step 1 loss" not in again
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"config.json", "model.safetensors", "tokenizer.json", "code/inference.py", "code/encoder_model.py"} <= names


def test_our_encoder_is_transformers_bert_for_sequence_classification():
    """The same weights give the same logits in encoder_model.py and in transformers (padding masked alike)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    sys.path.insert(0, str(SLURM))
    try:
        import encoder_model
    finally:
        del sys.path[0]
    ours = encoder_model.EncoderClassifier(vocab=100, layers=2, hidden=32, heads=4, labels=3).eval()
    config = encoder_model.hf_config(ours, {0: "a", 1: "b", 2: "c"}, pad_id=0, dtype="float32")
    theirs = BertForSequenceClassification(BertConfig(**config)).eval()
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all("position_ids" in k or "token_type_ids" in k for k in missing), missing
    ids = torch.randint(1, 100, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        assert torch.allclose(ours(ids, mask), theirs(input_ids=ids, attention_mask=mask).logits, atol=1e-5)


def test_a_nonfinite_step_is_skipped_by_the_same_guard_as_train_py_and_the_run_recovers(trained, tmp_path):
    """Issue 42 / review: classifier.py counted skipped steps on its own; now safety.StepGuard (train.py's) decides:
    an injected inf loss skips the step (said, counted), the weights stay finite and the run goes on."""
    tmp, _ = trained
    out = _run(tmp_path, "--layout", str(tmp / "layout.json"), "--data", str(tmp / "tokens"), "--tokenizer",
               str(tmp / "tokenizer"), "--checkpoint-dir", str(tmp_path / "ckpt"), "--steps", "5",
               "--inject-nonfinite", "3")
    assert "step 3 skipped: gradient norm" in out and "(1 in a row, 1 skipped in this run)" in out, out
    assert re.search(r"^step 5 loss [0-9.]+ .*1 skipped", out, re.M), out


def test_too_many_nonfinite_steps_in_a_row_stop_the_classifier_with_the_guards_message(trained, tmp_path):
    tmp, _ = trained
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("LAYOUT_JSON", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(TRAINER), "--device", "cpu", "--log-every", "1", "--layout", str(tmp / "layout.json"),
                           "--data", str(tmp / "tokens"), "--tokenizer", str(tmp / "tokenizer"), "--checkpoint-dir",
                           str(tmp_path / "ckpt"), "--steps", "8", "--checkpoint-every", "2",
                           "--max-nonfinite-steps", "2", "--inject-nonfinite", "3,4,5,6"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "stopping at step 5: 3 steps in a row had a non-finite gradient norm or loss" in said, said[-3000:]
    assert "--max-nonfinite-steps" in said and "`latest` names step-00000002.pt" in said
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step-00000002.pt"
