"""The partitioner (issue 16): the II of each 0/1 program against brute force over every cut and every
option combination, never slower than one device, link bounds met exactly, the partition map honoured,
deterministic, and one clear line for each bad input."""

import itertools
import warnings
from math import ceil
from pathlib import Path

import numpy as np
import pytest

from galapagos import FromGalapagosSpec, ToGalapagosSpec
from rtlgen.costmodel import estimate
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.fit import Budget
from rtlgen.passes.optimize import RESOURCES, design_estimate, fold_groups, group_options, optimize_folding
from rtlgen.passes import partition_program
from rtlgen.passes.partition import PartitionError, legal_cuts, partition
from rtlgen.passes.partition_program import PartitionProgram
from rtlgen.ir.graph import words_per_frame

MODELS = Path(__file__).parent / "models"
CLOCK_MHZ = 100.0
FAST = 100.0            # Gbit/s: links fast enough that the layers set the II


def lowered(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lower(load_model(str(MODELS / name)))


@pytest.fixture(scope="module")
def tfc():
    return lowered("TFC_2W2A.onnx")


@pytest.fixture(scope="module")
def residual():
    return lowered("branching/mlp_residual.onnx")


def vector(resources):
    return np.array([float(resources[r]) for r in RESOURCES])


def fits(partition_, devices):
    """Every device's whole estimate (nodes, DWCs, FIFOs, bridges) within its budget."""
    return all((vector(d.resources) <= b.as_vector() + 1e-9).all() for d, b in zip(partition_.devices, devices))


def test_legal_cuts(tfc, residual):
    assert legal_cuts(tfc) == {0: "Quant_5_out0", 1: "Quant_6_out0", 2: "Quant_7_out0"}
    # inside the residual block two streams cross (the skip and the main path): no cut there
    names = [n.name for n in residual.nodes]
    assert {names[i] for i in legal_cuts(residual)} == {"AddStreams_0", "Thresholding_0"}


# ---------------------------------------------------------------------------------------------- exactness

def brute_force(graph, choices, limits, link_gbps, host_links):
    """The smallest II over every cut (none, or after any node) and every option combination on 2 devices,
    with the bridges' estimates and the link bound computed here from the specs: (smallest II, smallest
    II without a cut), None where nothing fits."""
    nodes = graph.nodes
    n = len(nodes)
    specs = [[nodes[g].spec(**dict(o.folding)[0]) for o in options] for g, options in enumerate(choices)]
    grids = np.meshgrid(*[np.arange(len(c)) for c in choices], indexing="ij")
    combo = [grid.ravel() for grid in grids]                     # option index per group, per combination
    cycles = np.max([np.array([o.cycles for o in choices[g]])[combo[g]] for g in range(n)], axis=0)
    cost = [np.array([o.cost for o in choices[g]], dtype=float)[combo[g]] for g in range(n)]
    best = {}
    for cut in [None, *range(n - 1)]:
        split = n if cut is None else cut + 1
        dev = [sum(cost[:split]), sum(cost[split:], np.zeros((len(cycles), 4)))]
        ii = cycles
        if cut is not None:
            to = [ToGalapagosSpec(s.out_width, 64, words_per_frame(s.folded_output_shape), 1, 1) for s in specs[cut]]
            back = [FromGalapagosSpec(s.in_width, 64, words_per_frame(s.folded_input_shapes[0]), 1)
                    for s in specs[cut + 1]]
            dev[0] = dev[0] + np.array([vector(estimate(b)) for b in to])[combo[cut]]
            dev[1] = dev[1] + np.array([vector(estimate(b)) for b in back])[combo[cut + 1]]
            ii = np.maximum(ii, wire_ii(to[0].frame_bits, link_gbps))
        first, last = specs[0][0], specs[-1][0]       # the host's links: graph input and output, any folding
        ii = ii if not host_links else np.maximum(ii, max(wire_ii(first.in_width * words_per_frame(first.folded_input_shapes[0]), link_gbps),
                                wire_ii(last.out_width * words_per_frame(last.folded_output_shape), link_gbps)))
        ok = (dev[0] <= limits[0]).all(axis=1) & (dev[1] <= limits[1]).all(axis=1)
        if ok.any():
            best[cut] = int(ii[ok].min())
    return min(best.values(), default=None), best.get(None)


def wire_bits(bits):
    """Bits on the wire for a ``bits``-bit frame in 64-bit flits: whole flits, in packets of at most 180
    flits (1,440 bytes), each with 74 bytes of Ethernet, IPv4, UDP and Galapagos overhead (preamble,
    headers, FCS, gap, Galapagos' header flit) rounded up to 10 flits."""
    flits = ceil(bits / 64)
    return (flits + 10 * ceil(flits / 180)) * 64


def wire_ii(bits, link_gbps):
    """Cycles per frame a link needs for a ``bits``-bit packet."""
    return ceil(wire_bits(bits) * CLOCK_MHZ * 1e6 / (link_gbps * 1e9) - 1e-9)


@pytest.mark.parametrize("name, step, grid", [
    ("decimal/brevitas_decimal_mlp.onnx", 1, [("lut=400", "lut=400"), ("lut=1200", "lut=1200"),
                                              ("lut=1500", "lut=1500"),
                                              ("lut=2500,ff=3000", "lut=800,ff=3000"), ("lut=1500", "lut=700")]),
    pytest.param("TFC_1W1A.onnx", 2, [("lut=300", "lut=300"), ("lut=800", "lut=800"), ("lut=5000", "lut=5000"),
                                      ("lut=8000", "lut=8000"), ("lut=8000,ff=6000", "lut=3000,ff=6000")],
                 marks=pytest.mark.slow),       # CI time (60 s); the decimal MLP's grid stays in the default suite
])
def test_each_ii_is_optimal_against_brute_force(name, step, grid):
    """The MILP at each II (bisection, without the FIFO rounds) against every cut and combination of the
    (Pareto) options; for TFC every ``step``-th option, to keep the enumeration small. The grid has
    budgets nothing fits, budgets where a cut pays, and links slow enough to bound the II."""
    graph = lowered(name)
    choices = [options[::step] for options in (group_options(graph, g) for g in fold_groups(graph))]
    feasible = cut_pays = 0
    for budgets, link, host in itertools.product(grid, (10.0, 1.0, 0.02), (False, True)):
        limits = [Budget.parse(b) for b in budgets]
        expected, uncut = brute_force(graph, choices, np.array([b.as_vector() for b in limits]), link, host)
        problem = PartitionProgram.build(graph, 2, limits, link_gbps=link, clock_mhz=CLOCK_MHZ, fixed=None,
                                 flit_width=64, choices=choices, host_links=host)
        found = problem.smallest(rounds=False)
        if expected is None:
            assert found is None, (budgets, link)
            continue
        ii, (solution, _) = found
        assert ii == expected, (budgets, link)
        reached = max([choices[g][k].cycles for g, k in enumerate(solution.option)] +
                      [s.link_ii for s in problem.active_cuts(solution)] + list(problem.host_links.values()))
        assert reached == ii
        balanced = problem.solve(ii, problem.limit, balance=True)     # the final solve, at the same II
        utilization = []
        for chosen in (solution, balanced):
            assert max([choices[g][k].cycles for g, k in enumerate(chosen.option)] +
                       [s.link_ii for s in problem.active_cuts(chosen)] + list(problem.host_links.values())) <= ii
            used = [sum((np.array(choices[g][k].cost, dtype=float)
                         for g, (k, dev) in enumerate(zip(chosen.option, chosen.device)) if dev == d),
                        problem.bridges(chosen, d)) for d in range(2)]
            assert all((u <= b.as_vector()).all() for u, b in zip(used, limits))   # nodes and bridges fit
            utilization.append(max(float(np.max(np.divide(u, b.as_vector()))) for u, b in zip(used, limits)))
        assert utilization[1] <= utilization[0] + 1e-6
        feasible += 1
        cut_pays += uncut is None or uncut > ii
    assert feasible >= 9 and cut_pays >= 2


# ---------------------------------------------------------------------------------------------- behaviour

def test_two_devices_at_half_the_budget_are_no_slower_than_one(tfc):
    half = Budget.parse("lut=3000")      # the cut pays: 224 cycles alone, 196 on two
    single = optimize_folding(tfc.copy(), half)
    one = partition(tfc, 1, half, link_gbps=FAST)
    two = partition(tfc, 2, half, link_gbps=FAST)
    assert two.ii <= single.ii and two.ii <= one.ii
    assert two.ii < one.ii and len(two.cuts) == 1           # here the cut pays
    assert fits(two, [half, half]) and fits(one, [half])
    assert sorted(n for d in two.devices for n in d.nodes) == sorted(n.name for n in tfc.nodes)
    assert two.ii == max(d.cycles for d in two.devices)
    cut = two.cuts[0]
    assert (cut.src_device, cut.dst_device) == (0, 1) and cut.bits_per_frame == 64 * 2
    assert cut.link_utilization == pytest.approx(wire_bits(128) * CLOCK_MHZ * 1e6 / two.ii / (FAST * 1e9))
    for device in two.devices:        # the folding reported is the folding whose cycles are reported
        assert device.cycles == max(tfc.node(n).spec(**device.folding[n]).exp_cycles for n in device.nodes)
        for n in device.nodes:        # and says where the weights are (as compile's optimizer writes it)
            folding = device.folding[n]
            assert folding["ram_style"] == tfc.node(n).spec(**folding).weight_ram_style != "auto"
    assert all(v >= 0 for v in two.devices[1].bridges.values()) and two.devices[0].bridges["LUT"] > 0


def test_a_tight_link_raises_the_ii_exactly_to_its_bound(tfc):
    half = Budget.parse("lut=3000")      # the cut pays: 224 cycles alone, 196 on two
    fast, alone = partition(tfc, 2, half, link_gbps=FAST), partition(tfc, 1, half, link_gbps=FAST)
    bits = wire_bits(fast.cuts[0].bits_per_frame)
    bound = (fast.ii + alone.ii) // 2                  # slower than the cut design, faster than one device
    link = bits * CLOCK_MHZ * 1e6 / (bound - 0.5) / 1e9
    tight = partition(tfc, 2, half, link_gbps=link, host_links=False)
    assert tight.ii == bound == tight.cuts[0].link_ii > fast.ii
    assert tight.bound_by.startswith("link ")
    assert 1 - 1 / bound < tight.cuts[0].link_utilization <= 1
    assert fits(tight, [half, half])
    # a link slower than one device's II: no cut at all
    slow = partition(tfc, 2, half, link_gbps=bits * CLOCK_MHZ * 1e6 / (alone.ii + 10) / 1e9, host_links=False)
    assert slow.ii == alone.ii and slow.cuts == () and slow.devices[1].nodes == ()


def test_the_greedy_start_reaches_the_programs_ii(tfc, monkeypatch):
    """Greedy placements are tried first at each II (a program per placement: folding only), the whole
    program after them: the II is the same as the whole program's alone."""
    budget = Budget.parse("lut=2500")
    placed = []
    solve = PartitionProgram.solve

    def counting(self, ii, limits, balance=False, placement=None):
        placed.append(placement is not None)
        return solve(self, ii, limits, balance, placement)
    monkeypatch.setattr(PartitionProgram, "solve", counting)
    greedy = partition(tfc, 3, budget, link_gbps=FAST)
    assert any(placed) and greedy.solver_note == ""
    monkeypatch.setattr(partition_program, "GREEDY_FILLS", ())
    exact = partition(tfc, 3, budget, link_gbps=FAST)
    assert greedy.ii == exact.ii and len(greedy.cuts) >= 1 and fits(greedy, [budget] * 3)


def test_a_program_stopped_at_its_time_limit_is_said_not_proved(tfc, monkeypatch):
    """Where HiGHS stops at its time limit with no partition, nothing is claimed impossible: a greedy
    placement that fits stands and the result says what is unproven; without one the error says so."""
    budget = Budget.parse("lut=2500")
    exact = partition(tfc, 3, budget, link_gbps=FAST)
    solve = PartitionProgram.solve

    def whole_program_times_out(self, ii, limits, balance=False, placement=None):
        if placement is None:
            self.undecided.append(ii)
            return None
        return solve(self, ii, limits, balance, placement)
    monkeypatch.setattr(PartitionProgram, "solve", whole_program_times_out)
    part = partition(tfc, 3, budget, link_gbps=FAST)
    assert part.ii == exact.ii and fits(part, [budget] * 3)
    assert "the most balanced partition was not found within the 30 s limit" in part.solver_note
    monkeypatch.setattr(partition_program, "GREEDY_FILLS", ())
    with pytest.raises(PartitionError, match="that HiGHS found within its 30 s limit per program, nor did it "
                                             "prove there is none"):
        partition(tfc, 3, budget, link_gbps=FAST)


def test_deterministic_and_the_graph_is_left_alone(tfc):
    before = {n.name: dict(n.folding) for n in tfc.nodes}
    budgets = [Budget.parse("lut=3000"), Budget.parse("lut=5000,ff=6000")]
    a = partition(tfc, 2, budgets)
    b = partition(lowered("TFC_2W2A.onnx"), 2, budgets)
    assert a == b
    assert {n.name: dict(n.folding) for n in tfc.nodes} == before


def test_the_partition_map_is_honoured(tfc, residual):
    half = Budget.parse("lut=3000")      # the cut pays: 224 cycles alone, 196 on two
    moved = partition(tfc, 2, half, fixed={"MVAU_0": 0, "MVAU_1": 1}, link_gbps=FAST)
    assert moved.devices[0].nodes == ("MVAU_0",) and moved.device_of("MVAU_1") == 1
    together = partition(tfc, 2, half, fixed={"MVAU_0": 0, "MVAU_3": 0}, link_gbps=FAST)
    assert together.cuts == () and together.ii == partition(tfc, 1, half, link_gbps=FAST).ii
    # a forced cut with a slow link: the II is the link bound whatever the budget allows
    forced = partition(tfc, 2, Budget.parse(""), fixed={"MVAU_3": 1}, link_gbps=0.001, host_links=False)
    assert forced.ii == ceil(wire_bits(128) * CLOCK_MHZ * 1e6 / 1e6) == forced.cuts[0].link_ii
    # with the host's links, the input's (784 x 2 bits) is the slowest
    hosted = partition(tfc, 2, Budget.parse(""), fixed={"MVAU_3": 1}, link_gbps=0.001)
    assert hosted.ii == ceil(wire_bits(784 * 2) * CLOCK_MHZ * 1e6 / 1e6) and hosted.bound_by == "link host -> device 0"
    # a branching graph: cuts only where one stream crosses; each device a well-formed subgraph
    budget = Budget.parse("lut=1000")
    three = partition(residual, 3, budget, fixed={"MVAU_2": 2})
    assert [c.src for c in three.cuts] == ["AddStreams_0", "Thresholding_0"]
    assert three.devices[0].nodes == ("MVAU_0", "MVAU_1", "AddStreams_0") and fits(three, [budget] * 3)
    parts = three.split(residual)
    assert [p.input for p in parts] == [residual.input, "Add_0_out0", "Quant_6_out0"]
    assert [p.output for p in parts] == ["Add_0_out0", "Quant_6_out0", residual.output]
    for part, device in zip(parts, three.devices):
        assert (design_estimate(part) <= vector(device.resources) + 1e-9).all()


# ---------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("which, devices, budget, fixed, message", [
    ("tfc", 5, "lut=8000", None, "5 devices for 4 layers: the graph can be cut into at most 4 parts (legal cuts, "
                                 "where exactly one stream crosses: after MVAU_0, after MVAU_1, after MVAU_2)"),
    ("residual", 4, "lut=8000", None, "4 devices for 5 layers: the graph can be cut into at most 3 parts "
                                      "(legal cuts, where exactly one stream crosses: after AddStreams_0, "
                                      "after Thresholding_0)"),
    ("tfc", 2, "lut=10", None, "no partition over 2 devices fits the budget (LUT 10) on each device at any "
                               "folding: MVAU_0 alone needs at least LUT "),
    ("tfc", 4, "lut=250", None, "no partition over 4 devices fits the budget (LUT 250) on each device at any "
                                "folding once the Galapagos bridges, DWCs and FIFOs on each device are counted "
                                "(the layers alone need at least LUT "),      # the figure is the estimate's
    ("tfc", 2, "lut=8000", {"MVAU_9": 0}, "partition map names unknown node 'MVAU_9'; the nodes are MVAU_0, "
                                          "MVAU_1, MVAU_2, MVAU_3"),
    ("tfc", 2, "lut=8000", {"MVAU_1": 2}, "partition map puts MVAU_1 on device 2; devices are 0..1"),
    ("tfc", 2, "lut=8000", {"MVAU_1": "1"}, "partition map puts MVAU_1 on device '1'; devices are 0..1"),
    ("tfc", 2, "lut=8000", {"MVAU_1": 1, "MVAU_2": 0}, "partition map puts MVAU_2 on device 0 after MVAU_1 on "
                                                       "device 1: device indices must not decrease"),
    ("tfc", 3, "lut=8000", {"MVAU_0": 0, "MVAU_1": 2}, "partition map puts MVAU_1 on device 2, but 1 legal cut "
                                                       "lies between MVAU_0 (device 0) and MVAU_1"),
    ("residual", 2, "lut=8000", {"MVAU_1": 1}, "partition map puts MVAU_1 on device 1, but 0 legal cuts lie "
                                               "before MVAU_1"),
    ("tfc", 0, "lut=8000", None, "devices must be an integer >= 1, not 0"),
])
def test_errors(tfc, residual, which, devices, budget, fixed, message):
    graph = {"tfc": tfc, "residual": residual}[which]
    with pytest.raises(PartitionError) as info:
        partition(graph, devices, Budget.parse(budget), fixed=fixed)
    text = str(info.value)
    assert message in text and "\n" not in text, text
    assert isinstance(info.value, ValueError)


def test_argument_errors(tfc):
    b = Budget.parse("lut=8000")
    for kwargs, message in (({"budgets": [b, b, b]}, "give one budget, or one per device (2), not 3"),
                            ({"link_gbps": 0}, "link_gbps must be a positive number, not 0"),
                            ({"clock_mhz": -5.0}, "clock_mhz must be a positive number, not -5.0")):
        with pytest.raises(PartitionError, match=message.replace("(", r"\(").replace(")", r"\)")):
            partition(tfc, 2, **{"budgets": b, **kwargs})


# ---------------------------------------------------------------------------------------------- CLI

def _cli(argv, capsys):
    from rtlgen.cli import main
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_writes_the_plan_and_cluster_files(tmp_path, capsys):
    import json
    from galapagos.cluster import check_cluster, parse_logical, parse_map
    model = str(Path(__file__).parent / "models" / "TFC_2W2A.onnx")
    out = tmp_path / "plan"
    code, stdout, _ = _cli(["partition", model, "-o", str(out), "--devices", "2", "--budget", "lut=4000",
                             "--link-gbps", "100", "--plan-only"], capsys)
    assert code == 0, stdout
    plan = json.loads((out / "partition.json").read_text())
    assert len(plan["devices"]) == 2 and plan["ii"] == max(d["cycles"] for d in plan["devices"])
    assert [c["src"] for c in plan["cuts"]] == [plan["devices"][0]["nodes"][-1]]
    assert all(d["resources"]["LUT"] <= 4000 for d in plan["devices"])
    folding = json.loads((out / "folding.json").read_text())
    assert set(folding) == {n for d in plan["devices"] for n in d["nodes"]}
    kernels = parse_logical((out / "cluster" / "logical.xml").read_text())
    devices = parse_map((out / "cluster" / "map.xml").read_text())
    assert [k.id for k in kernels] == [1, 2, 3] and kernels[-1].type == "sw"
    check_cluster(kernels, devices, [(3, 1), (1, 2), (2, 3)])
    assert not (out / "device0").exists() and "rtlgen sim" not in stdout     # --plan-only: no kernels


@pytest.mark.parametrize("extra, fragment", [
    (["--devices", "99"], "99 devices for 4 layers"),
    (["--devices", "2", "--budget", "lut=10"], "no partition over 2 devices fits"),
    (["--devices", "2", "--budget", "nonsense=3"], "--budget"),
    (["--devices", "2", "--max-packet-bytes", "3"], "--max-packet-bytes 3: must be a whole number of bytes, at least one 64-bit flit"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, fragment):
    model = str(Path(__file__).parent / "models" / "TFC_2W2A.onnx")
    code, _, err = _cli(["partition", model, "-o", str(tmp_path / "p"), *extra], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("rtlgen partition: error:"), err
    assert fragment in err


def test_cli_partition_file_naming_an_unknown_node(tmp_path, capsys):
    model = str(Path(__file__).parent / "models" / "TFC_2W2A.onnx")
    fixed = tmp_path / "map.json"
    fixed.write_text('{"MVAU_9": 1}')
    code, _, err = _cli(["partition", model, "-o", str(tmp_path / "p"), "--devices", "2", "--partition", str(fixed)],
                        capsys)
    assert code == 2 and "MVAU_9" in err and err.count("\n") == 1, err


def test_cli_input_dtype_as_compile_takes_it(tmp_path, capsys):
    """A model whose input has no quantizer (QKeras' fixed-point dense net) is partitioned with
    ``--input-dtype`` as `rtlgen compile` takes it; without it, the one-line refusal names the option."""
    model = str(Path(__file__).parent / "models" / "no_act_quant" / "qkeras_dense.onnx")
    argv = ["partition", model, "-o", str(tmp_path / "plan"), "--devices", "2", "--plan-only"]
    code, stdout, err = _cli(argv, capsys)
    assert code == 2 and "--input-dtype" in err and len(err.strip().splitlines()) == 1, err
    code, stdout, err = _cli(argv + ["--input-dtype", "FIXED<16,6>"], capsys)
    assert code == 0 and (tmp_path / "plan" / "partition.json").exists(), err
    code, stdout, err = _cli(argv + ["--force", "--input-dtype", "FIXED<4,8>"], capsys)
    assert code == 2 and "--input-dtype FIXED<4,8>" in err, err
