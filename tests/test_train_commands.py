"""Issue 30: what the plan tells the user to run is complete for the workload it plans (the golden path itself, run
for real, is tests/test_golden_path.py under `make test-trainer`).

- The Slurm Submit output (PCS and HyperPod) tokenizes the dataset's text first, then trains on those shards with the
  tokenizer, the plan's steps and the export directory the FSx link makes the serving key.
- A SageMaker job's trainer exports to SM_MODEL_DIR (no /fsx there); Trn1 never gets a layout its stack refuses.
- Classic ML: `submit` defaults to the framework's shipped script, which trains a model the serving container
  reads from the contract's sample request; `invoke` sends that request in the contract's content type.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import subprocess
import sys

import pytest

from workloads import load, plan
from workloads.commands import jobs
from workloads.planning import layout as keys
from workloads.planning.parallelism import trainer_refusal
from workloads.planning.contracts import REQUESTS
from workloads.planning.train_commands import job_hyperparameters, sbatch_script

from .conftest import ROOT, SERVING_VARIANTS, VARIANTS

# The path from training to serving: the variants that serve.
CLUSTERS = [name for name in SERVING_VARIANTS if plan(load(*VARIANTS[name])).training.orchestrator != "sagemaker-jobs"]


def _arguments(submit: str, script: str) -> list[str]:
    words = shlex.split(submit.replace("$(", " ").replace(")", " "))
    start = next(i for i, w in enumerate(words) if w.endswith("/" + script)) + 1
    end = next((i for i, w in enumerate(words[start:], start) if w == "&&"), len(words))
    return words[start:end]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("variant", CLUSTERS)
def test_the_submit_output_prepares_the_data_and_trains_the_plans_steps(variant, variant_synth_by_name):
    s = variant_synth_by_name(variant)
    workload, overrides = VARIANTS[variant]
    t = plan(load(workload, overrides)).training
    submit = s.templates["TrainStack"]["Outputs"]["Submit"]["Value"]
    prepare = _arguments(submit, "prepare.sbatch")
    train = _arguments(submit, sbatch_script(t.accelerator_kind, t.parallelism))
    # The prepare step reads the dataset's text and tokenizer where FSx imports them, and writes what training reads.
    assert _flag(prepare, "--input") == keys.on_fsx(keys.TEXT) == "/fsx/datasets/text"
    assert _flag(prepare, "--tokenizer") == _flag(train, "--tokenizer") == keys.on_fsx(keys.TOKENIZER)
    assert _flag(prepare, "--output") == _flag(train, "--data")
    assert "sbatch --dependency=afterok:${prep%%;*} --kill-on-invalid-dep=yes" in submit and "sbatch --parsable" in submit
    assert _flag(train, "--steps") == str(t.parallelism.steps) and t.parallelism.steps > 1
    assert _flag(train, "--export-dir") == t.parallelism.export_dir
    # The export directory is what the FSx link writes to the serving key of the GPU endpoints.
    served = {p.serving.artifact_key for p in plan(load(workload, overrides)).inference.values() if p.serving}
    assert t.parallelism.export_dir.startswith(keys.on_fsx(keys.MODELS) + "/")  # /fsx/output: linked to models/
    assert keys.MODELS + t.parallelism.export_dir.rsplit("/", 1)[1] + "/" in served
    assert f"--signal=TERM@{t.parallelism.signal_lead_s}" in submit


def test_the_steps_train_the_plans_tokens():
    t = plan(load("huge")).training
    s = t.parallelism
    tokens = t.estimate.tokens_billion * 1e9
    assert s.steps * s.global_batch * s.sequence >= tokens > (s.steps - 1) * s.global_batch * s.sequence


@pytest.mark.parametrize("workload", ["intermediate", "examples/workloads/llm-finetune-realtime.yaml"])
def test_a_jobs_trainer_exports_where_sagemaker_uploads(workload):
    """No /fsx on a job: the layout names no export directory, so train.py writes SM_MODEL_DIR, and the plan says
    how that becomes the serving key."""
    p = plan(load(workload))
    assert p.training.orchestrator == "sagemaker-jobs" and p.training.parallelism.export_dir == ""
    assert any("SM_MODEL_DIR" in line and "python -m workloads promote" in line for line in p.path)
    hyper = job_hyperparameters(p.training.parallelism)
    assert hyper["data"] == keys.JOB_TOKENS_CHANNEL and hyper["tokenizer"].startswith(keys.JOB_CHANNEL)
    assert "text" not in hyper  # tokenized once by the prepare job before the job (commands/prepare_job.py)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_no_variant_plans_a_layout_its_trainer_refuses(name):
    workload, overrides = VARIANTS[name]
    t = plan(load(workload, overrides)).training
    if t.parallelism is not None:
        assert trainer_refusal(t.parallelism, t.software.device, what=name) is None
        # On Trn1 train.py runs DDP; beyond it NxD Training runs the ZeRO-1 layout with its generated config.
        assert t.software.device != "xla" or t.parallelism.sharding == "none" or (
            t.parallelism.sharding == "zero1" and t.parallelism.nxdt and t.parallelism.nxdt["config"])


def _train_classic(tmp_path, script: str, rows: int = 200) -> tuple:
    import numpy as np

    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 3))  # the contract's sample request has three features
    labels = features @ np.array([1.0, -2.0, 0.5])
    channel, model_dir = tmp_path / "train", tmp_path / "model"
    (channel / "part").mkdir(parents=True)
    np.savetxt(channel / "part" / "data.csv", np.column_stack([labels, features]), delimiter=",")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "classic" / script), "--num-round" if "xgb" in
                           script else "--max-iter", "20"], capture_output=True, text=True, cwd=tmp_path,
                          env={"SM_CHANNEL_TRAIN": str(channel), "SM_MODEL_DIR": str(model_dir), "PATH": ""})
    assert done.returncode == 0, done.stderr
    return model_dir, np.array([[float(v) for v in REQUESTS["xgboost"].sample.split(",")]])


@pytest.fixture(scope="module")
def xgboost_trained(tmp_path_factory) -> tuple:
    """The XGBoost example trained once for the tests that read what it saved (a process importing xgboost)."""
    return _train_classic(tmp_path_factory.mktemp("xgboost"), "xgboost_train.py")


@pytest.fixture(scope="module")
def sklearn_trained(tmp_path_factory) -> tuple:
    return _sklearn_inference(tmp_path_factory.mktemp("sklearn"))


def test_the_xgboost_example_saves_what_the_container_serves(xgboost_trained):
    import xgboost as xgb

    model_dir, sample = xgboost_trained
    booster = xgb.Booster()
    booster.load_model(str(model_dir / "xgboost-model"))  # the name the XGBoost container loads
    assert booster.predict(xgb.DMatrix(sample)).shape == (1,)


def test_the_xgboost_example_saves_ubjson_as_the_32_container_loads(xgboost_trained):
    """XGBoost 3 writes `xgboost-model` (no .json/.ubj) as UBJSON, the format of the sagemaker-xgboost-container's own
    test model since 3.2.0 (cb8df91 test/resources/abalone/models/libsvm_pickled/xgboost-model starts b'{L...learner';
    the 1.7-1 one was a pickle); the endpoint loads every top-level file, so nothing else is saved beside it."""
    model_dir, _ = xgboost_trained
    assert [p.name for p in model_dir.iterdir()] == ["xgboost-model"]
    assert (model_dir / "xgboost-model").read_bytes()[:2] == b"{L"


def _sklearn_inference(tmp_path):
    import importlib.util

    model_dir, sample = _train_classic(tmp_path, "sklearn_train.py")
    spec = importlib.util.spec_from_file_location("inference", model_dir / "code" / "inference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, module.model_fn(str(model_dir)), sample


def test_the_sklearn_example_saves_its_model_and_the_inference_code(sklearn_trained):
    _, model, sample = sklearn_trained
    assert model.predict(sample).shape == (1,)


def test_the_sklearn_inference_code_reads_the_contracts_requests_as_rows(sklearn_trained):
    """The 1.9-0 single-model server's default_input_fn squeezes a one-row CSV body to 1-D, which predict refuses;
    the shipped input_fn reads every content type of the contract as 2-D rows, one CSV row a line."""
    import io

    import numpy as np

    module, model, _ = sklearn_trained
    contract = REQUESTS["sklearn"]
    assert set(module.READS) == set(contract.reads)
    assert model.predict(module.input_fn(contract.sample.encode(), contract.content_type)).shape == (1,)
    assert model.predict(module.input_fn("0.5,1.5,2.5\n1,2,3\n", "text/csv; charset=utf-8")).shape == (2,)
    assert module.input_fn(b"[0.5, 1.5, 2.5]", "application/json").shape == (1, 3)
    npy = io.BytesIO()
    np.save(npy, np.array([[0.5, 1.5, 2.5]] * 4))
    assert module.input_fn(npy.getvalue(), "application/x-npy").shape == (4, 3)
    with pytest.raises(ValueError, match="text/csv"):
        module.input_fn(b"x", "text/libsvm")


@pytest.mark.parametrize("workload, kind", [("small", "realtime"), ("small", "serverless"), ("huge", "async")])
def test_invoke_sends_the_contracts_request_by_default(monkeypatch, workload, kind):
    from workloads.commands import invoke as invoke_module
    from workloads.commands.cli import main

    sent = {}

    def fake(the_plan, *, kind, body, content_type, **_):
        sent.update(body=body, content_type=content_type)
        return invoke_module.Answer(kind, "endpoint", b"ok")

    monkeypatch.setattr(invoke_module, "invoke", fake)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["invoke", workload, "--kind", kind]) == 0
    request = plan(load(workload)).inference[kind].serving.request
    assert sent == {"body": request.sample.encode(), "content_type": request.content_type}
    assert request.content_type in request.reads
    if request.content_type == "application/json":
        json.loads(request.sample)


def test_invoke_on_a_kind_the_plan_lacks_is_bad_input_exit_2(capsys):
    """`invoke small --kind async` exited 1, the status of an AWS failure (issue 34 item 10.6); nothing is sent."""
    from workloads.commands.cli import main

    assert main(["invoke", "small", "--kind", "async"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --kind = 'async': the plan has no async endpoint") and "allowed: realtime, serverless" in err


def test_a_fine_tune_names_its_base_model_where_each_trainer_reads_it():
    """Issue 42: training.init_from (a Hugging Face directory under datasets/, or on FSx) reaches train.py as
    --init-from: on a cluster at the FSx path the dataset link imports it to, on a SageMaker job in its train
    channel. A job cannot read FSx, and a key outside datasets/ is neither on FSx nor in the channel: refused."""
    from workloads.errors import ConfigError
    from workloads.planning.train_commands import slurm_submit

    base = {"training.init_from": "datasets/base/llama-3-8b"}
    t = plan(load("huge", base)).training
    assert t.orchestrator != "sagemaker-jobs"
    submit = slurm_submit(workload="huge", nodes=t.instance_count, accelerator_kind=t.accelerator_kind,
                          parallelism=t.parallelism, init_from=load("huge", base).training.init_from)
    assert _flag(_arguments(submit, "train-gpu.sbatch"), "--init-from") == "/fsx/datasets/base/llama-3-8b"
    assert "--init-from" not in slurm_submit(workload="huge", nodes=t.instance_count, accelerator_kind=None,
                                             parallelism=t.parallelism)
    p = plan(load("intermediate", base))
    assert p.training.orchestrator == "sagemaker-jobs"
    hyper = job_hyperparameters(p.training.parallelism, init_from=p.workload.training.init_from)
    assert hyper["init-from"] == keys.JOB_CHANNEL + "/base/llama-3-8b"
    for bad, said in (({"training.init_from": "/fsx/base/llama", "training.orchestrator": "sagemaker-jobs"},
                       "a SageMaker job has no FSx"), ({"training.init_from": "models/llama"}, "init_from")):
        with pytest.raises(ConfigError) as refused:
            load("intermediate", bad)
        assert said in str(refused.value) and "\n" not in str(refused.value).strip(), str(refused.value)
