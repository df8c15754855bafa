#!/usr/bin/env python3
"""Which tests of a build still have to run after the sanitizer suite.

    ctest_rest.py BUILD [JUNIT ...]

BUILD is a configured and built ctest tree (build/); each JUNIT is a `ctest --output-junit` file of
the ASan + UBSan suite (build-asan/). A test counts as done when a JUNIT lists it by name with status
"run" or "fail" (it executed; a failure already fails the suite). Tests skipped there (status
"notrun": a GTEST_SKIP under ASan, a missing input), absent there (label `slow`, `fuzz`, tests that
the sanitizer build does not have) or in no JUNIT at all are printed as a `ctest -I` spec
("0,0,0,i,j,...", 1-based indices of BUILD's test list); nothing is printed when none is left.
Counts go to standard error.
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build, junits = argv[1], argv[2:]
    done = set()
    for path in junits:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"ctest_rest: {path}: {e}; its tests count as not run", file=sys.stderr)
            continue
        for case in root.iter("testcase"):
            if case.get("status") in ("run", "fail"):
                done.add(case.get("name"))
    listing = subprocess.run(["ctest", "--test-dir", build, "-N", "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    names = [t["name"] for t in json.loads(listing)["tests"]]
    rest = [i + 1 for i, name in enumerate(names) if name not in done]
    print(f"ctest_rest: {len(names)} tests in {build}, {len(names) - len(rest)} ran under the "
          f"sanitizers, {len(rest)} left", file=sys.stderr)
    if rest:
        print("0,0,0," + ",".join(map(str, rest)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
