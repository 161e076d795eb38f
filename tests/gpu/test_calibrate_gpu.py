"""Calibration on a real GPU (marker gpu): plausible ceilings, saved as a measured profile."""

import pytest

from engine.calibrate import measure, measured_profile
from engine.profiles import load_profiles

pytestmark = pytest.mark.gpu


def test_measure_ceilings_are_plausible():
    c = measure(0)
    assert 500 < c["copy_gbps"] < 10_000
    assert c["tflops"]["bf16"] > 5 * c["tflops"]["fp32"] > 0
    p = measured_profile(load_profiles().get("h200"), c)
    assert p.measured and p.memory_bandwidth_gbps == c["copy_gbps"]
