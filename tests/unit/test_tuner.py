"""`tui tune` on the simulated device: the search space, pruning with reasons, the cache, crash and
hang recovery, cancellation, export and import, and the CLI. SIMULATED timings rank the model, so
these tests check the mechanism, never a GPU's numbers."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

from engine.errors import InputError
from engine.planner import plan
from engine.profiles import load_profiles
from engine.store import ResultStore
from engine.task import TaskSpec
from engine.tune_search import search_space
from engine.tune_types import Candidate, Trial, knob_label
from engine.tuner import tune
from engine.tuning_cache import TuningCache, tuned_lookup
from engine.tuning_key import shape_key


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0")


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "store.db")


H200 = load_profiles().get("h200")


def sim_task(**kw) -> TaskSpec:
    return TaskSpec(backend="sim", **kw)


def test_search_space_starts_with_the_default_and_prunes_with_reasons():
    base, cands, skipped = search_space(sim_task(shape={"m": 2000, "n": 4096, "k": 4096}), H200)
    assert (cands[0].block_size, cands[0].memory_pipelining) == (str(base.task.block_size), base.task.memory_pipelining)
    assert len({c.key for c in cands}) == len(cands)
    assert all(c.predicted_ms and c.predicted_ms > 0 for c in cands)
    rest = [c.predicted_ms for c in cands[1:]]
    assert rest == sorted(rest)  # the cost model orders the search
    assert all(t.status == "skipped" and t.reason for t in skipped)


def test_schedule_choices_are_searched_and_the_ones_that_do_not_fit_say_why(store):
    res = tune(sim_task(shape={"m": 2000, "n": 4096, "k": 4096}), "h200", budget_s=20, store=store)
    assert any(t.schedule for t in res.trials)  # the second phase ran
    assert res.skipped and all(t.status == "skipped" and t.reason for t in res.skipped)
    assert any("schedule." in t.reason for t in res.skipped)


def test_search_space_holds_the_tasks_own_knobs_fixed():
    _, cands, _ = search_space(sim_task(shape={"m": 2000, "n": 4096, "k": 4096}, block_size="128x256"), H200)
    assert {c.block_size for c in cands} == {"128x256"}
    _, cands, _ = search_space(sim_task(shape={"m": 8, "n": 4096, "k": 4096}, memory_pipelining=4), H200)
    assert {c.memory_pipelining for c in cands} == {4}


def test_a_task_that_cannot_run_is_refused_before_tuning():
    with pytest.raises(InputError, match="MEMORY_PIPELINING"):
        tune(sim_task(block_size="128x128", memory_pipelining=12), "h200", budget_s=5)


def test_tune_keeps_the_fastest_correct_and_plan_uses_it(store):
    task = sim_task(shape={"m": 8, "n": 4096, "k": 4096})
    res = tune(task, "h200", budget_s=20, store=store)
    assert res.status == "ok" and res.simulated and res.saved
    best = res.best
    assert best is not None and best.correct
    assert all(best.median_ms <= t.median_ms for t in res.trials if t.correct and t.iterations >= task.iterations)
    assert res.default is not None and res.default.default
    assert {"cublas_gemm_beta1", "cupy_matmul_add"} <= set(res.peers)
    assert len(store.trials(res.tune_id)) == len(res.trials)
    # the cache entry is found by the lookup the runner uses, and plan takes its knobs
    lookup = tuned_lookup(store, None, H200, simulated=True)
    p = plan(task, H200, lookup)
    assert str(p.task.block_size) == best.block_size and p.task.memory_pipelining == best.memory_pipelining
    assert p.source_label.startswith("tuned on this GPU") and f"{len(res.trials)} candidates" in p.source_label
    # a task that sets a knob the entry disagrees with is not overridden
    other = "8x32" if str(best.block_size) != "8x32" else "8x64"
    p2 = plan(task.model_copy(update={"block_size": other}), H200, lookup)
    assert str(p2.task.block_size) == other and p2.source_label != p.source_label
    # a changed kernel source (another hash) no longer matches
    row = store.list_tuned()[0]
    store.put_tuned({**row, "source_hash": "0" * 64})
    store._conn  # noqa: B018 - the store stays usable
    with store._conn() as conn:
        conn.execute("DELETE FROM tuned WHERE source_hash != ?", ("0" * 64,))
    assert not plan(task, H200, lookup).source_label.startswith("tuned on this GPU")


def test_a_real_gpu_never_sees_a_simulated_entry(store):
    task = sim_task(shape={"m": 8, "n": 4096, "k": 4096})
    tune(task, "h200", budget_s=10, store=store)
    gpu = tuned_lookup(store, "NVIDIA H200", H200, simulated=False)
    assert not plan(task, H200, gpu).source_label.startswith("tuned on this GPU")


def test_big_shapes_screen_then_confirm_the_fastest(store):
    task = sim_task(shape={"m": 8192, "n": 8192, "k": 8192})
    res = tune(task, "h200", budget_s=30, store=store)
    screened = [t for t in res.trials if t.iterations < task.iterations]
    confirmed = [t for t in res.trials if t.confirmed]
    assert screened and confirmed and len(confirmed) <= 3
    assert all(t.iterations == task.iterations for t in confirmed)
    assert res.best.iterations == task.iterations


def test_a_hanging_candidate_is_killed_and_the_tune_goes_on(store):
    task = sim_task(shape={"m": 8, "n": 4096, "k": 4096}, fault="hang")
    res = tune(task, "h200", budget_s=30, store=store, stall_s=3)
    hung = [t for t in res.trials if t.status == "timeout"]
    assert len(hung) == 1 and "killed" in hung[0].reason
    assert res.best is not None and res.status == "ok"
    assert len([t for t in res.trials if t.correct]) > 3  # a fresh engine process went on


def test_a_candidate_that_breaks_the_context_restarts_the_engine(store):
    task = sim_task(shape={"m": 8, "n": 4096, "k": 4096}, fault="illegal_address")
    res = tune(task, "h200", budget_s=30, store=store)
    bad = [t for t in res.trials if t.status == "launch_error"]
    assert len(bad) == 1 and "illegal memory access" in bad[0].reason
    assert res.best is not None and len(res.trials) > 3


def test_cancel_keeps_what_was_measured(store, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.2")
    cancel = threading.Event()
    seen: list[Trial] = []

    def on_event(ev):
        if getattr(ev, "kind", "") == "trial" and ev.state == "done" and ev.trial["status"] != "skipped":
            seen.append(Trial.from_dict(ev.trial))
            if len(seen) == 3:
                cancel.set()

    res = tune(sim_task(shape={"m": 8, "n": 4096, "k": 4096}), "h200", budget_s=60, store=store,
               on_event=on_event, cancel=cancel)
    assert res.status == "cancelled"
    assert len(res.trials) >= 3 and len(store.trials(res.tune_id)) == len(res.trials)


def test_export_and_import_share_the_cache(store, tmp_path):
    tune(sim_task(shape={"m": 8, "n": 4096, "k": 4096}), "h200", budget_s=10, store=store)
    out = tmp_path / "cache.toml"
    assert TuningCache(store).export(out) == 1
    other = ResultStore(tmp_path / "other.db")
    assert TuningCache(other).import_(out) == (1, 0)
    entry = other.list_tuned()[0]
    assert entry["origin"] and entry["shape"] == shape_key({"m": 8, "n": 4096, "k": 4096})
    # an entry of another kernel source is skipped, not imported to never match
    text = out.read_text().replace(entry["source_hash"], "f" * 64)
    stale = tmp_path / "stale.toml"
    stale.write_text(text)
    assert TuningCache(ResultStore(tmp_path / "third.db")).import_(stale) == (0, 1)
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\nentry = "x"\n')
    with pytest.raises(InputError, match="not a tuning export"):
        TuningCache(other).import_(bad)


def test_knob_labels_and_trial_round_trip():
    c = Candidate("128x128", 5, {"cluster": 2, "consumers": "pingpong"})
    assert c.key == knob_label("128x128", 5, {"consumers": "pingpong", "cluster": 2})
    assert c.key == "128x128/5 cluster=2,consumers=pingpong"
    t = Trial("128x128", 0, {}, "ok", median_ms=0.1, iterations=100)
    assert Trial.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    assert t.key == "128x128/off"


def test_cli_tune_json_and_shapes_file(tmp_path, capsys):
    from tui.cli.main import main

    shapes = tmp_path / "shapes.toml"
    shapes.write_text('[[shape]]\nname = "q"\nm = 8\nn = 4096\nk = 4096\n\n[[shape]]\nm = 1\nn = 2560\nk = 2560\n')
    code = main(["tune", "--backend", "sim", "--profile", "h200", "--shapes", str(shapes), "--budget", "5",
                 "--json", "--store", str(tmp_path / "s.db")])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "ok" and [s["name"] for s in out["shapes"]] == ["q", "shape 2"]
    assert all(s["best"] and s["simulated"] for s in out["shapes"])
    code = main(["tune", "--list", "--json", "--store", str(tmp_path / "s.db")])
    assert code == 0 and len(json.loads(capsys.readouterr().out)["entries"]) == 2


@pytest.mark.parametrize("text, why", [
    ('[[shape]]\nm = "x"\nn = 1\nk = 1\n', "must be integers"),
    ("shape = 3\n", "expected [[shape]] tables"),
    ('shapes = ["8,4096,abc"]\n', "shape 1"),
    ("[[shape]\n", "malformed TOML"),
])
def test_cli_refuses_bad_shapes_files(tmp_path, capsys, text, why):
    from tui.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    assert main(["tune", "--backend", "sim", "--shapes", str(bad), "--store", str(tmp_path / "s.db")]) == 2
    assert why in capsys.readouterr().err


def _entry(shape: str, block_size: str, stages: int, schedule: str = "") -> str:
    """One [[entry]] of a table of tuned defaults (bf16, fused gemm_residual)."""
    return (f'[[entry]]\nkernel = "gemm_residual"\ndtype = "bf16"\nshape = "{shape}"\nfusion = true\n'
            f'block_size = "{block_size}"\nmemory_pipelining = {stages}\n' + schedule)


@pytest.fixture
def tuned_table(tmp_path, monkeypatch):
    """Writes the h200 table of tuned defaults the planner reads (entries from ``_entry``) for one test."""
    import engine.tuned_defaults as td

    monkeypatch.setattr(td, "TABLE_DIR", tmp_path)
    monkeypatch.setattr(td.nearest, "__defaults__", (tmp_path,))

    def write(*entries: str) -> None:
        (tmp_path / "h200.toml").write_text("version = 1\n" + "".join(entries))
        td.table.cache_clear()

    yield write
    td.table.cache_clear()


def test_defaults_come_from_the_nearest_tuned_shape_where_one_is_near(tuned_table):
    """A profile's table of tuned defaults lends its knobs to shapes of the same class (decode or
    not, N and K within 2x) whose default builds the same code path; elsewhere, or where the knobs
    do not fit, the kernel's own rules."""
    tuned_table(_entry("k=4096,m=4096,n=4096", "128x256", 4),
                _entry("k=4096,m=1,n=4096", "8x16", 6, "[entry.schedule]\nsplit_k = 1\n"),
                _entry("k=5120,m=32,n=5120", "64x80", 12))
    near = plan(sim_task(shape={"m": 3000, "n": 3584, "k": 5000}), H200)
    assert (str(near.task.block_size), near.task.memory_pipelining) == ("128x256", 4)
    assert near.source_label == "tuned table h200 (nearest 4096x4096x4096)"
    decode = plan(sim_task(shape={"m": 4, "n": 5120, "k": 3000}), H200)
    assert str(decode.task.block_size) == "8x16" and decode.task.schedule == {"split_k": 1}
    far = plan(sim_task(shape={"m": 3000, "n": 10240, "k": 4096}), H200)  # N more than 2x away
    assert far.source_label == "rules for this profile"
    own = plan(sim_task(shape={"m": 3000, "n": 3584, "k": 5000}, block_size="128x128"), H200)
    assert str(own.task.block_size) == "128x128" and not own.default_from
    other_dtype = plan(sim_task(shape={"m": 3000, "n": 3584, "k": 5000}, dtype="fp16"), H200)
    assert other_dtype.source_label == "rules for this profile"
    # M = 8 runs the decode path on Hopper: the M = 32 shape's wgmma tile (another path) is not
    # lent, though it is the nearest decode-side shape
    other_path = plan(sim_task(shape={"m": 8, "n": 8192, "k": 8192}), H200)
    assert other_path.source_label == "rules for this profile" and other_path.schedule.get("w_bulk") == 2
    same_path = plan(sim_task(shape={"m": 48, "n": 4096, "k": 4096}), H200)
    assert str(same_path.task.block_size) in ("64x80", "48x64")  # the wgmma path: lent, or its decode tile


def test_the_decode_paths_bulk_copies_are_a_schedule_choice_the_tuner_tries(store):
    # through the one planner: bulk_k implies w_bulk, and the resolved schedule says so
    p = plan(sim_task(shape={"m": 8, "n": 8192, "k": 8192}, schedule={"bulk_k": 512}), H200)
    assert p.ok and p.schedule["w_bulk"] == 1 and p.schedule["bulk_k"] == 512
    assert p.info["loads"] == "bulk copies"
    # where bulk copies cannot build (K % 8 != 0): refused on the knob, with the fix
    p = plan(sim_task(shape={"m": 8, "n": 8192, "k": 8196}, schedule={"w_bulk": 1}), H200)
    assert not p.ok and p.violations[0].field == "schedule.w_bulk"
    # malformed values name the knob and what it takes
    for sched, field in (({"w_bulk": 3}, "schedule.w_bulk"), ({"bulk_k": 100}, "schedule.bulk_k"),
                         ({"w_bulk": 0, "bulk_k": 128}, "schedule.bulk_k")):
        p = plan(sim_task(shape={"m": 8, "n": 8192, "k": 8192}, schedule=sched), H200)
        assert not p.ok and p.violations[0].field == field, (sched, p.violations)
    # the tune's second phase tries it around the fastest (tile, stages) of the decode path (a
    # decode-path tile held fixed: the Hopper GEMM's decode tile may be faster at this shape)
    res = tune(sim_task(shape={"m": 8, "n": 8192, "k": 8192}, block_size="8x16"), "h200", budget_s=20, store=store)
    tried = [t for t in res.trials if t.schedule.get("w_bulk") == 1 or "bulk_k" in t.schedule]
    assert tried and all(t.phase == 2 for t in tried)


def test_a_tuned_tile_the_model_rates_clearly_slower_at_this_shape_is_not_lent(tuned_table, monkeypatch):
    """Nearest-shape lending ignores the rounds of tiles; the cost model does not: 128x160 tuned at
    M = 1024 (128 tiles, one round on 132 SMs) is not lent to M = 1337 (176 tiles), while the same
    entry still lends to a shape where the model rates it level with the kernel's own default."""
    import engine.planner as planner

    tuned_table(_entry("k=2560,m=1024,n=2560", "128x160", 6))
    far = plan(sim_task(shape={"m": 1337, "n": 2560, "k": 2560}), H200)
    assert far.source_label == "rules for this profile" and str(far.task.block_size) != "128x160"
    near = plan(sim_task(shape={"m": 1000, "n": 2560, "k": 2560}, memory_pipelining=None), H200)
    assert str(near.task.block_size) == "128x160" and near.default_from
    monkeypatch.setattr(planner, "LEND_MARGIN", 10.0)  # no veto: the nearest shape's knobs
    assert str(plan(sim_task(shape={"m": 1337, "n": 2560, "k": 2560}), H200).task.block_size) == "128x160"


def test_the_schedule_variations_get_their_share_when_the_first_screening_cannot_finish(store, monkeypatch):
    """A budget too short for every tile and depth: the first screening stops at its share, the
    variations around its fastest run, and the first screening's rest follows them."""
    monkeypatch.setenv("SOL_SIM_DELAY", "0.05")
    # The budget is wall time from the start, planning the candidates included: seconds, and more on
    # a loaded machine. Planned once here, so that the search's shares, not the load, decide.
    from engine import load_profiles
    from engine import tuner as tuner_module

    task = sim_task(shape={"m": 2000, "n": 4096, "k": 4096})
    planned = tuner_module.search_space(task, load_profiles().get("h200"))
    monkeypatch.setattr(tuner_module, "search_space", lambda t, p: planned)
    res = tune(task, "h200", budget_s=10, store=store)
    phases = [t.phase for t in res.trials if t.status != "skipped" and not t.confirmed]
    assert 2 in phases, "no schedule variation was timed"
    first_two = phases.index(2)
    assert 1 in phases[first_two:], "the first screening did not resume after the variations"
    assert len(res.trials) < res.total  # the budget, not the space, ended the search


def test_a_variation_that_wins_is_varied_again(monkeypatch):
    """Variations come in rounds: one among the fastest is varied again by the choices it leaves to
    the planner (a two-choice build), never by undoing its own choice. The tune's engine process
    body runs here, in-process, with the simulated trials rigged so that clusters of 2 win."""
    from engine import tune_worker
    from engine.job import JobRequest, TuneOptions

    plain = tune_worker._Search.trial

    def cluster_wins(self, cand, start, fault, iters):
        t, broken = plain(self, cand, start, fault, iters)
        return (replace(t, median_ms=t.median_ms * 0.5) if cand.schedule.get("cluster") == 2 else t), broken

    monkeypatch.setattr(tune_worker._Search, "trial", cluster_wins)
    task = sim_task(shape={"m": 6144, "n": 6144, "k": 6144})
    base_plan, cands, _ = search_space(task, H200)
    sent = []

    def send(ev):
        sent.append({"type": "event", "event": ev.model_dump(mode="json")})

    tune_worker.tune_body(JobRequest("tune", task, H200, "sim", base_plan.kernel, TuneOptions(
        regime="burst", budget_s=60.0, candidates=tuple(cands), default_key=cands[0].key)), send)
    events = [m["event"] for m in sent if m.get("type") == "event"]
    timed = [Trial.from_dict(e["trial"]) for e in events if e.get("state") == "done"]
    timed = [t for t in timed if t.status == "ok"]
    pairs = [t for t in timed if t.schedule.get("cluster") == 2 and len(t.schedule) == 2]
    assert pairs, "no variation of the winning variation was timed"
    assert all(t.phase == 2 for t in pairs)
    parents = {(t.block_size, t.memory_pipelining) for t in timed if t.schedule == {"cluster": 2}}
    assert {(t.block_size, t.memory_pipelining) for t in pairs} <= parents
    assert not [t for t in timed if t.schedule.get("cluster") == 1 and len(t.schedule) == 2]
    # across the rounds no build is timed twice under two names (multicast=w is cluster=2 here)
    builds = [(t.block_size, t.memory_pipelining,
               tuple(sorted(plan(task.model_copy(update={"block_size": t.block_size, "memory_pipelining": t.memory_pipelining,
                                                         "schedule": t.schedule}), H200).schedule.items())))
              for t in timed if not t.confirmed]
    assert len(builds) == len(set(builds))


def test_variations_keep_the_seeds_own_choices():
    from engine.tune_search import variations

    task = sim_task(shape={"m": 6144, "n": 6144, "k": 6144})
    seed = Trial("128x256", 4, {"cluster": 2}, "ok", median_ms=1.0)
    extra, pruned = variations(task, H200, [seed], set())
    both = [*extra, *pruned]
    assert extra and all(c.schedule.get("cluster") == 2 and len(c.schedule) == 2 for c in both)
    assert {next(k for k in c.schedule if k != "cluster") for c in both} == {"consumers", "multicast", "raster", "split"}


def test_a_schedule_lent_from_a_tuned_shape_is_varied_not_held_fixed():
    """The default at 6144^3 is lent from a tuned shape with raster=group: the default candidate
    carries it, the other candidates start from the kernel's own choices, and the variations try
    every raster order; a choice the user sets stays fixed."""
    from engine.tune_search import variations

    task = sim_task(shape={"m": 6144, "n": 6144, "k": 6144})
    base_plan, cands, _ = search_space(task, H200)
    assert base_plan.task.schedule.get("raster") == "group" and base_plan.default_from
    assert cands[0].schedule == {"raster": "group"}
    assert all(not c.schedule for c in cands[1:])
    seed = Trial(cands[1].block_size, cands[1].memory_pipelining, {}, "ok", median_ms=1.0)
    extra, _ = variations(task, H200, [seed], set())
    assert {c.schedule.get("raster") for c in extra} - {None}
    fixed = sim_task(shape={"m": 6144, "n": 6144, "k": 6144}, schedule={"raster": "n"})
    _, cands, _ = search_space(fixed, H200)
    assert cands[0].schedule == {}
    extra, _ = variations(fixed, H200, [seed], set())
    assert extra and all("raster" not in c.schedule for c in extra)


def test_the_progress_counts_each_step_and_ends_agreeing_with_the_total():
    """Defects 16 and 17: the count's denominator grew as the rounds added variations (48/140 ->
    168/187), and the pruned variations were counted in the total though never timed, so a search
    that ran out ended '41 of 62'. Each step now counts its own candidates, known when it starts."""
    from engine import tune_worker
    from engine.job import JobRequest, TuneOptions

    task = sim_task(shape={"m": 2000, "n": 4096, "k": 4096}, block_size="128x128")
    base_plan, cands, _ = search_space(task, H200)
    sent = []
    tune_worker.tune_body(JobRequest("tune", task, H200, "sim", base_plan.kernel, TuneOptions(
        regime="burst", budget_s=60.0, candidates=tuple(cands), default_key=cands[0].key)), sent.append)
    done = [e for e in sent if getattr(e, "kind", "") == "trial" and e.state == "done"]
    timed = [e for e in done if e.trial["status"] != "skipped"]
    pruned = [e for e in done if e.trial["status"] == "skipped"]
    assert pruned and all(e.step == "" for e in pruned)  # listed, outside every step's count
    steps: dict[str, list[tuple[int, int]]] = {}
    for e in timed:
        steps.setdefault(e.step, []).append((e.step_done, e.step_total))
    assert list(steps)[:2] == ["tiles/stages", "variations round 1"], list(steps)
    for name, counts in steps.items():
        assert len({total for _, total in counts}) == 1, (name, counts)  # the denominator holds
        assert [d for d, _ in counts] == list(range(1, len(counts) + 1)), (name, counts)
        assert counts[-1][0] == counts[-1][1], (name, counts)  # the search ran out: every step finished
    assert timed[-1].done == timed[-1].total == len(timed)  # the counter ends at the total
