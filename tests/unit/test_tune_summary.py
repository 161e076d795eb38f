"""bench.tune_summary --classes: shapes grouped by their name's class, each class's geometric mean,
then the mean over the classes (the tuning issue's acceptance figure)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import tune_summary


def test_classes_are_the_names_without_their_last_word(tmp_path: Path) -> None:
    f = tmp_path / "shapes.toml"
    f.write_text('[[shape]]\nname = "decode 2x5120"\nm = 2\nn = 5120\nk = 5120\n\n'
                 '[[shape]]\nname = "long K 2048x5120x13824"\nm = 2048\nn = 5120\nk = 13824\n\n'
                 '[[shape]]\nname = "square"\nm = 4096\nn = 4096\nk = 4096\n')
    assert tune_summary.classes(f) == {"2x5120x5120": "decode", "2048x5120x13824": "long K",
                                       "4096x4096x4096": "square"}


def test_each_class_weighs_once_in_the_mean_over_classes() -> None:
    rows = [{"name": "a", "tuned_vs_b1": 0.9}, {"name": "b", "tuned_vs_b1": 1.1}, {"name": "c", "tuned_vs_b1": 1.2},
            {"name": "d", "tuned_vs_b1": None}, {"name": "e", "tuned_vs_b1": 2.0}]
    per, over = tune_summary.class_means(rows, {"a": "x", "b": "x", "c": "y", "d": "y"})
    assert math.isclose(per["x"], math.sqrt(0.9 * 1.1)) and math.isclose(per["y"], 1.2)
    assert math.isclose(over, math.sqrt(per["x"] * per["y"]))  # "e" has no class: not counted


@pytest.mark.parametrize("content", [None, "[[shape]]\nm = 2\n", "shape = [[["])
def test_an_unreadable_classes_file_exits_2_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             content: str | None) -> None:
    f = tmp_path / "shapes.toml"
    if content is not None:
        f.write_text(content)
    assert tune_summary.main([str(tmp_path / "none.jsonl"), "--classes", str(f)]) == 2
    assert "--classes" in capsys.readouterr().err
