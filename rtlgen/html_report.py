"""``OUT/report.html``: one self-contained page (inline CSS and SVG, no scripts, no network) of what is
known about a compiled accelerator: cycles per layer with the bottleneck highlighted, the resource
estimate per layer and against the board, and, once they have run, Yosys beside the estimate (``rtlgen
build``) and the verification result (``rtlgen verify OUT``).

It is rewritten from the files in OUT (``report.json``, ``build/yosys/report.json``, ``verify.json``)
after each of those commands, so it never shows numbers that the JSON files do not hold. Every number
that comes from a file is also in a ``data-key`` attribute (e.g. ``layers.MVAU_0.exp_cycles``) so a
test can read the rendered page and compare it with the JSON.
"""

import html
import json
from pathlib import Path

__all__ = ["write_html", "record_verification", "HTML_NAME", "VERIFY_NAME"]

HTML_NAME = "report.html"
VERIFY_NAME = "verify.json"
RESOURCES = ("LUT", "FF", "BRAM18", "DSP")
_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { padding: 2px 10px; text-align: right; }
th { background: #eee; } td:first-child, th:first-child { text-align: left; }
tr.bottleneck td { font-weight: bold; color: #b00; }
.pass { color: #070; font-weight: bold; } .fail { color: #b00; font-weight: bold; }
.note { color: #666; font-size: 0.9em; } svg text { font: 12px system-ui, sans-serif; }
"""


def write_html(out):
    """Write ``out/report.html`` from the JSON files in ``out``; returns its path."""
    out = Path(out)
    report = json.loads((out / "report.json").read_text())
    synth = _load(out / "build" / "yosys" / "report.json")
    verify = _load(out / VERIFY_NAME)
    parts = [_header(report), _cycles(report), _resources(report)]
    if synth is not None and synth.get("estimate", report["totals"]) != report["totals"]:
        # a recompile keeps OUT/build (it may hold a bitstream), but its numbers are an earlier design's
        parts.append('<p class="note">OUT/build holds the Yosys report of an earlier compile: run '
                     '<code>rtlgen build</code> again for this design\'s.</p>')
    elif synth is not None:
        parts.append(_yosys(report, synth))
    if verify is not None:
        parts.append(_verification(verify))
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rtlgen: "
            f"{_e(Path(report['model']).name)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
    path = out / HTML_NAME
    path.write_text(page)
    return path


def record_verification(out, comparison):
    """Keep ``comparison`` (:class:`rtlgen.verify.Comparison`) as ``out/verify.json`` and rewrite the page."""
    ties = comparison.ties.tie_count if comparison.at_ties else 0
    record = {"passed": comparison.passed, "exact": comparison.exact, "samples": comparison.samples,
              "elements": comparison.elements, "bad_elements": comparison.bad_elements,
              "bad_samples": comparison.bad_samples, "rounding_ties": ties, "summary": comparison.summary()}
    (Path(out) / VERIFY_NAME).write_text(json.dumps(record, indent=2) + "\n")
    from rtlgen.outdir import claim
    claim(out, [VERIFY_NAME])           # the design's: removed with it by the next compile
    return write_html(out)


def _load(path):
    return json.loads(path.read_text()) if path.exists() else None


def _e(value):
    return html.escape(str(value))


def _num(key, value, fmt="{:,}"):
    return f'<span data-key="{_e(key)}">{_e(fmt.format(value))}</span>'


def _header(report):
    fit = report.get("fit", {})
    verdict = ("" if not fit else f'<span class="{"pass" if fit["fits"] else "fail"}" data-key="fit.fits">'
               f'{"fits" if fit["fits"] else "does not fit"}</span> the {_e(fit["board"])} ({_e(fit["device"])}) '
               f'by the estimate')
    return (f"<h1>rtlgen: {_e(Path(report['model']).name)}</h1>"
            f"<p>II {_num('analytic_cycles_per_frame', report['analytic_cycles_per_frame'])} cycles per frame: "
            f"{_num('frames_per_second', report.get('frames_per_second', 0), '{:,.1f}')} frames/s at "
            f"{_num('clock_mhz', report.get('clock_mhz', 0), '{:g}')} MHz; "
            f"{len(report['layers'])} nodes; {verdict}.</p>"
            f"<p class=\"note\">model {_e(report['model'])}; host ops before: {_e(', '.join(report['host_ops']['pre']) or '-')}, "
            f"after: {_e(', '.join(report['host_ops']['post']) or '-')}</p>")


def _bars(rows, *, highlight=None, unit="", width=640):
    """A horizontal bar chart (inline SVG) of ``rows`` [(label, value) or (label, value, colour)]."""
    if not rows:
        return ""
    top = max(row[1] for row in rows) or 1
    height = 18
    label_width = 170
    items = []
    for k, (label, value, *colour) in enumerate(rows):
        y = k * (height + 4)
        length = max(1.0, (width - label_width - 140) * value / top) if value else 0
        color = "#c33" if label == highlight else colour[0] if colour else "#4a7ab5"
        items.append(f'<text x="0" y="{y + 13}">{_e(label)}</text>'
                     f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{height}" fill="{color}"/>'
                     f'<text x="{label_width + length + 6:.1f}" y="{y + 13}">{_e(f"{value:,}")}{_e(unit)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{len(rows) * (height + 4)}" '
            f'role="img">' + "".join(items) + "</svg>")


def _cycles(report):
    layers = [r for r in report["layers"] if r["exp_cycles"]]
    ii = report["analytic_cycles_per_frame"]
    slowest = next((r["name"] for r in layers if r["exp_cycles"] == ii), None)
    rows = "".join(f'<tr class="{"bottleneck" if r["name"] == slowest else ""}"><td>{_e(r["name"])}</td>'
                   f'<td>{_e(r["op_type"])}</td><td>{_e(_folding(r["folding"]))}</td>'
                   f'<td>{_num("layers." + r["name"] + ".exp_cycles", r["exp_cycles"])}</td></tr>'
                   for r in layers)
    return ("<h2>Cycles per frame</h2><p class=\"note\">The slowest layer (red) sets the II; FIFOs and data-width "
            "converters never limit the rate.</p>"
            + _bars([(r["name"], r["exp_cycles"]) for r in layers], highlight=slowest)
            + f"<table><tr><th>layer</th><th>op</th><th>folding</th><th>cycles/frame</th></tr>{rows}</table>")


def _folding(folding):
    return " ".join(f"{k}={v}" for k, v in folding.items()) or "-"


def _resources(report):
    layers = report["layers"]
    head = "".join(f"<th>{k}</th>" for k in RESOURCES)
    rows = "".join(f'<tr><td>{_e(r["name"])}</td>'
                   + "".join(f'<td>{_num("layers." + r["name"] + ".resources." + k, r["resources"].get(k, 0))}</td>'
                             for k in RESOURCES) + "</tr>" for r in layers)
    totals = report["totals"]
    rows += ("<tr><th>total</th>" + "".join(f'<th>{_num("totals." + k, totals.get(k, 0))}</th>' for k in RESOURCES)
             + "</tr>")
    board = ""
    fit = report.get("fit")
    if fit:
        usage = [(k, v["used"], v["available"]) for k, v in fit["resources"].items()]
        board = ("<p>Against the board (estimate, % of the device):</p>"
                 + _bars([(k, round(100 * used / available, 1)) for k, used, available in usage], unit=" %")
                 + "<table><tr><th>resource</th><th>used</th><th>available</th></tr>"
                 + "".join(f'<tr><td>{k}</td><td>{_num("fit.resources." + k + ".used", used, "{:,.1f}")}</td>'
                           f'<td>{available:,}</td></tr>' for k, used, available in usage) + "</table>")
    return ("<h2>Resources (estimate)</h2>" + _bars([(r["name"], r["resources"].get("LUT", 0)) for r in layers],
                                                    unit=" LUT")
            + f"<table><tr><th>layer</th>{head}</tr>{rows}</table>" + board)


def _yosys(report, synth):
    pairs = (("LUT", "lut"), ("FF", "ff"), ("BRAM18", None), ("DSP", "dsp"))     # (estimate, Yosys) keys
    head = "".join(f"<th>{k} Yosys</th><th>{k} est.</th>" for k, _ in pairs)
    rows = ""
    for name, row in synth["layers"].items():
        cells = ""
        for est_key, key in pairs:
            built = (f'{row["bram18"] + 2 * row["bram36"]:,}' if key is None else     # BRAM18-equivalent
                     _num(f"yosys.layers.{name}.{key}", row[key]))
            cells += (f'<td>{built}</td>'
                      f'<td>{row.get("estimate", {}).get(est_key, 0):,}</td>')
        rows += f"<tr><td>{_e(name)}</td>{cells}</tr>"
    t = synth["totals"]
    timing = synth.get("timing") or {}
    design = timing.get("design")
    clock = ""
    if design:
        clock = (f"<p>Timing (estimate): longest path {_num('yosys.timing.design.levels', design['levels'])} logic levels "
                 f"({_e(design['through'])}), ~{design['path_ns_estimate']:.1f} ns, Fmax ~"
                 f"{_num('yosys.timing.design.fmax_mhz_estimate', design['fmax_mhz_estimate'], '{:.0f}')} MHz; requested "
                 f"{_e(timing.get('requested_mhz'))} MHz.</p><p class=\"note\">{_e(timing['model'])}</p>")
    return ("<h2>Yosys synthesis beside the estimate</h2>"
            + "<p class=\"note\">LUT per layer: Yosys (blue), the estimate (grey).</p>"
            + _bars([row for n, r in synth["layers"].items()
                     for row in ((n, r["lut"]), ("", r.get("estimate", {}).get("LUT", 0), "#aaa"))], unit=" LUT")
            + f"<table><tr><th>layer</th>{head}</tr>{rows}</table>"
            + f"<p>Whole design in the {_e(synth['top'])} shell: LUT {_num('yosys.totals.lut', t['lut'])}, "
              f"FF {_num('yosys.totals.ff', t['ff'])}, BRAM36 {t['bram36']}, BRAM18 {t['bram18']}, DSP {t['dsp']} "
              f"(Yosys {synth['yosys_seconds']} s).</p>" + clock)


def _verification(verify):
    ok = verify["passed"]
    bars = _bars([("equal", verify["elements"] - verify["bad_elements"]), ("differ from qonnx", verify["bad_elements"])])
    return (f"<h2>Verification</h2><p class=\"{'pass' if ok else 'fail'}\" data-key=\"verify.passed\">"
            f"{'passed' if ok else 'FAILED'}</p><p>{_e(verify['summary'])}</p>"
            f"<p>{_num('verify.samples', verify['samples'])} samples, "
            f"{_num('verify.bad_elements', verify['bad_elements'])} of {_num('verify.elements', verify['elements'])} "
            f"output values differ from qonnx.</p>" + bars)
