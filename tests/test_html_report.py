"""OUT/report.html (issue 17 item 3): every number on the page equals the JSON it comes from; the
verification and Yosys sections appear once those have run; the page renders in headless Chromium."""

import json
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from rtlgen.cli import main
from rtlgen.html_report import record_verification
from rtlgen.verify import compare


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


@pytest.fixture
def out(digits_out_copy):
    return digits_out_copy


def test_compile_writes_the_page_with_the_reports_numbers(out):
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    values = keyed(page)
    assert check_numbers(values, {"report": report}) >= 3 * len(report["layers"])
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<svg" in page and "Verification" not in page and "Yosys synthesis" not in page
    slowest = max(report["layers"], key=lambda r: r["exp_cycles"])["name"]
    assert f'class="bottleneck"><td>{slowest}</td>' in page


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
    run = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,3000"]
    subprocess.run(run + [f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120)
    from PIL import Image
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert (pixels < 250).any(axis=2).mean() > 0.02          # not blank: text, tables and bars
    blue = ((pixels[..., 0] < 100) & (pixels[..., 2] > 150)).sum()
    assert blue > 1000                                      # the bar charts were drawn
    dom = subprocess.run(run + ["--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    documents = {"report": json.loads((out / "report.json").read_text()),
                 "yosys": json.loads((out / "build" / "yosys" / "report.json").read_text()),
                 "verify": json.loads((out / "verify.json").read_text())}
    values = keyed(dom)
    assert any(k.startswith("yosys.") for k in values) and values["verify.passed"] == "passed"
    assert check_numbers(values, documents) == len(values)
