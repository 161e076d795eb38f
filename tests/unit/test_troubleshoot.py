"""The matcher: telemetry windows, failed checks, run errors, and a broken rules file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.checks import CheckResult
from engine.errors import InputError
from engine.troubleshoot import load_rules, match_check, match_telemetry, match_text


def window(n: int = 10, **fields: float) -> list[dict]:
    return [dict(index=0, t=float(i), **fields) for i in range(n)]


def ids(matches: list) -> list[str]:
    return [m.id for m in matches]


def test_bandwidth_bound_window() -> None:
    m = match_telemetry(window(tensor_activity_pct=12, sm_activity_pct=30, dram_bw_util_pct=88, gpu_util_pct=99))
    assert ids(m)[0] == "bandwidth-bound"
    assert "dram_bw_util_pct" in m[0].evidence and m[0].knob["fusion"] is True


def test_tensor_cores_starved_window() -> None:
    m = match_telemetry(window(tensor_activity_pct=10, sm_activity_pct=90, dram_bw_util_pct=35, gpu_util_pct=99))
    assert ids(m) == ["tensor-cores-starved"]
    assert m[0].knob == {"memory_pipelining": 3}


def test_thermal_and_power_windows() -> None:
    hot = window(throttle_mask=0x40, temperature_c=88, temperature_slowdown_c=87, gpu_util_pct=99)
    assert "thermal-slowdown" in ids(match_telemetry(hot))
    capped = window(throttle_mask=0x4, power_w=699, power_limit_w=700, gpu_util_pct=99)
    assert ids(match_telemetry(capped)) == ["power-cap"]


def test_condition_must_hold_over_most_of_the_window() -> None:
    samples = window(7, tensor_activity_pct=50, dram_bw_util_pct=50) + window(3, tensor_activity_pct=5, dram_bw_util_pct=95)
    assert "bandwidth-bound" not in ids(match_telemetry(samples))


def test_too_few_or_incomplete_samples_never_match() -> None:
    assert match_telemetry(window(2, tensor_activity_pct=5, dram_bw_util_pct=95)) == []
    assert match_telemetry(window(10, gpu_util_pct=None, tensor_activity_pct=None)) == []
    assert match_telemetry([]) == []


def test_idle_healthy_gpu_matches_nothing_and_low_utilisation_counts_only_during_a_run() -> None:
    busy = window(gpu_util_pct=98, tensor_activity_pct=70, sm_activity_pct=90, dram_bw_util_pct=40, throttle_mask=0)
    assert match_telemetry(busy) == []
    idle = window(gpu_util_pct=20)
    assert match_telemetry(idle) == []                      # an idle GPU is not a slow kernel
    assert ids(match_telemetry(busy, run_samples=idle)) == ["performance-below-expectation"]


def test_match_check_uses_the_check_id_first() -> None:
    res = CheckResult(id="host.memory", title="t", status="warn", detail="1.0 GiB available, swap 0.0 GiB", fix="x")
    assert ids(match_check(res))[0] == "compile-out-of-memory"
    assert match_check(res.model_copy(update={"status": "pass"})) == []


def test_match_text_best_first_and_to_dict() -> None:
    text = ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open "
            "shared object file: no such file or directory: unknown")
    m = match_text(text)
    assert ids(m)[:3] == ["docker-gpus-without-toolkit", "nvml-library-not-found", "missing-shared-object"]
    d = m[0].to_dict()
    assert set(d) >= {"id", "title", "cause", "fix", "knob", "command", "evidence", "score"}
    assert match_text("") == [] and match_text("all good") == []


def test_runner_attaches_rules_to_a_failed_run() -> None:
    from engine.runner import match_rules

    found = match_rules("CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    assert found[0]["id"] == "cuda-illegal-address" and found[0]["sticky"] is True


@pytest.mark.parametrize(("body", "needle"), [
    ('[[rule]]\nid = "x"\ntitle = "t"\ncause = "c"\nfix = "f"\npatterns = ["(unclosed"]\n', "not a valid regular expression"),
    ('[[rule]]\nid = "x"\ntitle = "t"\ncause = "c"\nfix = "f"\n', "needs patterns"),
    ('[[rule]]\nid = "x"\ntitle = "t"\ncause = "c"\nfix = "f"\npatterns = ["a"]\n' * 2, "duplicate"),
    ('[[rule]]\nid = "x"\ntitle = "t"\ncause = "c"\nfix = "f"\npatterns = ["a"]\ncolour = 1\n', "colour"),
])
def test_broken_rules_file_names_rule_and_field(tmp_path: Path, body: str, needle: str) -> None:
    p = tmp_path / "rules.toml"
    p.write_text(body)
    with pytest.raises(InputError) as exc:
        load_rules(p)
    assert needle in exc.value.message
