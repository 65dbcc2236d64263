"""Issue 44: the trainer's background checkpoint writer (examples/slurm/train.py Checkpointer). Future.set_result
wakes result()'s waiters before it runs the done-callbacks, so a wait() that relied on result() returned while the
previous write's callback was still publishing `latest`: the final save then raced it (a latest.tmp FileNotFoundError
under load). wait() must return only once the publish itself has finished."""

from __future__ import annotations

import importlib.util
import threading
from concurrent.futures import Future
from pathlib import Path

TRAIN = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"


def _train():
    spec = importlib.util.spec_from_file_location("train_for_checkpointer", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wait_returns_only_after_the_write_is_published(tmp_path, monkeypatch):
    train = _train()
    future: Future = Future()
    monkeypatch.setattr(train.dcp, "async_save", lambda *a, **kw: future)
    writer = object.__new__(train.Checkpointer)
    writer.directory, writer.pruner, writer.keep, writer.pending, writer.group = tmp_path, True, 2, None, object()
    gate, publishing, published = threading.Event(), threading.Event(), []

    def slow_publish(path, step, loss, keep):  # the callback's publish, held until the test lets it go
        publishing.set()
        gate.wait(30)
        published.append(path.name)
    monkeypatch.setattr(train, "published", slow_publish)
    state = type("State", (), {"step": 7})()
    writer.save(state)
    completer = threading.Thread(target=future.set_result, args=(None,))  # the writer thread finishing the write
    completer.start()
    assert publishing.wait(30)  # result() is now answered; the callback is inside publish
    waiter = threading.Thread(target=writer.wait)
    waiter.start()
    waiter.join(0.5)
    still_waiting = waiter.is_alive()
    gate.set()
    waiter.join(30), completer.join(30)
    assert still_waiting, "wait() returned while the previous checkpoint was still being published"
    assert published == ["step-00000007"] and writer.pending is None


def test_a_failed_write_raises_at_wait_and_publishes_nothing(tmp_path, monkeypatch):
    train = _train()
    future: Future = Future()
    monkeypatch.setattr(train.dcp, "async_save", lambda *a, **kw: future)
    writer = object.__new__(train.Checkpointer)
    writer.directory, writer.pruner, writer.keep, writer.pending, writer.group = tmp_path, True, 2, None, object()
    monkeypatch.setattr(train, "published", lambda *a: (_ for _ in ()).throw(AssertionError("published")))
    writer.save(type("State", (), {"step": 3})())
    future.set_exception(OSError("disk full"))
    try:
        writer.wait()
    except OSError as error:
        assert "disk full" in str(error)
    else:
        raise AssertionError("a failed write did not raise")
