"""Write a named table into BENCHMARKS.md, replacing the previous one of the same name.

BENCHMARKS.md groups its ``## `` sections under ``# `` headings (the question they answer) and lists them
in a table of contents; a section ends at the next heading of either level, so rewriting one keeps its
place and its group. A section not yet in the file is appended at the end: give it a place in a group and
in the contents (tests/test_docs_figures.py checks the contents).
"""

import re
import shlex
import sys
from datetime import date
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def markdown_table(rows):
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def command_line():
    """This run's command, as a reader would type it."""
    return "python -m benchmarks." + Path(sys.argv[0]).stem + "".join(" " + shlex.quote(a) for a in sys.argv[1:])


def write_section(name, intro, rows, provenance=None):
    """Replace section ``## name`` of BENCHMARKS.md (or append it) with ``rows`` and the command used
    (``provenance``: the whole "Produced by ..." sentence instead, for a section whose rows come from
    several runs)."""
    provenance = provenance or f"Produced by `{command_line()}` on {date.today().isoformat()}."
    body = (f"## {name}\n\n{intro}\n\n{provenance}\n\n"
            f"{markdown_table(rows)}\n")
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else "# rtlgen benchmarks\n\nTables written by the scripts in `benchmarks/`; rerun them to refresh.\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^#{{1,2}} |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    BENCHMARKS.write_text(text)


def section_provenance(name):
    """The "Produced by ..." sentence of section ``## name`` of BENCHMARKS.md, or None."""
    match = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^#{{1,2}} |\Z)", BENCHMARKS.read_text(), re.S | re.M) \
        if BENCHMARKS.exists() else None
    lines = [line for line in (match.group(1).splitlines() if match else []) if line.startswith("Produced by")]
    return lines[0] if lines else None


def section_rows(name):
    """The rows of the table in section ``## name`` of BENCHMARKS.md (dicts of strings), [] if none: lets
    a script re-measure some rows and keep the others."""
    if not BENCHMARKS.exists():
        return []
    match = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^#{{1,2}} |\Z)", BENCHMARKS.read_text(), re.S | re.M)
    lines = [line for line in (match.group(1).splitlines() if match else []) if line.startswith("|")]
    if len(lines) < 2:
        return []
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split(" | ")]
    keys = cells(lines[0])
    return [dict(zip(keys, cells(line))) for line in lines[2:]]
