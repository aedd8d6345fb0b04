"""The per-file times `./dev test` orders its files by, summed from a JUnit report."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import file_seconds
from tests.file_seconds import per_file

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_cli" name="test_a" time="40.2" />
<testcase classname="tests.e2e.test_cli" name="test_b" time="9.9" />
<testcase classname="tests.unit.test_queue.TestModes" name="test_c" time="0.004" />
<testcase classname="tests.test_replay" name="test_d[off]" time="70.6" />
</testsuite></testsuites>
"""


def test_times_are_summed_per_file_longest_first(tmp_path: Path) -> None:
    report = tmp_path / "suite.xml"
    report.write_text(REPORT)
    got = per_file(report)
    # A test in a class counts for its module; a file under a second still weighs one.
    assert got == {
        "tests/test_replay.py": 71,
        "tests/e2e/test_cli.py": 50,
        "tests/unit/test_queue.py": 1,
    }
    assert list(got) == [
        "tests/test_replay.py",
        "tests/e2e/test_cli.py",
        "tests/unit/test_queue.py",
    ]


def test_an_unmeasured_end_to_end_file_goes_before_unit_files() -> None:
    assert file_seconds("tests/e2e/test_not_measured_yet.py") > file_seconds(
        "tests/unit/test_not_measured_yet.py"
    )
    assert file_seconds("tests/e2e/test_transport_faults.py") > 100
