"""Check titles name what a check looks at, never the outcome hoped for (issue 47, defect 21): beside
WARN or FAIL a title like "running as an unprivileged user" reads as a finding, and a false one."""

from __future__ import annotations

import re

from engine.checks import CHECKS

CLAIMS = re.compile(r"^(no|running)\b|\b(not|sane|agree|agrees|match|matches|fits|fit|covers|lets|resolve|loaded|"
                    r"writable|present|below|at full|compiles)\b|\bon$", re.IGNORECASE)


def test_no_title_claims_an_outcome():
    for c in CHECKS:
        stated = re.sub(r"\([^)]*\?\)", "", c.title)  # a question in brackets asks, it does not claim
        assert not CLAIMS.search(stated), (c.id, c.title)
