"""The local judge server (tests/support/judge_server.py), one per test."""

from __future__ import annotations

import pytest
from judge_server import JudgeServer


@pytest.fixture
def judge_server():
    s = JudgeServer()
    yield s
    s.close()
