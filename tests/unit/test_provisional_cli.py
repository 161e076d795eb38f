"""`--json` carries whether a profile is provisional (datasheet figures, never measured by this
product on that GPU): `tui profiles`, `tui check` and `tui bench`, each beside the keys it had."""

from __future__ import annotations

import json

import pytest

from tui.cli.main import main

SIM = ["--backend", "sim", "--iterations", "10", "--warmup", "2", "--no-store"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_profiles_json_and_table_say_which_are_provisional(capsys):
    code, out, _ = run_cli(capsys, "profiles", "--json")
    flags = {p["name"]: p["provisional"] for p in json.loads(out)["profiles"]}
    assert code == 0 and flags["b200"] is True and flags["l4"] is True and flags["h200"] is False
    code, out, _ = run_cli(capsys, "profiles", "rtx-5090", "--json")
    assert code == 0 and json.loads(out)["provisional"] is True
    code, out, _ = run_cli(capsys, "profiles")
    assert code == 0 and "provisional: datasheet, not measured" in out


@pytest.mark.parametrize("profile,provisional", [("b200", True), ("h200", False)])
def test_check_json_names_the_profile_and_whether_it_is_provisional(capsys, profile, provisional):
    code, out, _ = run_cli(capsys, "check", "--json", "--only", "gpu", "--profile", profile)
    d = json.loads(out)
    assert d["profile"] == {"name": profile, "provisional": provisional}
    assert {"checks", "summary", "ok"} <= set(d)


@pytest.mark.parametrize("profile,provisional", [("l4", True), ("h100-sxm", False)])
def test_bench_json_says_whether_its_profile_is_provisional(capsys, profile, provisional):
    code, out, _ = run_cli(capsys, "bench", *SIM, "--profile", profile, "--json")
    d = json.loads(out)
    assert code == 0 and d["profile"] == profile and d["profile_provisional"] is provisional
