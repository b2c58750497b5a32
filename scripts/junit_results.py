"""Test results from a JUnit XML file, pytest's (--junitxml) or gtest's (--gtest_output=xml):
the one reader of make torch-matrix (scripts/torch_matrix.py) and make gpu-check
(scripts/gpu_check.py)."""

import os
import xml.etree.ElementTree as ET


def test_results(path):
    """{"passed", "failed", "skipped": counts, "skip_reasons": {why: count}, "failures": names};
    all zero where the file is missing (the tests did not run)."""
    results = {"passed": 0, "failed": 0, "skipped": 0, "skip_reasons": {}, "failures": []}
    if not os.path.exists(path):
        return results
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name')}".lstrip(".")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            results["failed"] += 1
            results["failures"].append(name)
        elif skipped is not None or case.get("result") == "skipped":
            results["skipped"] += 1
            why = (skipped.get("message") if skipped is not None else None) or "skipped"
            why = why.strip().splitlines()[-1]  # gtest's message starts with file:line
            results["skip_reasons"][why] = results["skip_reasons"].get(why, 0) + 1
        else:
            results["passed"] += 1
    return results
