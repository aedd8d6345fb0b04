"""Refresh `tests/file_seconds.json`, the per-file times `./dev test` orders its files by, from a
full run's JUnit report:

    ./dev test --junitxml=/tmp/suite.xml
    .venv/bin/python -m tests.file_seconds /tmp/suite.xml

A test's time in the report covers its setup (the file's fixtures included) and its teardown.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TARGET = Path(__file__).with_name("file_seconds.json")


def file_of(case: ET.Element) -> str:
    # `classname` is the module's dotted path, with the class appended for tests in a class.
    parts = case.get("classname", "").split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py"


def per_file(report: Path) -> dict[str, int]:
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        totals[file_of(case)] += float(case.get("time", "0"))
    ordered = sorted(totals.items(), key=lambda kv: -kv[1])
    return {path: max(1, round(seconds)) for path, seconds in ordered}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.file_seconds JUNIT_XML")
    seconds = per_file(Path(sys.argv[1]))
    TARGET.write_text(json.dumps(seconds, indent=0) + "\n")
    print(f"{len(seconds)} files, {sum(seconds.values())} s in all -> {TARGET}")


if __name__ == "__main__":
    main()
