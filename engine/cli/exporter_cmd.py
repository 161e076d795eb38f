"""`tui exporter`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("exporter", help="exporter")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return 0
