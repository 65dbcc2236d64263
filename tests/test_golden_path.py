"""Issue 30: the user's whole path as one, from the plan to a served model, with what each part emits as the next
part's input. Run by `make test-trainer` (CI), on CPU ranks, scaled down:

- every layout the presets, examples and variants plan runs in the shipped trainer;
- the TrainStack's Submit output, parsed and run as printed: the prepare step on a real corpus with a tokenizer
  trained here, then the trainer, whose export loads with its tokenizer and generates;
- the LLM example end to end in the local emulator: deploy the data and training stacks, upload the corpus and
  tokenizer, `submit` (the job's own arguments, run here as SageMaker would), upload what SageMaker uploads,
  `promote`, deploy the InferenceStack (its artifact check passes), and `invoke` with the contract's request.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from dataclasses import asdict
from pathlib import Path

import pytest

from workloads import load, plan
from workloads.planning import layout as keys
from workloads.planning.parallelism import trainer_refusal
from workloads.planning.train_commands import EXAMPLES_ON_NODE, sbatch_script

from .conftest import ROOT, VARIANTS
from .golden import (EXAMPLES, SCALED_DOWN, generates, record_training_jobs, run, save_base_model, torchrun,
                     TOKENIZER_VOCAB, train_tokenizer, write_corpus)

pytestmark = pytest.mark.trainer

LLM_EXAMPLE = "examples/workloads/llm-finetune-realtime.yaml"
EMITTED = {**VARIANTS, **{p.name: (str(p.relative_to(ROOT)), None)
                          for p in sorted((ROOT / "examples" / "workloads").glob("*.yaml"))},
           # HSDP is planned only across nodes (never on one: parallelism._hybrid), and no shipped config trains a
           # model whose state fits one node on several: a 7B pre-train on 2 x p5 is the planner's HSDP case
           "hsdp-7b-two-nodes": ("intermediate", {"model.parameters_billion": "7", "training.orchestrator": "slurm",
                                                  "training.instance_type": "p5.48xlarge",
                                                  "training.instance_count": "2"})}


def _layouts() -> dict[tuple, tuple[str, dict]]:
    """Each distinct layout the shipped configs plan, with the first config that plans it and its stack's device."""
    found = {}
    for name, (workload, overrides) in EMITTED.items():
        t = plan(load(workload, overrides)).training
        if t.parallelism is None:
            continue
        s = t.parallelism
        if s.nxdt is not None:  # NxD Training runs it (train-nxdt.sbatch), not train.py: tests/test_nxd.py and
            continue            # test_sbatch_scripts.py check what it is given; no Neuron package runs here
        shape = (t.software.device, s.sharding, s.tensor, s.pipeline, s.recompute)
        found.setdefault(shape, (name, asdict(s)))
    return found


LAYOUTS = _layouts()


@pytest.fixture(scope="module")
def corpus_and_tokenizer(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("data")
    corpus = write_corpus(base / "text")
    return corpus, train_tokenizer(corpus, base / "tokenizer")


def test_the_configs_plan_layouts_of_every_kind_the_trainer_runs():
    """DDP, FSDP2, HSDP, tensor parallel with FSDP2 across and pipeline stages (examples/workloads/
    long-context-pipeline.yaml) all appear (so the run below covers them), and no plan asks the trainer for what it
    refuses."""
    assert {shape[1] for shape in LAYOUTS} == {"none", "full", "hybrid"}
    assert any(shape[2] > 1 for shape in LAYOUTS), LAYOUTS
    assert any(shape[3] > 1 for shape in LAYOUTS), LAYOUTS
    for (device, *_), (name, spread) in LAYOUTS.items():
        from workloads.planning.parallelism import Parallelism

        assert trainer_refusal(Parallelism(**spread), device, what=name) is None, name


@pytest.mark.parametrize("shape", list(LAYOUTS), ids=lambda s: "-".join(map(str, s)))
def test_every_planned_layout_trains_in_the_shipped_trainer(tmp_path, shape):
    """train.py on two CPU ranks with the plan's own layout (its sharding, tensor and pipeline degrees,
    recomputation), at a CPU-sized shape. Trn1's layouts (device xla) run here on CPU: the planner gives them DDP,
    the path train.py takes with PyTorch/XLA too. A pipelined layout runs two stages (of tensor parallel 2: four
    ranks), two micro-batches a step: 1F1B."""
    name, spread = LAYOUTS[shape]
    path = tmp_path / "layout.json"
    path.write_text(json.dumps({**spread, "export_dir": ""}))
    tensor = min(spread["tensor"], 2)  # two CPU ranks: the plan's degree where it is 2, else 2 for its path
    stages = min(spread["pipeline"], 2)
    # HSDP on two ranks: shard groups of one (SCALED_DOWN), the two replicating (the plan's group is sized for nodes)
    ranks = 2 * stages  # each data rank one sequence a micro-batch, one micro-batch a stage
    out = torchrun(["--device", "cpu", "--layout", str(path), *SCALED_DOWN, "--tensor", str(tensor),
                    "--pipeline", str(stages), "--global-batch", str(ranks // tensor),
                    "--checkpoint-dir", str(tmp_path / "c")], cwd=tmp_path, ranks=ranks)
    how = {"full": "FSDP2", "none": "DDP", "hybrid": "HSDP, replicate 2 x shard 1"}[spread["sharding"]] \
        + (f", tensor parallel {tensor}" if tensor > 1 else "") + (f", pipeline {stages} stages (1F1B)" if stages > 1
                                                                  else "")
    assert how + ", cpu" in out, name
    assert re.search(r"^step 3 loss", out, re.M), out


def _on_test_disk(value: str, fsx: Path) -> str:
    return value.replace(keys.FSX_MOUNT, str(fsx), 1) if value.startswith(keys.FSX_MOUNT) else value


def _sbatch_jobs(submit: str) -> list[tuple[str, list[str]]]:
    """Each `sbatch ... SCRIPT ARGS` of the Submit line: the script's name and the arguments it is given."""
    jobs = []
    for command in re.findall(r"sbatch [^)&]+", submit):
        words = shlex.split(command)
        script = next(i for i, w in enumerate(words) if w.startswith(EXAMPLES_ON_NODE + "/"))
        jobs.append((words[script].rsplit("/", 1)[1], words[script + 1:]))
    return jobs


def test_the_submit_output_runs_as_printed(tmp_path, synth, corpus_and_tokenizer):
    """huge's TrainStack Submit output, parsed: prepare.sbatch's prepare.py, then the training sbatch's train.py with
    exactly its arguments (after the layout and device the sbatch adds), /fsx a folder here, scaled down. The export
    lands where the FSx link takes it to the serving key, with the tokenizer, and generates."""
    s = synth("huge")
    submit = s.templates["TrainStack"]["Outputs"]["Submit"]["Value"]
    t = plan(load("huge")).training
    (prep_script, prep_args), (train_script, train_args) = _sbatch_jobs(submit)
    # huge plans p6-b200 on demand since the capacity merge (GPU nodes); the script follows the plan's accelerator.
    assert prep_script == "prepare.sbatch" and train_script == sbatch_script(t.accelerator_kind)
    assert "--dependency=afterok:${prep%%;*}" in submit  # training waits for the prepare step to succeed
    assert train_args[train_args.index("--steps") + 1] == str(t.parallelism.steps)
    # The sbatch scripts pass their arguments on: prepare.py "$@", and train.py after --device and --layout.
    assert 'prepare.py" "$@"' in (EXAMPLES / prep_script).read_text()
    assert '--layout "$LAYOUT" "$@"' in (EXAMPLES / train_script).read_text()

    fsx = tmp_path / "fsx"
    corpus, tokenizer = corpus_and_tokenizer
    (fsx / "datasets").mkdir(parents=True)
    (fsx / "datasets" / "text").symlink_to(corpus)  # as the FSx link imports datasets/text/ and datasets/tokenizer/
    (fsx / "datasets" / "tokenizer").symlink_to(tokenizer)
    out = run(["python3", str(EXAMPLES / "prepare.py"), *[_on_test_disk(a, fsx) for a in prep_args]], cwd=tmp_path)
    assert "tokenized" in out
    layout_file = tmp_path / "layout.json"
    layout_file.write_text(t.parallelism.as_json())
    args = [_on_test_disk(a, fsx) for a in train_args]
    out = torchrun(["--device", "cpu", "--layout", str(layout_file), *args, *SCALED_DOWN], cwd=tmp_path,
                   env={"CHECKPOINT_DIR": str(fsx / "checkpoints" / "huge-train")})
    assert "vocabulary 512 from the tokenizer" in out
    export = Path(_on_test_disk(t.parallelism.export_dir, fsx))
    assert f"exported {export}" in out
    # /fsx/output/llm is what the FSx link writes to models/llm/, the key the async and batch endpoints read.
    assert keys.MODELS + export.name + "/" in {p.serving.artifact_key for p in plan(load("huge")).inference.values()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= \
        {p.name for p in export.iterdir()}
    generates(export)


def _cli(*argv: str) -> str:
    from workloads.commands.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code == 0, out.getvalue()
    return out.getvalue()


def test_the_llm_example_from_plan_to_an_invoked_endpoint(tmp_path, monkeypatch, corpus_and_tokenizer):
    from tools.emulator import running

    p = plan(load(LLM_EXAMPLE))
    w, t = p.workload, p.training
    assert t.orchestrator == "sagemaker-jobs" and t.parallelism.export_dir == ""  # a job exports to SM_MODEL_DIR
    corpus, tokenizer = corpus_and_tokenizer
    sent = record_training_jobs(monkeypatch)
    with running(w.region) as emu:
        emu.bootstrap(quiet=True)
        emu.deploy("-c", f"workload={LLM_EXAMPLE}", stacks=("NetworkStack", "JobLogsStack", "DataStack", "TrainStack"),
                   quiet=True)
        with emu.in_process():
            s3 = emu.client("s3")
            bucket = next(o["OutputValue"] for o in emu.client("cloudformation").describe_stacks(
                StackName=f"{w.name}-DataStack")["Stacks"][0]["Outputs"] if o["OutputKey"] == "DatasetBucketName")
            # The example fine-tunes: its base model (a tiny Llama the test saved, the tokenizer's vocabulary) where
            # training.init_from names it, under datasets/ (the job's train channel).
            base = save_base_model(tmp_path / "base", vocab=TOKENIZER_VOCAB)
            for prefix, folder in ((keys.TEXT, corpus), (keys.TOKENIZER, tokenizer), (w.training.init_from, base)):
                for f in sorted(folder.iterdir()):
                    s3.upload_file(str(f), bucket, prefix + f.name)

            # `submit` with no script named runs the shipped trainer with the plan's data, tokenizer and steps.
            printed = _cli("submit", LLM_EXAMPLE)
            job = re.search(r"training job (\S+):", printed)[1]
            promote = re.search(r"python -m workloads (promote .+)$", printed, re.M)[1]
            request = sent[-1]
            assert request["OutputDataConfig"]["CompressionType"] == "NONE"
            hyper = {k: json.loads(v) if v.startswith('"') else v for k, v in request["HyperParameters"].items()}
            assert hyper["steps"] == str(t.parallelism.steps)
            assert hyper["init-from"] == keys.in_job(w.training.init_from)

            # SageMaker's part, here: the channel (datasets/) on the node, the script with the job's arguments
            # (the SDK's driver passes hyperparameters as --name value), then SM_MODEL_DIR to the output path.
            channel, model_dir = tmp_path / "channel", tmp_path / "model"
            for o in s3.list_objects_v2(Bucket=bucket, Prefix=keys.DATASETS)["Contents"]:
                target = channel / o["Key"].removeprefix(keys.DATASETS)
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket, o["Key"], str(target))
            # The prepare job first (`submit` waited for it): prepare.py with its arguments, datasets/ at its input,
            # its output uploaded to processed/tokens/<name>/, which the job's `tokens` channel copies to each node.
            from workloads.commands import prepare_job

            assert f"prepare job {w.name}-prepare-" in printed
            tokens = tmp_path / "tokens"
            prepared = [a.replace(prepare_job.INPUT, str(channel), 1).replace(prepare_job.OUTPUT, str(tokens), 1)
                        for a in prepare_job.arguments(p)]
            assert "tokenized" in run(["python3", str(EXAMPLES / "prepare.py"), *prepared], cwd=tmp_path)
            local = {keys.JOB_CHANNEL: str(channel), keys.JOB_TOKENS_CHANNEL: str(tokens)}
            args = [a for k, v in hyper.items() if not k.startswith("sagemaker_")
                    for a in (f"--{k}", next((v.replace(j, l, 1) for j, l in local.items() if v.startswith(j)), v))]
            out = torchrun(["--device", "cpu", *args, *SCALED_DOWN], cwd=tmp_path, env={
                **request["Environment"], "SM_MODEL_DIR": str(model_dir), "CHECKPOINT_DIR": str(tmp_path / "ckpt")})
            assert "tokenized" not in out and f"exported {model_dir}" in out  # the job itself tokenizes nothing
            for f in sorted(model_dir.iterdir()):
                s3.upload_file(str(f), bucket, f"{keys.OUTPUT}{job}/output/model/{f.name}")

            copied = _cli(*shlex.split(promote))
            key = p.inference["realtime"].serving.artifact_key
            assert f"s3://{bucket}/{key}" in copied
        emu.deploy("-c", f"workload={LLM_EXAMPLE}", stacks=("InferenceStack",), quiet=True)
        with emu.in_process():
            answer = _cli("invoke", LLM_EXAMPLE)  # the contract's content type and sample request
            assert "realtime endpoint" in answer
            served = tmp_path / "served"
            served.mkdir()
            for o in s3.list_objects_v2(Bucket=bucket, Prefix=key)["Contents"]:
                s3.download_file(bucket, o["Key"], str(served / o["Key"].removeprefix(key)))
    generates(served)  # what the endpoint reads is a model with its tokenizer
