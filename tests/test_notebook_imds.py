"""Issue 44: notebooks answer IMDSv2 only. A rule over every notebook the presets and the teams' estates deploy (the
HyperPod variant's is checked in tests/test_hyperpod.py; ML users' own notebooks are refused without it, in
tests/test_team_isolation.py)."""

from __future__ import annotations


def test_every_notebook_is_imdsv2_only(synth, teams_synth):
    templates = [t for preset in ("small", "intermediate", "huge") for t in synth(preset).templates.values()]
    templates += [t for by_id in teams_synth.templates.values() for t in by_id.values()]
    notebooks = [r["Properties"] for t in templates for r in t["Resources"].values()
                 if r["Type"] == "AWS::SageMaker::NotebookInstance"]
    assert notebooks
    for nb in notebooks:
        assert nb["InstanceMetadataServiceConfiguration"] == {"MinimumInstanceMetadataServiceVersion": "2"}
