"""Long commands show progress (issue 43): `submit --wait` a line per status change with the seconds so far, and its
exit status from how the job ended; `cost` a line per estate it asks about."""

from __future__ import annotations

from workloads.commands.cli import _parser
from workloads.commands.waiting import wait_for_job


class FakeSageMaker:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def describe_training_job(self, TrainingJobName):
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _job(status, secondary="", message="", reason=None):
    out = {"TrainingJobStatus": status, "SecondaryStatus": secondary,
           "SecondaryStatusTransitions": [{"Status": secondary, "StatusMessage": message}] if secondary else []}
    return {**out, **({"FailureReason": reason} if reason else {})}


def test_a_line_per_change_with_the_seconds_and_the_final_status():
    answers = [_job("InProgress", "Starting", "Launching requested ML instances"),
               _job("InProgress", "Starting", "Launching requested ML instances"),
               _job("InProgress", "Training", "Training image download completed"), _job("Completed", "Completed")]
    lines, now = [], iter(range(0, 1000, 30))
    status = wait_for_job(FakeSageMaker(answers), "job-1", say=lines.append, clock=lambda: next(now),
                          sleep=lambda s: None)
    assert status == "Completed" and len(lines) == 3, lines
    assert lines[0].startswith("[   30 s] job-1: InProgress / Starting: Launching requested ML instances"), lines
    assert "Training: Training image download completed" in lines[1] and "Completed" in lines[2]


def test_a_failed_job_says_why():
    lines = []
    assert wait_for_job(FakeSageMaker([_job("Failed", "Failed", reason="AlgorithmError: boom")]), "j",
                        say=lines.append, sleep=lambda s: None) == "Failed"
    assert lines[-1] == "  failure reason: AlgorithmError: boom"


def test_submit_takes_wait():
    assert _parser().parse_args(["submit", "small", "--wait"]).wait
