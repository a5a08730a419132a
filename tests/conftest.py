"""Shared fixtures: the real collections beside the checkout, and a CLI runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TWOSTAGE_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $TWOSTAGE_DATA); tests that need it skip with the reason when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real collections not found at {SHARED_DATA} (set TWOSTAGE_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def msmarco(shared_data: Path) -> Path:
    p = shared_data / "msmarco-passage"
    if not p.is_dir():
        pytest.skip(f"{p} missing")
    return p


@pytest.fixture()
def cli():
    """Invoke the twostage click group in-process; returns click's Result."""
    from toolkit.cli import main

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke
