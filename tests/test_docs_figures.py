"""The documents stay a front door that tells the truth (issue 44 item 5).

- README.md is at most 160 lines, its test command is the one `.ci/run` runs, and every relative link
  in it, in BENCHMARKS*.md and in docs/*.md resolves (the file, and the heading an ``#anchor`` names, by
  GitHub's slug rule).
- Every figure the README quotes is in BENCHMARKS.md: a row of the headline table that links a
  BENCHMARKS.md section has each of its numbers in that section; a figure elsewhere in the README (a
  number with a unit: frames/s, LUT, cycles, ns, %, x, ...) is somewhere in BENCHMARKS.md. Numbers compare
  by value ("21,701" = "21701", "123" = "123.0"); code blocks are not figures.
- Every figure docs/*.md quotes is in BENCHMARKS.md or BENCHMARKS-history.md.
- BENCHMARKS.md's contents list every section, and every entry names a section.
"""

import re
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
HISTORY = ROOT / "BENCHMARKS-history.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 160

# A number standing alone (not inside a name such as W4A4, ResNet-8, xc7z020 or 100-256-512-784's tail).
NUMBER = re.compile(r"(?<![\w.,/-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?=x\b|[^\w]|$)")
UNITS = r"x|%|frames/s|fps|LUTs?|FFs?|BRAM36|BRAM18|DSPs?|cycles|ns|µs|us|ms|s|min|MHz|Gbit/s|words"
FIGURE = re.compile(NUMBER.pattern + rf"(?=\s?(?:{UNITS})(?![\w/]))|(?<=\bII )(\d{{1,3}}(?:,\d{{3}})+|\d+)\b")
SECTION_LINK = re.compile(r"\]\(BENCHMARKS\.md#([\w-]+)\)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def value(text):
    return Decimal(text.replace(",", ""))


def numbers(text):
    return {value(m.group(1)) for m in NUMBER.finditer(text)}


def figures(text):
    return [m.group(1) or m.group(2) for m in FIGURE.finditer(text)]


def prose(text):
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text):
    return [m.group(2) for m in re.finditer(r"^(#{1,6}) (.+)$", prose(text), re.M)]


def sections(text):
    """{anchor: body} of every ``## `` section; a section ends at the next heading of level 1 or 2."""
    parts = re.split(r"^(?=#{1,2} )", text, flags=re.M)
    return {slug(p.split("\n", 1)[0][3:]): p for p in parts if p.startswith("## ")}


def misquoted(readme, benchmarks):
    """Each README figure not found where it should be, as a line saying so."""
    found = sections(benchmarks)
    everywhere = numbers(benchmarks)
    problems = []
    for line in prose(readme).splitlines():
        link = SECTION_LINK.search(line)
        if line.startswith("|") and link:
            anchor = link.group(1)
            if anchor not in found:
                problems.append(f"README links BENCHMARKS.md#{anchor}: no such section")
                continue
            quoted = [m.group(1) for m in NUMBER.finditer(SECTION_LINK.sub("", line))]
            problems += [f"{n!r} (row {line[:60]!r}...) is not in BENCHMARKS.md#{anchor}"
                         for n in quoted if value(n) not in numbers(found[anchor])]
        else:
            problems += [f"{n!r} (line {line[:60]!r}...) is not in BENCHMARKS.md"
                         for n in figures(line) if value(n) not in everywhere]
    return problems


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES} (move detail to docs/)"


def test_readme_test_command_is_what_ci_runs():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert len(ci) == 1 and f"```bash\n{ci[0]}\n```" in README.read_text()
    assert "```bash\npython3 -m venv .venv && . .venv/bin/activate && pip install -e . && rtlgen demo\n```" in README.read_text()


def test_every_readme_figure_is_in_benchmarks():
    readme = README.read_text()
    assert len(SECTION_LINK.findall(readme)) >= 5, "the README's headline table links its BENCHMARKS.md sections"
    assert misquoted(readme, BENCHMARKS.read_text()) == []


def test_every_docs_figure_is_in_benchmarks_or_its_history():
    measured = numbers(BENCHMARKS.read_text() + HISTORY.read_text())
    missing = [f"docs/{page.name}: {n!r} in {line.strip()[:70]!r}..."
               for page in sorted(DOCS.glob("*.md")) for line in prose(page.read_text()).splitlines()
               for n in figures(line) if value(n) not in measured]
    assert missing == [], "figures with no measurement behind them in BENCHMARKS.md / BENCHMARKS-history.md"


def test_a_changed_figure_is_caught():
    """The check fails when a quoted figure drifts from BENCHMARKS.md, in a headline row and in prose."""
    readme, benchmarks = README.read_text(), BENCHMARKS.read_text()
    everywhere = numbers(benchmarks)
    row = next(line for line in readme.splitlines() if line.startswith("|") and SECTION_LINK.search(line))
    quoted = figures(row)[0]
    wrong = value(quoted) + 1
    while wrong in everywhere:
        wrong += 1
    assert misquoted(readme.replace(row, row.replace(quoted, f"{wrong:,}", 1)), benchmarks)
    assert misquoted(readme + f"\nIt runs at {wrong:,} frames/s.\n", benchmarks)
    # a figure that is in BENCHMARKS.md, but not in the section the row links
    other = next(n for n in sorted(everywhere) if n > 1000 and n not in numbers(sections(benchmarks)[
        SECTION_LINK.search(row).group(1)]))
    assert misquoted(readme.replace(row, row.replace(quoted, f"{other:,}", 1)), benchmarks)


def _broken_links(path):
    text = prose(path.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue                                    # https://..., mailto:
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{path.name}: {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in {slug(h) for h in headings(resolved.read_text())}:
            broken.append(f"{path.name}: {target}: no heading with that anchor")
    return broken


def test_links_resolve():
    readme = README.read_text()
    linked = {t.partition("#")[0] for t in LINK.findall(readme) if t.startswith("docs/")}
    for page in ("cli.md", "folding.md", "verification.md", "models.md", "boards.md", "architecture.md"):
        assert f"docs/{page}" in linked, f"README.md links docs/{page}"
    pages = [README, BENCHMARKS, HISTORY, *sorted(DOCS.glob("*.md"))]
    assert [b for page in pages for b in _broken_links(page)] == []


def test_benchmarks_contents_list_every_section():
    text = BENCHMARKS.read_text()
    contents = text[:text.index("\n# ")]
    listed = re.findall(r"\]\(#([\w-]+)\)", contents)
    anchors = {slug(h) for h in headings(text)}
    assert [a for a in listed if a not in anchors] == [], "contents entries with no section"
    unlisted = [a for a in sections(text) if a not in listed]
    assert unlisted == [], ("sections missing from BENCHMARKS.md's contents (a script appended a new one? "
                            "move it into its group and list it)")
