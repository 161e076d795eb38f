"""The cockpit with a user kernel from the config dir: the Tune screen lists it, shows its knobs as
the #defines that run and its other knobs, and a run of it on the simulated device is labelled so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Select, Static

from tests.tui.conftest import wait_for_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"


@pytest.fixture(autouse=True)
def _forget_user_kernels():
    """User kernels registered by a test are forgotten after it, so other tests in the session see
    the built-in kernels only."""
    yield
    import kernels

    kernels._USER.clear()


def _text(app, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).content)


async def test_tune_screen_shows_a_user_kernels_knobs(make, tmp_path):
    folder = tmp_path / "config" / "kernels"
    folder.mkdir(parents=True)
    for f in ("scaled_matmul.toml", "scaled_matmul.cu"):
        shutil.copy(EXAMPLES / f, folder / f)
    app = make(start_mode="tune")
    async with app.run_test(size=(120, 40)) as pilot:
        select = app.screen.query_one("#f-kernel", Select)
        assert "scaled_matmul" in [str(v) for _, v in select._options]
        select.value = "scaled_matmul"
        await pilot.pause()
        task = app.task_spec
        assert task.kernel == "scaled_matmul" and task.kernel_file == str(folder / "scaled_matmul.toml")
        assert set(task.shape) == {"m", "n", "k"}  # the GEMM's shape fits its dimensions: kept
        pred = _text(app, "#tune-prediction")
        assert "BLOCK_SIZE fits: 16, 8, 32" in pred
        assert "#define TILE=16 DEPTH=2" in pred and "depth = 1 | 2 | 4" in pred
        app.switch_mode("run")
        await pilot.pause()
        await pilot.press("r")
        await wait_for_run(pilot, app)
        res = app.last_result
        assert res.ok and res.simulated and res.task.kernel == "scaled_matmul"
