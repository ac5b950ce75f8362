"""``OUT/report.html``: one self-contained page (inline CSS and SVG, no scripts, no network) of what is
known about a compiled accelerator: the II, frames/s and latency; the folding optimizer's budget, the
resource that bound it and the II it chose; the estimate against the board (bars to 100 % of the device,
the budget drawn as a line); cycles per layer with every layer at the II marked as a bottleneck; LUT, FF,
BRAM and DSP per layer; and, once they have run, Yosys beside the estimate with the timing figure
(``rtlgen build``) and the verification result (``rtlgen verify OUT``).

It is rewritten from the files in OUT (``report.json``, ``build/yosys/report.json``, ``verify.json``)
after each of those commands, so it never shows numbers that the JSON files do not hold. Every number
that comes from a file is also in a ``data-key`` attribute (e.g. ``layers.MVAU_0.exp_cycles``) so a
test can read the rendered page and compare it with the JSON. Numbers have one format (:func:`fmt`).

Bars are inline SVG 1,000 units wide stretched over their table cell: a bar of fraction f of its scale
is a ``rect`` ``1000 * f`` wide, whatever the window; labels and numbers live in table cells beside
them, so long layer names are cut with an ellipsis (the whole name in the ``title``) instead of
running over the bars.
"""

import html
import math
import re
from pathlib import Path

from rtlgen.fit import BRAM18_PER_BRAM36
from sim.outdir import OutDir

__all__ = ["write_html", "record_verification", "fmt", "BAR_UNITS"]

RESOURCES = ("LUT", "FF", "BRAM18", "DSP")
BAR_UNITS = 1000                    # an SVG bar's full width (its scale's 100 %)
ESTIMATE, YOSYS, BOTTLENECK, BUDGET = "#4a7ab5", "#e08a1e", "#c33", "#222"
_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2.5em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; width: 100%; }
td, th { padding: 2px 8px; text-align: right; white-space: nowrap; vertical-align: middle; }
th { background: #eee; font-weight: 600; }
td.name, th.name { text-align: left; max-width: 22em; overflow: hidden; text-overflow: ellipsis; }
td.text, th.text { text-align: left; }
td.wrap { text-align: left; white-space: normal; min-width: 16em; max-width: 30em; font-size: 0.9em; }
td.bar { width: 35%; min-width: 8em; } td.minibar { width: 9%; min-width: 3em; }
svg.bar { display: block; width: 100%; }
tr.bottleneck td { color: #b00; font-weight: bold; }
tr.total td, tr.total th { border-top: 1px solid #999; font-weight: bold; }
.tag { font-size: 0.8em; padding: 0 0.4em; border-radius: 3px; background: #b00; color: #fff; }
.pass { color: #070; font-weight: bold; } .fail { color: #b00; font-weight: bold; }
.note { color: #666; font-size: 0.9em; }
.warnings { border-left: 4px solid #c80; background: #fff8e6; padding: 0.4em 1em; margin: 1em 0; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 0.4em 1em; min-width: 10em; max-width: 17em; }
.card .big { font-size: 1.5em; font-weight: 600; } .card .what { color: #666; font-size: 0.85em; }
.key { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: middle; margin: 0 0.3em 0 0.8em; }
.key.line { width: 2px; background: #222; }
"""


def fmt(value):
    """The page's one number format: whole numbers and anything of 100 or more as an integer with
    thousands separators (``12,544``, never ``1,596.0``), smaller fractions to 3 significant digits
    (``7.97``, ``0.5``)."""
    value = float(value)
    if not math.isfinite(value):
        return "unlimited" if value > 0 else str(value)
    if value == int(value) or abs(value) >= 100:
        return f"{round(value):,}"
    return f"{value:.3g}"


def write_html(out):
    """Write ``out/report.html`` from the JSON files in ``out``; returns its path."""
    out = OutDir(out)
    report = out.read_json(out.report)
    synth = _load(out, out.yosys_report)
    verify = _load(out, out.verify)
    stale = synth is not None and synth.get("estimate", report["totals"]) != report["totals"]
    # a recompile keeps OUT/build (it may hold a bitstream), but its numbers are an earlier design's
    current = None if stale else synth
    parts = [_header(report, current, verify), _warnings(report), _optimizer(report), _board(report, current), _cycles(report),
             _resources(report)]
    if stale:
        parts.append('<p class="note">OUT/build holds the Yosys report of an earlier compile: run '
                     '<code>rtlgen build</code> again for this design\'s.</p>')
    elif synth is not None:
        parts.append(_yosys(synth))
    if verify is not None:
        parts.append(_verification(verify))
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
            f"content=\"width=device-width\"><title>rtlgen: {_e(Path(report['model']).name)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(p for p in parts if p) + "\n</body></html>\n")
    out.write_text(out.report_html, page)
    out.rehash([out.report_html])           # rewritten by rtlgen (verify, build): not an edit of the design
    return out.report_html


def record_verification(out, comparison):
    """Keep ``comparison`` (:class:`rtlgen.check.verify.Comparison`) as ``out/verify.json`` and rewrite the page."""
    ties = comparison.ties.tie_count if comparison.at_ties else 0
    record = {"passed": comparison.passed, "exact": comparison.exact, "samples": comparison.samples,
              "elements": comparison.elements, "bad_elements": comparison.bad_elements,
              "bad_samples": comparison.bad_samples, "rounding_ties": ties, "summary": comparison.summary()}
    out = OutDir(out)
    out.write_json(out.verify, record)
    out.claim([out.verify])                 # the design's: removed with it by the next compile
    return write_html(out)


def _load(out, path):
    return out.read_json(path) if path.exists() else None


def _e(value):
    return html.escape(str(value))


def _num(key, value):
    return f'<span data-key="{_e(key)}">{fmt(value)}</span>'


def _name(name):
    """A layer-name cell: cut with an ellipsis when long, the whole name on hover."""
    return f'<td class="name" title="{_e(name)}">{_e(name)}</td>'


def _bar(fraction, colour=ESTIMATE, *, line=None, label="", height=16):
    """A bar of ``fraction`` (of its scale, 0..1) as an SVG that spans its cell; ``line``: a fraction at
    which to draw a vertical mark (the optimizer's budget). Past 100 % it is drawn full and hatched."""
    fraction = max(0.0, float(fraction))
    width = BAR_UNITS * min(fraction, 1.0)
    shapes = [f'<rect class="track" x="0" y="0" width="{BAR_UNITS}" height="{height}" fill="#e4e4e4"/>',
              f'<rect class="value" x="0" y="1" width="{width:.1f}" height="{height - 2}" fill="{colour}"/>']
    if fraction > 1:
        shapes.append(f'<rect x="{BAR_UNITS - 12}" y="0" width="12" height="{height}" fill="{BOTTLENECK}"/>')
    if line is not None and 0 <= line <= 1:
        x = BAR_UNITS * line
        shapes.append(f'<line class="budget" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height}" stroke="{BUDGET}" '
                      f'stroke-width="3" vector-effect="non-scaling-stroke"/>')
    title = f"<title>{_e(label)}</title>" if label else ""
    return (f'<svg class="bar" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {BAR_UNITS} {height}" '
            f'preserveAspectRatio="none" height="{height}" role="img"'
            f'{f" aria-label={_attr(label)}" if label else ""}>{title}{"".join(shapes)}</svg>')


def _attr(text):
    return '"' + html.escape(str(text), quote=True) + '"'


def _percent(used, available):
    return f"{fmt(100 * used / available)} %" if available else "-"


# ---------------------------------------------------------------------------------------------- sections

def _card(what, body, note=""):
    return (f'<div class="card"><div class="what">{what}</div><div class="big">{body}</div>'
            + (f'<div class="note">{note}</div>' if note else "") + "</div>")


def _header(report, synth, verify):
    ii = report["analytic_cycles_per_frame"]
    mhz = report.get("clock_mhz", 0)
    cards = [_card("II (cycles per frame)", _num("analytic_cycles_per_frame", ii), "set by the slowest layer"),
             _card("frames/s (estimate)", _num("frames_per_second", report.get("frames_per_second", 0)),
                   f"at {_num('clock_mhz', mhz)} MHz")]
    if "latency_cycles" in report:
        cards.append(_card("latency (one frame)", f"{_num('latency_cycles', report['latency_cycles'])} cycles",
                           f"{_num('latency_ns', report['latency_ns'])} ns at {_num('clock_mhz', mhz)} MHz"))
    board_fps = report.get("board_frames_per_second")       # absent from the reports of older compiles
    if isinstance(board_fps, (int, float)) and not isinstance(board_fps, bool):
        shell = report.get("shell") or {}
        dma = shell.get("cycles_per_frame")
        binds = "I/O-bound" if report.get("io_bound") else "the accelerator binds"
        cards.append(_card("frames/s on the board", _num("board_frames_per_second", board_fps),
                           f"behind the zynq shell's DMA" + ("" if dma is None else
                           f" ({_num('shell.cycles_per_frame', dma)} cycles per frame): {binds}")))
        if "board_latency_cycles" in report:
            cards.append(_card("latency on the board", f"{_num('board_latency_cycles', report['board_latency_cycles'])} "
                               f"cycles", f"{_num('board_latency_ns', report['board_latency_ns'])} ns, DDR to DDR"))
    fit = report.get("fit") or {}
    if fit:
        cards.append(_card(f"the {_e(fit['board'])} ({_e(fit['device'])})",
                           f'<span class="{"pass" if fit["fits"] else "fail"}" data-key="fit.fits">'
                           f'{"fits" if fit["fits"] else "does not fit"}</span>', "by the estimate"))
    design = ((synth or {}).get("timing") or {}).get("design")
    if design:
        requested = synth["timing"].get("requested_mhz")
        cards.append(_card("Fmax (Yosys, estimate)",
                           f"~{_num('yosys.timing.design.fmax_mhz_estimate', design['fmax_mhz_estimate'])} MHz",
                           _slack(design, requested)))
    if verify is not None:
        cards.append(_card("against qonnx", f'<span class="{"pass" if verify["passed"] else "fail"}">'
                           f'{"bit-exact" if verify["passed"] and verify["exact"] else "passed" if verify["passed"] else "FAILED"}'
                           f'</span>', f"{_num('verify.samples', verify['samples'])} samples"))
    host = report["host_ops"]
    return (f"<h1>rtlgen: {_e(Path(report['model']).name)}</h1>"
            f"<div class=\"cards\">{''.join(cards)}</div>"
            f"<p class=\"note\">{len(report['layers'])} nodes in the dataflow chain; model {_e(report['model'])}; "
            f"host ops before: {_e(', '.join(host['pre']) or '-')}, after: {_e(', '.join(host['post']) or '-')}</p>")


def _warnings(report):
    """The compile's warnings (report.json's ``warnings``), under the figures they qualify."""
    lines = report.get("warnings") or []
    if not lines:
        return ""
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    return f'<div class="warnings" data-key="warnings"><b>warnings</b><ul>{items}</ul></div>'


def _slack(design, requested):
    if not requested:
        return ""
    slack = 1e3 / requested - design["path_ns_estimate"]
    return (f"{'meets' if slack >= 0 else 'MISSES'} {fmt(requested)} MHz: slack {'+' if slack >= 0 else ''}"
            f"{fmt(slack)} ns")


def _optimizer(report):
    opt = report.get("optimizer")
    if not opt:
        return ("<h2>Folding</h2><p class=\"note\">From a folding file, <code>--target-fps</code> or the default: "
                "the folding optimizer (<code>--fit BOARD</code>, <code>--budget</code>) did not run.</p>")
    budget = ", ".join(f"{k} {_num('optimizer.budget.' + k, v)}" for k, v in opt["budget"].items() if v is not None)
    held = opt.get("held_for_fifos") or {}
    held_text = ("; held back for FIFOs that simulation sized deeper than their bound: "
                 + ", ".join(f"{k} {_num('optimizer.held_for_fifos.' + k, v)}" for k, v in held.items())) if held else ""
    io = ""
    if opt.get("io_bound"):         # the budget allowed a faster II than the zynq shell's DMA can feed
        io = (f" <b>I/O-bound</b>: the budget allows II {_num('optimizer.budget_ii', opt['budget_ii'])}, but the "
              f"zynq shell's DMA needs {_num('optimizer.io_cycles_per_frame', opt['io_cycles_per_frame'])} cycles per "
              f"frame, so it took the cheapest folding at that bound instead.")
    what = (f"The lowest-latency folding ({_num('optimizer.latency_cycles', opt['latency_cycles'])} cycles"
            + (f", at least {_num('optimizer.target_fps', opt['target_fps'])} frames/s)" if opt.get("target_fps") else ")")
            if opt.get("objective") == "latency" else
            "The cheapest folding at the DMA's bound" if opt.get("io_bound") else
            f"The cheapest folding that reaches {_num('optimizer.target_fps', opt['target_fps'])} frames/s"
            if opt.get("target_fps") else "The fastest folding")
    return ("<h2>Folding optimizer</h2>"
            f"<p>{what} within the budget {budget or 'unlimited'}{held_text}: "
            f"II <b>{_num('optimizer.ii', opt['ii'])}</b> cycles per frame; binding resource <b>{_e(opt['binding'])}</b>"
            f"{_binding_share(opt)}.{io} "
            f"It weighed {_num('optimizer.options', opt['options'])} folding options in "
            f"{_num('optimizer.rounds', opt['rounds'])} round(s), {_num('optimizer.seconds', opt['seconds'])} s; "
            f"its estimate: " + ", ".join(f"{k} {_num('optimizer.estimate.' + k, v)}" for k, v in opt["estimate"].items())
            + ".</p>")


def _binding_share(opt):
    """How much of its budget the binding resource (the one closest to its budget) uses."""
    limit = opt["budget"].get(opt["binding"])
    used = opt["estimate"].get(opt["binding"])
    return "" if not limit or used is None else f" (the closest to its budget: {fmt(100 * used / limit)} % of it)"


def _yosys_usage(synth):
    """The Yosys totals in the board's units (LUT with LUTRAM/SRL, BRAM36 with BRAM18 as halves)."""
    t = synth["totals"]
    return {"LUT": synth.get("lut_including_memory", t["lut"]), "FF": t["ff"],
            "BRAM36": t["bram36"] + t["bram18"] / BRAM18_PER_BRAM36, "DSP": t["dsp"]}


def _board(report, synth):
    fit = report.get("fit")
    if not fit:
        return ""
    budget = ((report.get("optimizer") or {}).get("budget")) or {}
    built = _yosys_usage(synth) if synth is not None else {}
    rows = ""
    for k, v in fit["resources"].items():
        used, available = v["used"], v["available"]
        limit = budget.get(k)
        line = limit / available if limit is not None and available else None
        label = f"{k}: {fmt(used)} of {fmt(available)} ({_percent(used, available)}) by the estimate"
        rows += (f'<tr><td class="text">{_e(k)}</td><td class="text">estimate</td>'
                 f'<td class="bar" data-bar="fit.{_e(k)}">{_bar(used / available if available else 0, line=line, label=label)}</td>'
                 f'<td>{_num("fit.resources." + k + ".used", used)}</td><td>of {_num("fit.resources." + k + ".available", available)}</td>'
                 f'<td>{_percent(used, available)}</td>'
                 f'<td>{"" if limit is None else "budget " + _num("optimizer.budget." + k, limit)}</td></tr>')
        if k in built:
            rows += (f'<tr><td></td><td class="text">Yosys</td>'
                     f'<td class="bar" data-bar="yosys.{_e(k)}">{_bar(built[k] / available, YOSYS, line=line)}</td>'
                     f'<td>{fmt(built[k])}</td><td>of {fmt(available)}</td><td>{_percent(built[k], available)}</td>'
                     f'<td></td></tr>')
    legend = (f'<span class="key" style="background:{ESTIMATE}"></span>estimate'
              + (f'<span class="key" style="background:{YOSYS}"></span>Yosys (the whole design in its shell; LUT with '
                 f'LUTRAM and SRL)' if built else "")
              + ('<span class="key line"></span>the optimizer\'s budget' if budget else ""))
    return (f"<h2>Against the board: the {_e(fit['board'])} ({_e(fit['device'])})</h2>"
            f"<p class=\"note\">Each bar is the whole device (100 %). {legend}</p>"
            f"<table><tr><th class=\"text\">resource</th><th></th><th class=\"text\">share of the device</th>"
            f"<th>used</th><th>available</th><th>%</th><th></th></tr>{rows}</table>")


def _cycles(report):
    layers = [r for r in report["layers"] if r["exp_cycles"]]
    ii = report["analytic_cycles_per_frame"] or 1
    slowest = [r["name"] for r in layers if r["exp_cycles"] == ii]
    rows = ""
    for r in layers:
        at_ii = r["name"] in slowest
        rows += (f'<tr class="{"bottleneck" if at_ii else ""}">{_name(r["name"])}<td class="text">{_e(r["op_type"])}</td>'
                 f'<td class="wrap">{_e(_folding(r["folding"]))}</td>'
                 f'<td class="bar">{_bar(r["exp_cycles"] / ii, BOTTLENECK if at_ii else ESTIMATE)}</td>'
                 f'<td>{_num("layers." + r["name"] + ".exp_cycles", r["exp_cycles"])}</td>'
                 f'<td class="text">{"<span class=tag>bottleneck</span>" if at_ii else ""}</td></tr>')
    which = ("every layer runs at it" if len(slowest) == len(layers) and len(layers) > 1 else
             f"{len(slowest)} layers share it" if len(slowest) > 1 else "one layer sets it")
    return (f"<h2>Cycles per frame</h2><p class=\"note\">Bars to the II ({_num('analytic_cycles_per_frame', ii)} cycles, the full width): layers "
            f"at the II (red) are the bottleneck, {which}. FIFOs and data-width converters never limit the rate.</p>"
            f"<table><tr><th class=\"name\">layer</th><th class=\"text\">op</th><th class=\"text\">folding</th>"
            f"<th class=\"text\">cycles per frame</th><th></th><th></th></tr>{rows}</table>")


def _folding(folding):
    return " ".join(f"{k}={v}" for k, v in folding.items()) or "-"


def _resources(report):
    layers = report["layers"]
    totals = report["totals"]
    head = "".join(f'<th colspan="2">{k}</th>' for k in RESOURCES)
    rows = ""
    for r in layers:
        cells = ""
        for k in RESOURCES:
            value = r["resources"].get(k, 0)
            share = value / totals[k] if totals.get(k) else 0
            cells += (f'<td>{_num("layers." + r["name"] + ".resources." + k, value)}</td>'
                      f'<td class="minibar">{_bar(share, height=12)}</td>')
        rows += f'<tr>{_name(r["name"])}<td class="text">{_e(r["op_type"])}</td>{cells}</tr>'
    rows += ('<tr class="total"><td class="name">total</td><td></td>'
             + "".join(f'<td>{_num("totals." + k, totals.get(k, 0))}</td><td></td>' for k in RESOURCES) + "</tr>")
    return ("<h2>Resources per layer (estimate)</h2><p class=\"note\">Bars: the layer's share of the design's total "
            "of that resource. BRAM in BRAM18 blocks.</p>"
            f"<table><tr><th class=\"name\">layer</th><th class=\"text\">op</th>{head}</tr>{rows}</table>")


def _yosys(synth):
    pairs = (("LUT", "lut_including_memory"), ("FF", "ff"), ("BRAM18", None), ("DSP", "dsp"))  # (estimate, Yosys)
    timing = synth.get("timing") or {}
    paths = timing.get("layers") or {}
    for row in (*synth["layers"].values(), synth["totals"], synth.get("shell") or {}):  # a build of an older rtlgen
        if "lut" in row:
            row.setdefault("lut_including_memory", row["lut"] + row.get("lut_as_memory", 0))
    head = "".join(f'<th>{k} Yosys</th><th>est.</th>' for k, _ in pairs)
    rows = ""
    for name, row in synth["layers"].items():
        cells = ""
        for est_key, key in pairs:
            built = (fmt(row["bram18"] + 2 * row["bram36"]) if key is None else     # BRAM18-equivalent
                     _num(f"yosys.layers.{name}.{key}", row[key]))
            cells += (f'<td>{built}</td><td class="note">'
                      f'{_num(f"yosys.layers.{name}.estimate.{est_key}", row.get("estimate", {}).get(est_key, 0))}</td>')
        path = paths.get(name)
        cells += (f'<td>{_num(f"yosys.timing.layers.{name}.levels", path["levels"])}</td>'
                  f'<td>~{_num(f"yosys.timing.layers.{name}.fmax_mhz_estimate", path["fmax_mhz_estimate"])}</td>'
                  if path else "<td>-</td><td>-</td>")
        rows += f"<tr>{_name(name)}{cells}</tr>"
    t, shell = synth["totals"], synth.get("shell")
    if shell:
        rows += ('<tr><td class="name">shell (ROMs / DMA, control, glue)</td>'
                 + "".join(f'<td>{fmt(shell["bram18"] + 2 * shell["bram36"]) if key is None else _num("yosys.shell." + key, shell[key])}</td><td></td>'
                           for _, key in pairs) + "<td></td><td></td></tr>")
    est = synth.get("estimate", {})
    rows += (f'<tr class="total"><td class="name">total ({_e(synth["top"])})</td>'
             + "".join(f'<td>{fmt(t["bram18"] + 2 * t["bram36"]) if key is None else _num("yosys.totals." + key, t[key])}'
                       f'</td><td class="note">{_num("yosys.estimate." + k, est.get(k, 0))}</td>' for k, key in pairs) + "<td></td><td></td></tr>")
    design = timing.get("design")
    clock = ""
    if design:
        requested = timing.get("requested_mhz")
        where = f" in {_e(design['layer'])}" if design.get("layer") else ""
        clock = (f"<p>Timing (estimate): the longest path has {_num('yosys.timing.design.levels', design['levels'])} "
                 f"logic level(s) ({_e(design['through'])}{where}), "
                 f"~{_num('yosys.timing.design.path_ns_estimate', design['path_ns_estimate'])} ns: Fmax "
                 f"~{_num('yosys.timing.design.fmax_mhz_estimate', design['fmax_mhz_estimate'])} MHz"
                 + (f"; {_slack(design, requested)}" if requested else "") + f".</p><p class=\"note\">{_e(timing['model'])}</p>")
    return ("<h2>Yosys synthesis beside the estimate</h2>"
            f"<p class=\"note\">Yosys <code>synth_xilinx</code> of the whole design in the {_e(synth['top'])} shell "
            f"({_num('yosys.yosys_seconds', synth['yosys_seconds'])} s); per layer, Yosys beside the estimate (grey); BRAM in BRAM18 "
            f"blocks (a BRAM36 counts 2); LUT without LUTRAM/SRL.</p>" + clock
            + f"<table><tr><th class=\"name\">layer</th>{head}<th>levels</th><th>Fmax MHz</th></tr>{rows}</table>")


def _separated(text):
    """``text`` (a message of :mod:`rtlgen.check.verify`) with the page's thousands separators in its integers."""
    return re.sub(r"(?<![\w.,])\d{4,}(?![\w.,])", lambda m: f"{int(m.group()):,}", text)


def _verification(verify):
    ok = verify["passed"]
    equal = verify["elements"] - verify["bad_elements"]
    fraction = equal / verify["elements"] if verify["elements"] else 0
    return (f"<h2>Verification</h2><p class=\"{'pass' if ok else 'fail'}\" data-key=\"verify.passed\">"
            f"{'passed' if ok else 'FAILED'}</p><p>{_e(_separated(verify['summary']))}</p>"
            f"<p>{_num('verify.samples', verify['samples'])} samples, "
            f"{_num('verify.bad_elements', verify['bad_elements'])} of {_num('verify.elements', verify['elements'])} "
            f"output values differ from qonnx.</p>"
            f"<table><tr><td class=\"text\">equal to qonnx</td><td class=\"bar\">"
            f"{_bar(fraction, '#3a3' if ok else BOTTLENECK, label=f'{fmt(equal)} equal')}</td>"
            f"<td>{fmt(equal)} of {_num('verify.elements', verify['elements'])}</td></tr></table>")
