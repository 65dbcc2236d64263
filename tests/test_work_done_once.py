"""Work a synthesis, a teams file or the demo did more than once (issue 43, the tool's own speed), now done once:
the node image's example archives packed once per content, identical teams planned once, a construct's
acknowledgements sent to the CDK in one call, the emulator's bootstrap and second deploy without a synthesis of
their own. No wall time is asserted: each test checks that the work is not repeated, and that what comes out is the
same."""

from __future__ import annotations

import base64
import io
import json
import random
import tarfile
from pathlib import Path

import pytest
import yaml

from constructs_lib import examples_archive as ex
from tools import emulator as emu_module
from tools.emulator import Emulator
from workloads import load, plan
from workloads.planning.teams import load_teams

from .conftest import ROOT, TEAMS_FILE


def _files() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in ex.example_files()]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(ex, "_CACHE", tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def packed() -> tuple:
    """The examples packed once for this module: each pack is several xz compressions at preset 9 extreme (seconds of
    CPU), and the tests below ask what packing makes, not to make it again."""
    return tuple((tuple(names), archive) for names, archive in ex._pack(_files()))


@pytest.fixture
def counted_pack(monkeypatch, packed) -> list:
    """ex._pack answering `packed` and counting its calls: whether a cache hit packs, without packing."""
    calls = []

    def pack(files):
        assert files == _files()
        calls.append(1)
        return [[list(names), archive] for names, archive in packed]

    monkeypatch.setattr(ex, "_pack", pack)
    return calls


def test_packed_archives_hold_every_example_within_a_step(packed):
    """Every archive within a step's room: a file too large for one (train.py, once it outgrew it) goes as parts cut
    at line ends, which joined in order are the file."""
    shipped = {}
    for names, archive in packed:
        assert len(archive) <= ex.ARCHIVE_MAX_CHARS
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive)), mode="r:xz") as tar:
            assert tar.getnames() == list(names)
            shipped.update({name: tar.extractfile(name).read() for name in names})
    for whole, parts in ex.joins(list(shipped)).items():
        assert all(shipped[part].endswith(b"\n") for part in parts)
        shipped[whole] = b"".join(shipped.pop(part) for part in parts)
    assert shipped == dict(_files())


def test_a_file_too_large_for_one_archive_is_cut_into_parts_that_each_fit():
    rng = random.Random(43)  # fixed: not Python's per-process string hashing
    text = "".join(f"line {i}: {rng.randrange(10**12)} {i * 7919 % 104729}\n" for i in range(4000)).encode()
    assert len(ex.examples_archive([("big.py", text)])) > ex.ARCHIVE_MAX_CHARS
    parts = ex._parts([("small.py", b"x = 1\n"), ("big.py", text)])
    assert parts[0] == ("small.py", b"x = 1\n") and len(parts) > 2
    assert [n for n, _ in parts[1:]] == [f"big.py.part{i}" for i in range(1, len(parts))]
    assert b"".join(c for _, c in parts[1:]) == text
    assert all(len(ex.examples_archive([p])) <= ex.ARCHIVE_MAX_CHARS for p in parts)
    assert ex.joins([n for n, _ in parts]) == {"big.py": [n for n, _ in parts[1:]]}


def test_greedy_packing_fills_each_archive_as_far_as_it_goes(packed):
    by_name = dict(ex._parts(_files()))
    for (names, _), (following, _) in zip(packed, packed[1:]):
        tried = ex.examples_archive([(n, by_name[n]) for n in (*names, following[0])])
        assert len(tried) > ex.ARCHIVE_MAX_CHARS  # the next file did not fit: that is why a new archive began
    names, archive = packed[-1]
    assert ex.examples_archive([(n, by_name[n]) for n in names]) == archive  # byte-identical when packed again


def test_without_a_cache_the_examples_are_packed_and_written(cache_dir, counted_pack, packed):
    assert ex._load_or_pack(write=False) == packed and counted_pack == [1]
    assert not list(cache_dir.glob("ship_examples.*.json"))  # write=False (PYTHONDONTWRITEBYTECODE) writes nothing
    assert ex._load_or_pack(write=True) == packed and counted_pack == [1, 1]
    [cached] = cache_dir.glob("ship_examples.*.json")
    assert cached == ex._cache_path(_files())


def test_cached_archives_are_what_packing_makes_and_are_used(cache_dir, counted_pack, packed):
    first = ex._load_or_pack(write=True)
    [cached] = cache_dir.glob("ship_examples.*.json")
    assert first == packed and counted_pack == [1]
    assert ex._load_or_pack(write=False) == packed and counted_pack == [1]  # read back from the file, not packed
    cached.write_text(json.dumps([[["from-cache.py"], "AAAA"]]))
    assert ex._load_or_pack(write=False) == ((("from-cache.py",), "AAAA"),)  # a hit packs nothing
    assert counted_pack == [1]


def test_a_damaged_cache_is_packed_again(cache_dir, counted_pack, packed):
    ex._load_or_pack(write=True)
    [cached] = cache_dir.glob("ship_examples.*.json")
    cached.write_text("{not json")
    assert ex._load_or_pack(write=False) == packed and counted_pack == [1, 1]


def test_an_edited_example_gets_another_cache_entry(cache_dir):
    files = _files()
    edited = [(files[0][0], files[0][1] + b"\n# edited\n"), *files[1:]]
    assert ex._cache_path(files) != ex._cache_path(edited)


def test_identical_teams_share_one_plan_and_others_get_their_own(tmp_path):
    teams = yaml.safe_load(TEAMS_FILE.read_text())["teams"]
    vision = next(t for t in teams if t["name"] == "vision")
    other = {**vision, "name": "optics", "overrides": {**vision["overrides"], "training.instance_count": 8}}
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump({"teams": [vision, {**vision, "name": "imaging"}, other]}))
    a, b, c = load_teams(str(path))
    assert a.plan is b.plan
    assert c.plan is not a.plan and c.plan.training.instance_count == 8
    assert a.plan == plan(load("intermediate", {**vision["overrides"], "region": vision["region"],
                                                "availability_zone": vision["availability_zone"]}),
                          allowed_families=vision["allowed_instance_families"])


def test_a_constructs_acknowledgements_go_in_one_call(monkeypatch):
    from constructs_lib import nag

    calls = []

    class Recorder:
        def acknowledge(self, *acks):
            calls.append([(a.id, a.reason) for a in acks])

    monkeypatch.setattr(nag.Validations, "of", classmethod(lambda cls, scope: Recorder()))
    nag.acknowledge_wildcards(object(), actions=("s3:GetObject*", "s3:List*"), reason="why")
    nag._acknowledge_deploy_time(object(), reason="R.", network="it calls nothing")
    assert len(calls) == 2
    assert calls[0] == [("AwsSolutions-IAM5[Action::s3:GetObject*]", "why"), ("AwsSolutions-IAM5[Action::s3:List*]", "why")]
    assert [i for i, _ in calls[1]] == [f"{pack}-{rule}" for rule in ("LambdaConcurrency", "LambdaDLQ", "LambdaInsideVPC")
                                        for pack in nag.COMPLIANCE_PACKS]
    assert calls[1][-1][1] == "R. It calls nothing."


class _Cli:
    """Records the CDK CLI's runs (where and with what) in place of running it."""

    def __init__(self):
        self.runs: list[tuple[Path, tuple[str, ...]]] = []

    def __call__(self, cmd, *, cwd, **kwargs):
        self.runs.append((Path(cwd), tuple(cmd[1:])))


def test_the_emulators_bootstrap_finds_no_app_to_synthesize(monkeypatch, tmp_path):
    cli = _Cli()
    monkeypatch.setattr(emu_module.subprocess, "run", cli)
    emulator = Emulator(endpoint="http://localhost:1", region="us-east-2", cli_output=tmp_path)
    monkeypatch.setattr(Emulator, "account", lambda self: "123456789012")
    emulator.bootstrap(quiet=True)
    [(cwd, args)] = cli.runs
    assert args[:2] == ("bootstrap", "aws://123456789012/us-east-2")
    assert not (cwd / "cdk.json").exists() and cwd != ROOT  # the CLI synthesizes ./cdk.json's app when there is one


def test_the_second_deploy_uses_the_assembly_the_first_synthesized(monkeypatch, tmp_path):
    import workloads.commands.jobs as jobs
    import tools.placeholder_artifacts as placeholders

    cli = _Cli()
    monkeypatch.setattr(emu_module.subprocess, "run", cli)
    monkeypatch.setattr(jobs, "stack_outputs", lambda *a, **k: {"DatasetBucketName": "bucket"})
    monkeypatch.setattr(placeholders, "upload_placeholders", lambda *a, **k: [])
    monkeypatch.setattr(Emulator, "client", lambda self, service: None)
    emulator = Emulator(endpoint="http://localhost:1", region="us-east-2", cli_output=tmp_path)
    emulator.deploy_estate("-c", "workload=huge", plan=plan(load("huge")), quiet=True)
    (_, first), (_, second) = cli.runs
    assert "workload=huge" in first and "--app" not in first  # the first deploy synthesizes the app
    assert second[second.index("--app") + 1] == str(tmp_path) and "workload=huge" not in second
    assert "--all" in second
