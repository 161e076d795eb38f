"""Built-in profiles load and validate; lookup, detection and user profiles behave."""

import pytest

from engine.errors import InputError
from engine.profiles import load_profiles, save_user_profile

REQUIRED = {"h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "a100-40gb", "l40s", "rtx-4090"}


def test_builtins_present_and_valid():
    ps = load_profiles(include_user=False)
    assert REQUIRED <= set(ps.names())
    for p in ps.profiles.values():
        assert p.source and p.nvml_name_patterns
        assert p.shared_memory_per_block_bytes <= p.shared_memory_per_sm_bytes
        assert p.peak_tflops.bf16 >= p.peak_tflops.fp32


def test_aliases():
    ps = load_profiles()
    assert ps.get("h100").name == "h100-sxm"
    assert ps.get("a100").name == "a100-sxm-80gb"
    assert ps.get("H200").name == "h200"


def test_rtx4090_half_rate_bf16_with_fp32_accumulate():
    p = load_profiles().get("rtx-4090")
    assert p.peak_tflops.bf16 == pytest.approx(165.2)
    assert "half rate" in p.notes


def test_unknown_profile_lists_known():
    with pytest.raises(InputError) as e:
        load_profiles().get("h900")
    assert "h100-sxm" in e.value.message and "a100" in e.value.message and e.value.exit_code == 2


@pytest.mark.parametrize("nvml_name,expected", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
])
def test_detect_from_nvml_name(nvml_name, expected):
    assert load_profiles().detect(nvml_name).name == expected


def test_detect_unknown_device():
    assert load_profiles().detect("NVIDIA GeForce GTX 1080") is None


def test_malformed_user_profile_is_reported_and_skipped(tmp_path):
    udir = tmp_path / "profiles"
    udir.mkdir()
    (udir / "broken.toml").write_text("name = 'x\n")
    (udir / "wrong.toml").write_text("name = 'wrong'\nsm_count = -1\n")
    ps = load_profiles(user_dir=udir)
    assert REQUIRED <= set(ps.names())
    assert len(ps.errors) == 2
    assert any("broken.toml" in e and "line 1" in e for e in ps.errors)
    assert any("sm_count" in e for e in ps.errors)


def test_user_profile_roundtrip(tmp_path):
    base = load_profiles().get("h200")
    mine = base.model_copy(update={"name": "h200-measured", "measured": True, "base_profile": "h200",
                                   "memory_bandwidth_gbps": 4137.0, "aliases": []})
    path = save_user_profile(mine, tmp_path)
    ps = load_profiles(user_dir=tmp_path)
    assert ps.get("h200-measured").memory_bandwidth_gbps == 4137.0
    assert ps.origins["h200-measured"] == path
    assert ps.detect("NVIDIA H200").name == "h200"   # measured profiles are never auto-detected


def test_sol_peak_for_fp32_counts_3xtf32():
    """fp32's SOL ceiling is the faster of FFMA and a third of the tf32 peak (3xTF32 gives
    fp32-class results on the tensor cores): Hopper and A100 take tf32 / 3, L40S keeps FFMA;
    every other dtype keeps its datasheet peak."""
    reg = load_profiles()
    h200, a100, l40s = reg.get("h200"), reg.get("a100-sxm-80gb"), reg.get("l40s")
    assert h200.sol_peak_flops("fp32") == pytest.approx(494.7e12 / 3)
    assert h200.sol_peak_flops("fp32") > h200.peak_flops("fp32")
    assert a100.sol_peak_flops("fp32") == pytest.approx(a100.peak_tflops.tf32 * 1e12 / 3)
    assert l40s.sol_peak_flops("fp32") == l40s.peak_flops("fp32") == pytest.approx(91.6e12)
    for dt in ("bf16", "fp16", "tf32"):
        assert h200.sol_peak_flops(dt) == h200.peak_flops(dt)
