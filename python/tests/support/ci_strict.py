"""In CI a skipped test is a failed one: a missing broker, browser or JDK must not pass as green.

conftest.py imports the hook below. Outside CI (`CI` unset or not `true`) skips stay skips, so a
developer without a broker can still run the rest; `-m` deselection is not a skip and is unaffected.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator:
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, which counts as a failure: {reason}"
