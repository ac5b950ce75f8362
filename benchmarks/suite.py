"""The default test suite as CI runs it: `.ci/run` on a fresh clone of HEAD (a new venv, `pip install -e
".[test]"`, `pytest -n 2`), with an empty ``RTLGEN_CACHE_DIR``; its wall time, CPU time and counts become a
row of BENCHMARKS.md's "Test suite: `.ci/run` cold" table (earlier rows kept), with the slowest tests.

    python -m benchmarks.suite                  # ~20-30 min on 2 cores
    python -m benchmarks.suite --note "loaded"  # says what else ran

A row says whether the machine was quiet: the 1-minute load average before the run and the CPU the run used
against its wall time (2 cores fully used: CPU / wall = 2). Timing a suite on a busy machine says little.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from benchmarks.tables import section_rows, write_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "Test suite: `.ci/run` cold"
INTRO = """The README's test command on a fresh clone of the commit: `.ci/run` (a new venv, `pip install -e ".[test]"`,
`python -m pytest -n 2`; the default suite, `-m 'not slow'`), an empty `RTLGEN_CACHE_DIR` (every layer's
Verilog converted, every simulator built), Icarus installed, 2 cores. Yosys' WebAssembly cache
(`~/.cache/YoWASP`) is the machine's. "load before" is the 1-minute load average when the run started (a quiet
machine: below 1); "CPU" is the run's user + system time (all children), which is what `-n 2` shares across
the 2 cores: a run that is slow only because of other work shows wall far above CPU / 2. The target is the
project's budget (20 min on 2 cores) and issue 42's (15 min). Earlier rows (before this script) were timed by
hand the same way."""


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def run_ci(clone):
    """Run `.ci/run` in ``clone``; (wall seconds, CPU seconds, pytest's output)."""
    env = dict(os.environ, RTLGEN_CACHE_DIR=str(clone.parent / "cache"), PYTEST_ADDOPTS="--durations=0")
    env.pop("VIRTUAL_ENV", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, done.stdout + done.stderr


def summary(output):
    """(counts {passed, failed, skipped, ...}, pytest's own seconds, the slowest tests' lines)."""
    line = next((l for l in reversed(output.splitlines()) if re.search(r"\d+ (passed|failed)", l)), "")
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", line)}
    seconds = re.search(r"in ([\d.]+)s", line)
    slowest = re.findall(r"^\s*([\d.]+)s call\s+(\S+)", output, re.M)
    return counts, float(seconds.group(1)) if seconds else None, slowest


def minutes(seconds):
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--note", default="", help="what else ran on the machine (goes into the row)")
    args = parser.parse_args(argv)
    commit = _git("rev-parse", "--short", "HEAD")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rtlgen-suite-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        wall, cpu, code, output = run_ci(clone)
    (Path(tempfile.gettempdir()) / f"rtlgen-suite-{commit}.log").write_text(output)
    counts, pytest_seconds, slowest = summary(output)
    print(output[-3000:])
    row = {"date": date.today().isoformat(), "commit": commit,
           "tests": f"{sum(v for k, v in counts.items() if k in ('passed', 'failed', 'skipped')):,}",
           "passed": f"{counts.get('passed', 0):,}", "failed": str(counts.get("failed", 0)),
           "skipped": str(counts.get("skipped", 0)),
           "pytest wall": minutes(pytest_seconds) if pytest_seconds else "-",
           "`.ci/run` wall (incl. pip install)": minutes(wall), "CPU": f"{cpu:,.0f} s",
           "load before": f"{load:.1f}" + (f" ({args.note})" if args.note else ""),
           "exit": str(code), "target": "<= 20 min (issue 42: 15)"}
    rows = [{k: r.get(k, "-") for k in row} for r in section_rows(SECTION)] + [row]
    top = "; ".join(f"{name} ({float(s):.0f} s)" for s, name in slowest[:8])
    write_section(SECTION, INTRO + (f"\n\nThe slowest default tests of the last row's run: {top}." if top else ""),
                  rows, provenance=f"Rows from {rows[0]['date']} on; the last produced by "
                                   f"`python -m benchmarks.suite{' --note ' + repr(args.note) if args.note else ''}` "
                                   f"on {row['date']}.")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
