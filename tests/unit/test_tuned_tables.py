"""A table of tuned defaults is one GPU model's: the profile in use picks its own (a calibrated one its
base's), and another model's table or entries are never lent; without a table of its own a profile
gets the kernel's rules. The H100 SXM, PCIe and NVL are told apart by NVML's name and facts."""

import pytest

import engine.tuned_defaults as td
from engine.checks.arch import device_facts
from engine.checks.fakes import FakeDevice
from engine.planner import plan
from engine.profiles import load_profiles
from engine.task import TaskSpec
from engine.tuned_knobs import RULES_LABEL, tuned_here

PROFILES = load_profiles(include_user=False)
SHAPES = [(1, 4096, 4096), (16, 8192, 8192), (48, 4096, 4096), (1337, 2560, 2560), (2048, 4096, 11008),
          (4096, 4096, 4096), (8192, 2560, 2560), (3000, 3584, 5000)]


def _task(m, n, k, dtype="bf16"):
    return TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, backend="sim")


def _tables():
    return {p.stem for p in td.TABLE_DIR.glob("*.toml")}


@pytest.mark.parametrize("name", sorted(PROFILES.names()))
def test_each_profile_takes_only_its_own_models_table(name):
    prof = PROFILES.get(name)
    own = f"tuned table {name} "
    for m, n, k in SHAPES:
        p = plan(_task(m, n, k), prof)
        if not p.ok:
            continue
        label = p.source_label
        assert label == RULES_LABEL or label.startswith(own), (name, (m, n, k), label)
        if name not in _tables():
            assert label == RULES_LABEL, (name, (m, n, k), label)


def test_the_h200_table_lends_on_the_h200_and_never_on_an_h100():
    assert "h200" in _tables()
    h200, sxm, pcie = PROFILES.get("h200"), PROFILES.get("h100-sxm"), PROFILES.get("h100-pcie")
    lent = [plan(_task(*s), h200).source_label for s in SHAPES]
    assert any(label.startswith("tuned table h200") for label in lent)
    for prof in (sxm, pcie):
        assert not any("h200" in plan(_task(*s), prof).source_label for s in SHAPES)


def test_a_calibrated_profile_uses_its_base_models_table():
    from engine.calibrate import measured_profile

    ceilings = {"tflops": {"fp32": 60, "tf32": 400, "bf16": 700, "fp16": 700}, "copy_gbps": 4100}
    measured = measured_profile(PROFILES.get("h200"), ceilings, host="test")
    assert td.table_name(measured) == "h200"
    assert plan(_task(4096, 4096, 4096), measured).source_label.startswith("tuned table h200")


@pytest.fixture
def table_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(td, "TABLE_DIR", tmp_path)
    monkeypatch.setattr(td.nearest, "__defaults__", (tmp_path,))
    td.table.cache_clear()
    yield tmp_path
    td.table.cache_clear()


def test_another_models_table_copied_under_this_profiles_name_is_refused(table_dir):
    """The H200's table saved as h100-sxm.toml: its entries say GPU 'NVIDIA H200', which the H100
    SXM's name patterns do not match, so none is lent; a table whose header names another profile is
    refused whole; the same entries measured on an H100 SXM are lent."""
    src = (td.BUILTIN_DIR / "tuned" / "h200.toml").read_text()
    sxm = PROFILES.get("h100-sxm")
    (table_dir / "h100-sxm.toml").write_text(src.replace('profile = "h200"', 'profile = "h100-sxm"'))
    assert td.table("h100-sxm", table_dir)
    assert all(plan(_task(*s), sxm).source_label == RULES_LABEL for s in SHAPES)
    td.table.cache_clear()
    (table_dir / "h100-sxm.toml").write_text(src)  # header still says h200
    assert td.table("h100-sxm", table_dir) == ()
    td.table.cache_clear()
    (table_dir / "h100-sxm.toml").write_text(src.replace('profile = "h200"', 'profile = "h100-sxm"')
                                              .replace('gpu = "NVIDIA H200"', 'gpu = "NVIDIA H100 80GB HBM3"'))
    labels = [plan(_task(*s), sxm).source_label for s in SHAPES]
    assert any(label.startswith("tuned table h100-sxm (nearest ") for label in labels)
    # the PCIe board (114 SMs) never takes the SXM's entries, even when asked for by the SXM's table name
    pcie = PROFILES.get("h100-pcie").model_copy(update={"name": "h100-sxm"})
    assert all(plan(_task(*s), pcie).source_label == RULES_LABEL for s in SHAPES)


def test_knobs_from_names_the_source():
    assert tuned_here("tuned on this GPU (2026-01-01, 12 candidates)")
    assert tuned_here("tuned 2025-05-14, 3 candidates")  # results stored before the label named the GPU
    assert not tuned_here("tuned table h100-sxm (nearest 4096x4096x4096)")
    assert not tuned_here(RULES_LABEL) and not tuned_here("task") and not tuned_here(None)


GIB_80 = 81559 / 1024  # what NVML reports for an 80 GB H100
H100_BOARDS = [
    # (NVML name, SMs, memory GiB, enforced power limit W, profile)
    ("NVIDIA H100 80GB HBM3", 132, GIB_80, 700.0, "h100-sxm"),
    ("NVIDIA H100 PCIe", 114, GIB_80, 350.0, "h100-pcie"),
    ("NVIDIA H100 NVL", 132, 95830 / 1024, 400.0, "h100-nvl"),
    # a name that says only "H100": the facts tell the boards apart
    ("NVIDIA H100", 132, GIB_80, 700.0, "h100-sxm"),
    ("NVIDIA H100", 114, GIB_80, 350.0, "h100-pcie"),
    ("NVIDIA H100", None, 95830 / 1024, 400.0, "h100-nvl"),
    ("NVIDIA H100", None, GIB_80, 300.0, "h100-pcie"),  # an SXM is not capped at 300 W by default
    # the SXM with its power limit lowered by an administrator is still the SXM
    ("NVIDIA H100 80GB HBM3", 132, GIB_80, 500.0, "h100-sxm"),
    ("NVIDIA H200", 132, 143771 / 1024, 700.0, "h200"),
]


@pytest.mark.parametrize("name,sms,gib,watts,expected", H100_BOARDS)
def test_h100_boards_are_told_apart_by_name_sms_memory_and_power(name, sms, gib, watts, expected):
    dev = FakeDevice(0, name=name, sm_count=sms, memory_total_mib=gib * 1024, power_limit_w=watts)
    assert PROFILES.detect(dev.name, **device_facts(dev)).name == expected


def test_a_name_that_fits_several_boards_without_facts_is_not_guessed():
    assert PROFILES.detect("NVIDIA H100") is None
    assert PROFILES.detect("NVIDIA H100 80GB HBM3").name == "h100-sxm"
    assert PROFILES.detect("NVIDIA H100 PCIe").name == "h100-pcie"
    assert PROFILES.detect("NVIDIA H100 NVL").name == "h100-nvl"


def test_facts_that_contradict_every_matching_profile_detect_none():
    # a 94 GB H200-named board is no H200 SXM (141 GB): not guessed
    assert PROFILES.detect("NVIDIA H200", memory_gib=94.0) is None


def test_a_tuned_shapes_own_knobs_are_its_default_where_the_model_rates_them_slower(table_dir):
    """The cost model vetoes lending only for a loss beyond the one it predicted where the knobs were
    measured: at the tuned shape itself the measurement stands (the H100's seed: the model rates
    128x128/5 with cluster 1 and group order 1.17x the rules' knobs, measured 0.90x)."""
    sxm = PROFILES.get("h100-sxm")
    (table_dir / "h100-sxm.toml").write_text(
        'version = 1\nprofile = "h100-sxm"\n[[entry]]\nkernel = "gemm_residual"\ndtype = "bf16"\n'
        'shape = "k=2560,m=8192,n=2560"\nfusion = true\ngpu = "NVIDIA H100 80GB HBM3"\nsm_count = 132\n'
        'block_size = "128x128"\nmemory_pipelining = 5\n[entry.schedule]\nraster = "group"\ncluster = 1\n')
    seed = plan(_task(8192, 2560, 2560), sxm)
    assert seed.source_label == "tuned table h100-sxm (nearest 8192x2560x2560)"
    assert seed.task.schedule == {"raster": "group", "cluster": 1}
