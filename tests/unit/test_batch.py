"""`tui batch`: tasks from a TOML list, each under its own timeout in the engine process; a failed
task is retried once; three failed tasks in a row stop the batch; a bad file runs nothing."""

import json
from types import SimpleNamespace

import pytest

from engine.batch import BatchTask, load_batch, run_batch
from engine.store import ResultStore
from engine.task import TaskSpec
from tui.cli.main import main

HEAD = """
[defaults]
backend = "sim"
iterations = 10
warmup = 2
peers = false
"""


def cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def batch_file(tmp_path, *tasks, head=HEAD):
    path = tmp_path / "batch.toml"
    path.write_text(head + "".join(f"\n[[task]]\n{t}\n" for t in tasks))
    return path


def fake_results(statuses):
    """A run_one that answers with the given statuses in turn, recording which task asked."""
    seen = []
    it = iter(statuses)

    def run_one(task):
        seen.append(task.index)
        status = next(it)
        return SimpleNamespace(ok=status == "ok", status=SimpleNamespace(value=status), run_id=len(seen),
                               timing=None, sol=None, error=None if status == "ok" else status, wall_s=0.1,
                               simulated=True)
    return run_one, seen


def tasks(n):
    return [BatchTask(index=i, name=f"t{i}", task=TaskSpec()) for i in range(1, n + 1)]


def test_a_failed_task_is_retried_once_and_a_success_resets_the_count():
    run_one, seen = fake_results(["timeout", "ok", "crashed", "crashed", "ok", "launch_error", "crashed"])
    out = run_batch(tasks(4), run_one)
    assert seen == [1, 1, 2, 2, 3, 4, 4]
    assert [o.status for o in out] == ["ok", "failed", "ok", "failed"]
    assert [len(o.attempts) for o in out] == [2, 2, 1, 2]


def test_three_failed_tasks_in_a_row_stop_the_batch():
    run_one, seen = fake_results(["ok"] + ["timeout"] * 6)
    out = run_batch(tasks(6), run_one)
    assert seen == [1, 2, 2, 3, 3, 4, 4]
    assert [o.status for o in out] == ["ok", "failed", "failed", "failed", "skipped", "skipped"]
    assert out[4].attempts == []


def test_sim_batch_runs_retries_times_out_and_stores(tmp_path, capsys):
    path = batch_file(tmp_path, 'name = "seed"\ntimeout_s = 60',
                      'kernel = "add_rmsnorm"\nfault = "compile_error"\ntimeout_s = 30',
                      'fault = "hang"\ntimeout_s = 1')
    code, out, err = cli(capsys, "batch", str(path), "--json")
    d = json.loads(out)
    assert code == 1 and d["status"] == "failed" and d["summary"] == {"ok": 1, "failed": 2, "skipped": 0}
    first, compile_fail, hang = d["tasks"]
    assert first["name"] == "seed" and first["status"] == "ok" and not first["retried"] and first["simulated"]
    assert [a["status"] for a in compile_fail["attempts"]] == ["compile_error", "compile_error"]
    assert [a["status"] for a in hang["attempts"]] == ["timeout", "timeout"] and hang["timeout_s"] == 1
    assert "timed out after 1 s" in hang["attempts"][0]["error"]
    assert "attempt 1: compile_error" in err and "retrying" in err
    assert len(ResultStore().list()) == 5  # every attempt is stored
    code, out, _ = cli(capsys, "batch", str(batch_file(tmp_path, "timeout_s = 60")))
    assert code == 0 and "1 ok, 0 failed, 0 skipped" in " ".join(out.split())


def test_sim_batch_stops_after_three_failures_in_a_row(tmp_path, capsys):
    bad = 'fault = "compile_error"\ntimeout_s = 30'
    code, out, _ = cli(capsys, "batch", str(batch_file(tmp_path, bad, bad, bad, "timeout_s = 30")), "--json")
    d = json.loads(out)
    assert code == 1 and d["status"] == "stopped" and d["stopped_after_failures"] == 3
    assert [t["status"] for t in d["tasks"]] == ["failed", "failed", "failed", "skipped"]
    code, out, _ = cli(capsys, "batch", str(batch_file(tmp_path, bad, bad, bad, "timeout_s = 30")))
    assert code == 1 and "stopped after 3 failed tasks in a row" in " ".join(out.split())


@pytest.mark.parametrize("tasks_toml, head, needle", [
    (['iterations = "many"'], HEAD, "task 1"),
    (["timeout_s = 60", "colour = 'red'"], HEAD, "task 2"),
    (["timeout_s = 60", "block_size = '12345'"], HEAD, "task 2"),
    (["timeout_s = -1"], HEAD, "timeout_s"),
    (["name = 3"], HEAD, "name=3"),
    ([], HEAD, "[[task]]"),
    (["timeout_s = 60"], "stray = 1\n", "stray"),
])
def test_a_bad_file_is_exit_2_naming_the_task_and_runs_nothing(tmp_path, capsys, tasks_toml, head, needle):
    code, out, err = cli(capsys, "batch", str(batch_file(tmp_path, *tasks_toml, head=head)), "--json")
    d = json.loads(out)
    assert code == 2 and d["status"] == "invalid" and needle in d["error"], d
    assert ResultStore().list() == []


def test_missing_file_is_exit_2(tmp_path, capsys):
    code, out, _ = cli(capsys, "batch", str(tmp_path / "nope.toml"), "--json")
    assert code == 2 and "no such file" in json.loads(out)["error"]


def test_defaults_apply_and_the_task_wins(tmp_path):
    path = batch_file(tmp_path, 'dtype = "fp16"\ntimeout_s = 7\nprofile = "h200"\nuntuned = true', "timeout_s = 9")
    a, b = load_batch(path, env={})
    assert a.task.dtype.value == "fp16" and a.task.timeout_s == 7 and a.profile == "h200" and a.untuned
    assert b.task.dtype.value == "bf16" and b.task.iterations == 10 and b.profile is None and not b.untuned
