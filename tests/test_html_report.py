"""OUT/report.html (issue 17 item 3, issue 32 item 4): every number on the page equals the JSON it comes
from; bars against the board are to 100 % of the device with the optimizer's budget as a line; every layer
at the II is marked; one number format; the verification and Yosys (with timing) sections appear once those
have run; the page renders in headless Chromium at 1,400 px."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from rtlgen.cli import main
from rtlgen.report.html import record_verification
from rtlgen.check.verify import compare


class Keyed(HTMLParser):
    """{data-key: text} of a page."""

    def __init__(self):
        super().__init__()
        self.values, self._key = {}, None

    def handle_starttag(self, tag, attrs):
        self._key = dict(attrs).get("data-key", self._key if tag == "span" else None)

    def handle_data(self, data):
        if self._key is not None:
            self.values[self._key] = data.strip()
            self._key = None


def keyed(text):
    parser = Keyed()
    parser.feed(text)
    return parser.values


def lookup(document, key):
    """``layers.MVAU_0.exp_cycles``: dict keys, and layer names in lists of layers."""
    node = document
    for part in key.split("."):
        node = next(item for item in node if item["name"] == part) if isinstance(node, list) else node.get(part, 0)
    return node


def check_numbers(values, documents):
    """Every keyed number on the page equals its JSON value (as the page rounds it)."""
    checked = 0
    for key, text in values.items():
        source, _, path = key.partition(".") if key.split(".")[0] in documents else ("report", "", key)
        value = lookup(documents[source], path)
        if isinstance(value, bool):
            assert text in (("fits", "passed") if value else ("does not fit", "FAILED")), (key, text)
        else:
            assert float(text.replace(",", "")) == pytest.approx(float(value), abs=0.51), (key, text, value)
        checked += 1
    return checked


class Page(HTMLParser):
    """What the tests read besides the keyed numbers: the bars (``td[data-bar]``: the SVG's width and its
    value rect's and budget line's x), the names of the rows marked as bottlenecks, the visible text."""

    def __init__(self, text):
        super().__init__()
        self.bars, self.bottlenecks, self.text, self.titles = {}, set(), [], []
        self._bar = self._row = None
        self._in_name = self._skip = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("td", "th", "tr", "p", "div", "h1", "h2", "br"):
            self.text.append(" ")               # cells and blocks are apart on screen
        if tag in ("style", "title"):
            self._skip = True
        if tag == "tr":
            self._row = attrs.get("class") == "bottleneck"
        if tag == "td" and "data-bar" in attrs:
            self._bar = self.bars.setdefault(attrs["data-bar"], {})
        if tag == "td" and attrs.get("class") == "name" and "title" in attrs:
            self.titles.append(attrs["title"])
            if self._row:
                self.bottlenecks.add(attrs["title"])
        if self._bar is not None:
            if tag == "svg":
                self._bar["full"] = float(attrs["viewbox"].split()[2])
            elif tag == "rect" and attrs.get("class") == "value":
                self._bar["value"] = float(attrs["width"])
            elif tag == "line" and attrs.get("class") == "budget":
                self._bar["budget"] = float(attrs["x1"])

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip = False
        if tag == "td":
            self._bar = None

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def visible(page):
    """The page's text as a reader sees it (no CSS, no SVG titles), whitespace collapsed."""
    return re.sub(r"\s+", " ", "".join(Page(page).text))


def marked(page):
    return Page(page).bottlenecks


def edit_report(out, change):
    """Change OUT's report.json (``change(report)``) and render the page again; returns (page, report)."""
    from rtlgen.report.html import write_html
    report = json.loads((out / "report.json").read_text())
    change(report)
    (out / "report.json").write_text(json.dumps(report))
    return write_html(out).read_text(), report


@pytest.fixture
def out(digits_out_copy):
    return digits_out_copy


OPTIMIZER = {"budget": {"LUT": 42560.0, "FF": 85120.0, "BRAM36": 112.0, "DSP": None}, "held_for_fifos": {},
             "estimate": {"LUT": 374.0, "FF": 393.0, "BRAM36": 2.0, "DSP": 0.0}, "binding": "BRAM36", "ii": 640,
             "seconds": 0.71, "options": 104, "rounds": 1}


def test_board_bars_are_to_100_percent_of_the_device_with_the_budget_line(out):
    """3.9 % of the BRAM draws 3.9 % of the bar's width (not the full width as the largest value); the
    optimizer's budget (80 % of the board) is a line at 80 %; a resource without a budget has none."""
    def change(report):
        report["fit"]["resources"]["BRAM36"]["used"] = 5.46             # 3.9 % of 140
        report["optimizer"] = OPTIMIZER
    page, report = edit_report(out, change)
    bars = Page(page).bars
    for resource, v in report["fit"]["resources"].items():
        bar = bars[f"fit.{resource}"]
        assert bar["value"] / bar["full"] == pytest.approx(v["used"] / v["available"], abs=1e-3), resource
        limit = OPTIMIZER["budget"][resource]
        if limit is None:
            assert "budget" not in bar
        else:
            assert bar["budget"] / bar["full"] == pytest.approx(limit / v["available"], abs=1e-3)
    assert bars["fit.BRAM36"]["value"] / bars["fit.BRAM36"]["full"] == pytest.approx(0.039, abs=1e-3)
    text = visible(page)
    assert "binding resource BRAM36 (the closest to its budget: 1.79 % of it)" in text          # 2 of 112
    assert "budget LUT 42,560, FF 85,120, BRAM36 112:" in text
    assert check_numbers(keyed(page), {"report": report}) > 0
    assert keyed(page)["optimizer.ii"] == "640"


def test_an_io_bound_optimizer_choice_is_explained(out):
    """The optimizer took the cheapest folding at the zynq shell's bound: the page says so, with the II the
    budget allowed and the DMA's cycles per frame."""
    io_bound = dict(OPTIMIZER, ii=14, io_bound=True, budget_ii=4, io_cycles_per_frame=13.5)
    page, report = edit_report(out, lambda report: report.update(optimizer=io_bound))
    text = visible(page)
    assert "The cheapest folding at the DMA's bound within the budget" in text
    assert ("I/O-bound: the budget allows II 4, but the zynq shell's DMA needs 13.5 cycles per frame, so it took "
            "the cheapest folding at that bound instead.") in text
    assert check_numbers(keyed(page), {"report": report})
    page, _ = edit_report(out, lambda report: report.update(optimizer=dict(io_bound, io_bound=False)))
    assert "I/O-bound" not in visible(page) and "The fastest folding within the budget" in visible(page)


def test_a_target_rate_within_the_budget_is_the_cheapest_folding_not_the_fastest(out):
    page, _ = edit_report(out, lambda report: report.update(optimizer=dict(OPTIMIZER, target_fps=1000000)))
    assert "The cheapest folding that reaches <span" in page and "The fastest folding" not in page
    assert keyed(page)["optimizer.target_fps"] == "1,000,000"
    page, _ = edit_report(out, lambda report: report.update(optimizer=dict(OPTIMIZER, target_fps=None)))
    assert "The fastest folding" in page


def test_without_the_optimizer_the_page_says_so_and_draws_no_budget(out):
    page = (out / "report.html").read_text()
    assert "the folding optimizer (<code>--fit BOARD</code>, <code>--budget</code>) did not run" in page
    assert not any("budget" in bar for bar in Page(page).bars.values())


def test_every_layer_at_the_ii_is_a_bottleneck(out):
    """Two layers share the II: both are marked (red row and tag), and no other."""
    def change(report):
        mvaus = [r for r in report["layers"] if r["op_type"] == "MVAU"]
        for r in mvaus[:2]:
            r["exp_cycles"] = report["analytic_cycles_per_frame"]
        mvaus[2]["exp_cycles"] = report["analytic_cycles_per_frame"] - 1
    page, report = edit_report(out, change)
    ii = report["analytic_cycles_per_frame"]
    expected = {r["name"] for r in report["layers"] if r["exp_cycles"] == ii}
    assert len(expected) >= 2 and marked(page) == expected
    assert page.count("bottleneck</span>") == len(expected)


def test_per_layer_lut_ff_bram_dsp_and_long_names_in_title(out):
    long = "encoder_block_3_residual_attention_projection_matmul_" + "x" * 60
    def change(report):
        report["layers"][1]["name"] = long
    page, report = edit_report(out, change)
    values = keyed(page)
    for r in report["layers"]:
        for k in ("LUT", "FF", "BRAM18", "DSP"):
            assert values[f"layers.{r['name']}.resources.{k}"] == f"{r['resources'][k]:,}"
    assert long in Page(page).titles            # cut by CSS (ellipsis), the whole name on hover
    assert re.search(r"td\.name[^}]*text-overflow: ellipsis", page)


NUMBER_FORMAT_CASES = {"frames_per_second": 127551.0, "latency_ns": 1234.0, "board_frames_per_second": 2.34567}


def test_one_number_format(out):
    """Thousands separators on every integer, no trailing .0, frames/s as an integer (3 significant digits
    below 100), the II as "II 12,544" wherever it is written."""
    def change(report):
        report.update(NUMBER_FORMAT_CASES, analytic_cycles_per_frame=12544)
        report["layers"][1]["exp_cycles"] = 12544
        report["layers"][1]["resources"]["LUT"] = 1596.0
        report["optimizer"] = dict(OPTIMIZER, ii=12544)
    page, report = edit_report(out, change)
    text = visible(page)
    words = re.findall(r"(?<![\w./,-])\d(?:[\d,]*\d)?(?:\.\d+)?(?![\w])", text)
    assert words
    for word in words:
        assert re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d+)?", word), word              # 12,544 not 12544
        assert not re.fullmatch(r".*\.\d*0", word), word                          # 1,596 not 1,596.0
    values = keyed(page)
    assert values["frames_per_second"] == "127,551" and values["board_frames_per_second"] == "2.35"
    assert values["layers.MVAU_0.resources.LUT"] != "1,596.0"
    assert "II 12,544" in text and "12544" not in text
    assert check_numbers(values, {"report": report}) > 0


BOARD_KEYS = ("board_frames_per_second", "board_cycles_per_frame", "io_bound", "board_latency_cycles",
              "board_latency_ns", "shell")


def test_board_frames_per_second_and_latency_when_the_report_has_them(out):
    """The compile's report has the board's figures (behind the zynq shell): on the page with the same
    numbers, and what binds; a report of an older compile without them renders without them."""
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    values = keyed(page)
    assert values["board_frames_per_second"] == f"{round(report['board_frames_per_second']):,}"
    assert values["board_latency_cycles"] == f"{report['board_latency_cycles']:,}"
    assert check_numbers(values, {"report": report})
    text = visible(page)
    assert float(values["shell.cycles_per_frame"]) == pytest.approx(report["shell"]["cycles_per_frame"], abs=0.51)
    assert "cycles per frame): " + ("I/O-bound" if report["io_bound"] else "the accelerator binds") in text
    page, _ = edit_report(out, lambda report: report.update(board_frames_per_second=31234.5, io_bound=True))
    assert keyed(page)["board_frames_per_second"] == "31,234" and "cycles per frame): I/O-bound" in visible(page)

    def older(report):
        for key in BOARD_KEYS:
            report.pop(key, None)
    page, _ = edit_report(out, older)
    assert "board_" not in page and "on the board" not in page.replace("Against the board", "")


def test_compile_writes_the_page_with_the_reports_numbers(out):
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    values = keyed(page)
    assert check_numbers(values, {"report": report}) >= 3 * len(report["layers"])
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<svg" in page and "Verification" not in page and "Yosys synthesis" not in page
    assert marked(page) == {r["name"] for r in report["layers"] if r["exp_cycles"] == report["analytic_cycles_per_frame"]}


def test_verification_result_joins_the_page(out):
    reference = np.zeros((4, 10))
    ours = reference.copy()
    ours[1, 2] = 1
    path = record_verification(out, compare(ours, reference))
    values = keyed(path.read_text())
    assert values["verify.passed"] == "FAILED" and values["verify.bad_elements"] == "1"
    record = json.loads((out / "verify.json").read_text())
    assert check_numbers(values, {"report": json.loads((out / "report.json").read_text()), "verify": record})
    assert record["summary"].startswith("MISMATCH")


def test_verification_numbers_in_the_page_format(out):
    """The comparison's own message joins the page with thousands separators (4000 -> 4,000)."""
    reference = np.zeros((400, 10))
    text = visible(record_verification(out, compare(reference.copy(), reference)).read_text())
    assert "bit-exact: 400 samples, 4,000 output values equal qonnx" in text and "4000" not in text


@pytest.mark.slow
@pytest.mark.synth
def test_page_renders_in_headless_chromium_after_build_and_verify(out, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    assert main(["build", str(out)]) == 0
    x = np.random.default_rng(0).integers(0, 17, (8, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["verify", str(out), "--input", str(tmp_path / "x.npy")]) == 0
    page = out / "report.html"
    shot = tmp_path / "shot.png"
    run = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,2400"]
    subprocess.run(run + [f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120)
    from PIL import Image
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape[1] == 1400
    ink = (pixels < 250).any(axis=2)
    assert ink.mean() > 0.02                                # not blank: text, tables and bars
    blue = ((pixels[..., 0] < 100) & (pixels[..., 2] > 150)).sum()
    orange = ((pixels[..., 0] > 200) & (abs(pixels[..., 1].astype(int) - 138) < 20) & (pixels[..., 2] < 60)).sum()
    assert blue > 1000 and orange > 20                      # the estimate's and Yosys' bars were drawn
    assert ink[:, 1200:].any(axis=1).sum() > 100            # the tables use the window's width (was 1,100 px)
    dom = subprocess.run(run + ["--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    documents = {"report": json.loads((out / "report.json").read_text()),
                 "yosys": json.loads((out / "build" / "yosys" / "report.json").read_text()),
                 "verify": json.loads((out / "verify.json").read_text())}
    values = keyed(dom)
    assert any(k.startswith("yosys.") for k in values) and values["verify.passed"] == "passed"
    fmax = documents["yosys"]["timing"]["design"]["fmax_mhz_estimate"]
    assert values["yosys.timing.design.fmax_mhz_estimate"] == f"{round(fmax):,}"
    assert re.search(r"meets 100 MHz: slack \+[\d.]+ ns", visible(dom))
    assert check_numbers(values, documents) == len(values)
