"""The files the product writes for the user (task files, profiles, preferences, exports, reports) never
go through a link at the path or beside it; the files it reads (preferences, system files, the store's
header) are regular files read to a limit, so a FIFO or a device costs no time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.checks.context import RealFS
from engine.errors import InputError
from engine.profiles import load_profiles, save_user_profile
from engine.safe_files import read_bytes, read_head, write_atomic
from engine.task import TaskSpec, save_task
from tui.preferences import Preferences, PreferencesFile

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim"
    path.write_text("precious")
    return path


def test_write_atomic_refuses_a_link_and_never_writes_through_one_beside_it(tmp_path, victim):
    link = tmp_path / "out.toml"
    link.symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        write_atomic(link, "x")
    for name in ("out2.toml.tmp", ".out2.toml.tmp"):
        (tmp_path / name).symlink_to(victim)
    write_atomic(tmp_path / "out2.toml", "new")
    assert victim.read_text() == "precious" and (tmp_path / "out2.toml").read_text() == "new"
    with pytest.raises(InputError, match="--export=.*cannot write"):
        write_atomic(tmp_path / "missing" / "x.toml", "x", what="--export")
    write_atomic(tmp_path / ("n" * 255), "a 255-byte name and its temporary file fit")


def test_task_files_and_profiles_are_not_written_through_links(tmp_path, victim):
    link = tmp_path / "task.toml"
    link.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        save_task(TaskSpec(), link)
    save_task(TaskSpec(), tmp_path / "other.toml")
    assert "kernel" in (tmp_path / "other.toml").read_text()
    prof = load_profiles().get("h100-sxm").model_copy(update={"name": "mine"})
    (tmp_path / "mine.toml").symlink_to(victim)
    with pytest.raises(InputError, match="profile=.*symbolic link"):
        save_user_profile(prof, tmp_path)
    assert victim.read_text() == "precious"


def test_preferences_read_a_regular_file_only_and_write_no_link(tmp_path, victim):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    loaded = PreferencesFile.load(fifo)
    assert time.monotonic() - t0 < 1.0 and loaded.problem and "FIFO" in loaded.problem
    assert PreferencesFile.load(tmp_path / "missing.toml").problem is None
    link = tmp_path / "prefs.toml"
    link.symlink_to(victim)
    prefs = PreferencesFile.load(link)
    assert prefs.problem and "TOML" in prefs.problem  # 'precious' is not TOML: left as it is
    ok = PreferencesFile(tmp_path / "link2.toml")
    (tmp_path / "link2.toml").symlink_to(victim)
    assert "symbolic link" in (ok.save(Preferences(theme="x")) or "")
    assert victim.read_text() == "precious"


def test_system_files_and_headers_are_read_to_a_limit():
    fs = RealFS()
    assert fs.read_text("/proc/self/mem") is None
    assert "MemTotal" in (fs.read_text("/proc/meminfo") or "MemTotal")
    assert fs.read_text("/dev/zero") is None
    with pytest.raises(InputError, match="character device"):
        read_head("/dev/zero", "results store", 100)
    with pytest.raises(InputError, match="more than"):
        read_bytes(__file__, "file", 10)
