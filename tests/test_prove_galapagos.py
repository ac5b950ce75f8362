"""`rtlgen prove` on the Galapagos bridges and on an `rtlgen partition` OUT: both bridges keep the stream
contract and the re-framing, proven by k-induction (a chosen bit of a chosen frame leaves at its place in the other framing;
ToGalapagos's TDEST/TID/TLAST/TKEEP are the packet format's), FromGalapagos under the stated assumption
of well-formed packets addressed to it; mutants that drop a word, change the payload while stalled or
misplace TLAST are caught; and every node of every device of a 2-device TFC partition is listed proven
or bounded (slow)."""

import json
from pathlib import Path

import pytest

from galapagos import FromGalapagos, FromGalapagosSpec, ToGalapagos, ToGalapagosSpec
from rtlgen.check.prove import prove_spec
from rtlgen.check.prove_design import cluster_nodes
from tests.mutants import mutant

MODELS = Path(__file__).parent / "models"

# 4 words of 33 bits: 132 bits in 3 flits of 64 (the last partial), sent as packets of 2 and 1 flits; the
# second and fourth words straddle a flit boundary. (Words of 49 bits, the same geometry in 3 words: the
# induction of FromGalapagos took 4.5x as long, 32 s of the default suite; issue 42 item 6.)
TO = ToGalapagosSpec(33, 64, 4, dest=2, source_id=1, max_packet_flits=2)
FROM = FromGalapagosSpec(33, 64, 4, kernel_id=2, max_packet_flits=2)
CASES = {"to": (TO, ToGalapagos, "to_galapagos"), "from": (FROM, FromGalapagos, "from_galapagos")}


@pytest.mark.parametrize("case", CASES)
def test_bridge_holds(case, tmp_path):
    spec, cls, track = CASES[case]
    outcome = prove_spec(spec, cls, name=case, track=track, keep=tmp_path)
    assert outcome.status == "proven", outcome.line()       # sim.formal's bridge invariants close the induction


MUTANTS = [
    # (case, kind, the properties of which one must fail)
    ("to", "drop", "bits flit_o frame"),
    ("to", "unstable", "stable_o"),
    ("to", "corrupt", "bits"),
    ("to", "pad", "bits"),
    ("to", "tlast", "flit_o"),
    ("from", "corrupt", "bits"),
    ("from", "drop", "bits frame"),
    ("from", "unstable", "stable_o"),
]


@pytest.mark.parametrize("case,kind,props", MUTANTS, ids=[f"{c}-{k}" for c, k, _ in MUTANTS])
def test_bridge_mutant_fails(case, kind, props, tmp_path):
    spec, cls, track = CASES[case]
    outcome = prove_spec(spec, mutant(cls, kind), name=f"{case}-{kind}", track=track, keep=tmp_path,
                         use_cache=False)
    assert outcome.status == "failed", outcome.line()
    assert set(props.split()) & set(outcome.failed), outcome.line()
    assert Path(outcome.vcd).is_file()


def _partition(out):
    from rtlgen.cli import main
    plan = out.parent / "map.json"
    plan.write_text(json.dumps({"MVAU_0": 0, "MVAU_1": 0, "MVAU_2": 1, "MVAU_3": 1}))
    assert main(["partition", str(MODELS / "TFC_1W1A.onnx"), "-o", str(out), "--devices", "2",
                 "--partition", str(plan)]) == 0


def test_partition_out_lists_every_device_node_and_bridge(tmp_path, capsys):
    """What `prove` reads of a partition OUT (no proof run): per device its FromGalapagos, the nodes of its
    model_hw.onnx in order, its ToGalapagos, with the kernel's IDs and geometry; a device whose
    model_hw.onnx is missing names it and says to partition again (exit 2)."""
    from rtlgen.cli import main

    out = tmp_path / "tfc2"
    _partition(out)
    nodes = cluster_nodes(out)
    names = [name for name, _, _ in nodes]
    for d in (0, 1):
        report = json.loads((out / f"device{d}" / "report.json").read_text())
        mine = [n for n in names if n.startswith(f"device{d}/")]
        assert mine == [f"device{d}/FromGalapagos"] + [f"device{d}/{layer['name']}" for layer in report["layers"]] \
            + [f"device{d}/ToGalapagos"]
        receive = dict((n, s) for n, _, s in nodes)[f"device{d}/FromGalapagos"]
        send = dict((n, s) for n, _, s in nodes)[f"device{d}/ToGalapagos"]
        assert receive.kernel_id == send.source_id == d + 1 and send.dest == d + 2
        assert receive.words_per_frame == report["receive"]["words_per_frame"]
        assert send.word_width == report["send"]["word_width"]
    capsys.readouterr()
    (out / "device1" / "model_hw.onnx").unlink()
    assert main(["prove", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device1/model_hw.onnx: missing" in err[0] and "rtlgen partition" in err[0], err


@pytest.mark.slow
def test_prove_partition_out(tmp_path, capsys):
    """`rtlgen prove OUT` on a 2-device TFC-w1a1 partition: every node of every device and both bridges
    of each listed, proven (k-induction) or bounded, exit 0; the bridges and width converters proven."""
    from rtlgen.cli import main

    out = tmp_path / "tfc2"
    _partition(out)
    capsys.readouterr()
    assert main(["prove", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = [name for name, _, _ in cluster_nodes(out)]
    assert len(expected) == 16
    for name in expected:
        line = next(line for line in lines if line.split()[0] == name)
        assert "proven (k-induction)" in line or "bounded to depth" in line, line
        if "Galapagos" in name or "StreamingDataWidthConverter" in name:
            assert "proven (k-induction)" in line, line
    assert "16 of 16 nodes hold their stream contract" in lines[-1], lines[-1]
