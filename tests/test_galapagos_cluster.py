"""Galapagos cluster files: the logical and map files match Galapagos' documented format (hand-written
expected files below, in the README's LOGICALFILE / MAPFILE form), round trip through the parsers, and
check_cluster rejects every inconsistent cluster with its own message. Pure Python, no simulation."""

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from galapagos import (BOARD_PARTS, Device, Kernel, KernelConst, check_cluster, logical_xml, map_xml,
                       parse_logical, parse_map, placeholder_ip, placeholder_mac, sw_kernel)


def small_cluster():
    """The host (software kernel 1) on a CPU node and two layer groups on two PYNQ-Z2 boards, in a ring:
    host -> part0 -> part1 -> host."""
    kernels = [sw_kernel(1, "host"),
               Kernel(2, "part0", id_port="id"),
               Kernel(3, "part1", consts=[KernelConst("mode", 4, 5)])]
    devices = [Device(1, "sw", [1]),
               Device(2, "hw", [2], board="pynq-z2"),
               Device(3, "hw", [3], board="pynq-z2")]
    edges = [(1, 2), (2, 3), (3, 1)]
    return kernels, devices, edges


# Hand-written in Galapagos' documented format (README.md LOGICALFILE / MAPFILE, xml_examples/pynq and
# one_hw_one_sw_device): what Galapagos must be given for small_cluster(). Not produced by the code.
EXPECTED_LOGICAL = """<?xml version="1.0" encoding="UTF-8"?>
<cluster>
    <userIpPath>/home/user/ip_repo</userIpPath>
    <kernel> host
        <num> 1 </num>
        <type> sw </type>
        <s_axis>
            <scope> global </scope>
            <name> s_axis_0 </name>
        </s_axis>
        <m_axis>
            <scope> global </scope>
            <name> m_axis_0 </name>
        </m_axis>
    </kernel>
    <kernel> part0
        <num> 2 </num>
        <clk> ap_clk </clk>
        <aresetn> ap_rst_n </aresetn>
        <type> verilog </type>
        <id_port> id </id_port>
        <s_axis>
            <scope> global </scope>
            <name> s_axis_0 </name>
        </s_axis>
        <m_axis>
            <scope> global </scope>
            <name> m_axis_0 </name>
        </m_axis>
    </kernel>
    <kernel> part1
        <num> 3 </num>
        <clk> ap_clk </clk>
        <aresetn> ap_rst_n </aresetn>
        <type> verilog </type>
        <s_axis>
            <scope> global </scope>
            <name> s_axis_0 </name>
        </s_axis>
        <m_axis>
            <scope> global </scope>
            <name> m_axis_0 </name>
        </m_axis>
        <const>
            <name> mode </name>
            <width> 4 </width>
            <val> 5 </val>
        </const>
    </kernel>
</cluster>
"""

EXPECTED_MAP = """<?xml version="1.0" encoding="UTF-8"?>
<cluster>
    <node>
        <type> sw </type>
        <comm> udp </comm>
        <kernel> 1 </kernel>
        <mac> fa:16:3e:00:00:01 </mac>
        <ip> 10.1.2.1 </ip>
    </node>
    <node>
        <board> pynq-z2 </board>
        <part> xc7z020clg400-1 </part>
        <comm> udp </comm>
        <type> hw </type>
        <kernel> 2 </kernel>
        <autorun> False </autorun>
        <mac> fa:16:3e:00:00:02 </mac>
        <ip> 10.1.2.2 </ip>
    </node>
    <node>
        <board> pynq-z2 </board>
        <part> xc7z020clg400-1 </part>
        <comm> udp </comm>
        <type> hw </type>
        <kernel> 3 </kernel>
        <autorun> False </autorun>
        <mac> fa:16:3e:00:00:03 </mac>
        <ip> 10.1.2.3 </ip>
    </node>
</cluster>
"""

# Element names Galapagos reads (README; middleware/python/kernel.py and node.py key lists).
LOGICAL_TAGS = {"cluster", "userIpPath", "kernel", "num", "type", "clk", "aresetn", "id_port", "s_axis",
                "m_axis", "scope", "name", "const", "width", "val"}
MAP_TAGS = {"cluster", "node", "board", "part", "comm", "type", "kernel", "autorun", "mac", "ip"}


def shape(elem):
    """(tag, own text stripped, children) -- children sorted by tag, stably, so that the order of
    different elements inside a kernel or node (which Galapagos' dict-based parser ignores) does not
    matter, but the order of repeated elements (kernels, nodes, a node's kernel IDs) does."""
    text = "".join([elem.text or ""] + [c.tail or "" for c in elem]).strip()
    return (elem.tag, text, [shape(c) for c in sorted(elem, key=lambda c: c.tag)])


def tags(elem):
    return {e.tag for e in elem.iter()}


# ---------------------------------------------------------------------------------- format and parsing

def test_logical_file_matches_galapagos_format():
    kernels, _, _ = small_cluster()
    text = logical_xml(kernels, user_ip_path="/home/user/ip_repo")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(text)                                  # well-formed
    assert shape(root) == shape(ET.fromstring(EXPECTED_LOGICAL))
    assert tags(root) <= LOGICAL_TAGS
    # the kernel name is the <kernel> element's own text, ahead of its children, as in Galapagos' examples
    assert re.search(r"<kernel> part0\s*\n\s*<num> 2 </num>", text)


def test_map_file_matches_galapagos_format():
    _, devices, _ = small_cluster()
    text = map_xml(devices)
    root = ET.fromstring(text)
    assert shape(root) == shape(ET.fromstring(EXPECTED_MAP))
    assert tags(root) <= MAP_TAGS
    comments = re.findall(r"<!--(.*?)-->", text, re.S)
    assert any("placeholder" in c and "mac" in c.lower() and "ip" in c.lower() for c in comments)


def test_round_trip():
    kernels, devices, edges = small_cluster()
    kernels.append(Kernel(4, "vhdl_core", type="vhdl", clk="clk", aresetn="rstn", s_axis="in_r",
                          m_axis="out_r", consts=(KernelConst("a", 1, 1), KernelConst("b", 16, 65535))))
    devices.append(Device(4, "hw", [4], board="sidewinder", comm="tcp", mac="0C:C4:7A:88:BD:83",
                          ip="192.168.0.7", autorun=True))
    devices.append(Device(5, "hw", [], board="my-board", part="xc7z020clg400-1"))
    assert parse_logical(logical_xml(kernels)) == kernels
    assert parse_logical(logical_xml(kernels, user_ip_path="/ip")) == kernels
    assert parse_map(map_xml(devices)) == devices
    assert parse_logical(logical_xml([])) == [] and parse_map(map_xml([])) == []


def test_ids_start_at_one_and_are_unique():
    kernels, devices, edges = small_cluster()
    check_cluster(kernels, devices, edges)
    ids = [k.id for k in parse_logical(logical_xml(kernels))]
    assert ids == list(range(1, len(kernels) + 1))
    placed = [k for d in parse_map(map_xml(devices)) for k in d.kernels]
    assert sorted(placed) == ids                                 # each kernel on exactly one node


def test_parses_galapagos_style_files():
    """Files written the way Galapagos' README and examples write them (rep, control, wan, a sw node
    without comm or board, a multi-SLR kernel entry, a cluster-level dns), hand-written here."""
    logical = """<?xml version="1.0" encoding="UTF-8"?>
<cluster>
    <clusterNumber> 1 </clusterNumber>
    <userIpPath>/home/user/ip</userIpPath>
    <kernel> worker
        <num> 2 </num>
        <rep> 2 </rep>
        <clk> ap_clk </clk>
        <aresetn> ap_rst_n </aresetn>
        <type> verilog </type>
        <control> FALSE </control>
        <s_axis>
            <scope> global </scope>
            <name> in_r </name>
        </s_axis>
        <m_axis>
            <scope> global </scope>
            <name> out_r </name>
        </m_axis>
        <wan>
            <enabled> False </enabled>
            <name> laniakea_wan </name>
        </wan>
    </kernel>
    <kernel> cpu
        <num> 1 </num>
        <type> sw </type>
        <s_axis> <scope> global </scope> <name> stream_in </name> </s_axis>
        <m_axis> <scope> global </scope> <name> stream_out </name> </m_axis>
    </kernel>
</cluster>"""
    assert parse_logical(logical) == [
        Kernel(2, "worker", s_axis="in_r", m_axis="out_r"),
        Kernel(3, "worker", s_axis="in_r", m_axis="out_r"),
        Kernel(1, "cpu", type="sw", clk=None, aresetn=None, s_axis="stream_in", m_axis="stream_out"),
    ]
    mapping = """<?xml version="1.0" encoding="UTF-8"?>
<cluster>
    <dns> 10.1.9.109 </dns>
    <node>
        <type> sw </type>
        <kernel> 1 </kernel>
        <mac>  0c:c4:7a:88:c0:47 </mac>
        <ip> 10.1.2.101 </ip>
    </node>
    <node>
        <board> u200 </board>
        <type> hw </type>
        <kernel> <num> 2 </num> <slr> SLR1 </slr> </kernel>
        <kernel> <num> 3 </num> <slr> SLR2 </slr> </kernel>
        <mac> fa:16:3e:55:ca:08 </mac>
        <ip> 10.1.9.208 </ip>
        <comm> tcp </comm>
        <autorun> True </autorun>
    </node>
</cluster>"""
    assert parse_map(mapping) == [
        Device(1, "sw", (1,), mac="0c:c4:7a:88:c0:47", ip="10.1.2.101"),
        Device(2, "hw", (2, 3), board="u200", comm="tcp", mac="fa:16:3e:55:ca:08", ip="10.1.9.208",
               autorun=True, part=BOARD_PARTS["u200"]),
    ]


@pytest.mark.parametrize("parse, text, message", [
    (parse_logical, "<cluster><kernel> a ", "not well-formed"),
    (parse_logical, "<clusters/>", "root element must be <cluster>"),
    (parse_logical, "<cluster><kernel> a <type> verilog </type></kernel></cluster>", "<num> is missing"),
    (parse_logical, "<cluster><kernel> a <num> x </num></kernel></cluster>", "<num> must be an integer"),
    (parse_logical, "<cluster><kernel> a <num> 1 </num><type> verilog </type><clk> c </clk><aresetn> r "
                    "</aresetn><s_axis><scope> local </scope><name> i </name></s_axis><m_axis><name> o "
                    "</name></m_axis></kernel></cluster>", "scope 'local' is not supported"),
    (parse_logical, "<cluster><kernel> a <num> 1 </num><type> fpga </type><s_axis><name> i </name></s_axis>"
                    "<m_axis><name> o </name></m_axis></kernel></cluster>", "type must be one of"),
    (parse_map, "<cluster><node><kernel> 1 </kernel></node></cluster>", "<type> is missing"),
    (parse_map, "<cluster><node><type> hw </type><board> pynq-z2 </board><autorun> yes </autorun></node>"
                "</cluster>", "<autorun> must be True or False"),
])
def test_parse_errors(parse, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(text)


# ---------------------------------------------------------------------------------------- placeholders

def test_placeholders_and_parts():
    d = Device(7, "hw", [1], board="pynq-z2")
    assert (d.mac, d.ip, d.part) == ("fa:16:3e:00:00:07", "10.1.2.7", "xc7z020clg400-1")
    assert (placeholder_mac(12), placeholder_ip(12)) == ("fa:16:3e:00:00:0c", "10.1.2.12")
    assert Device(1, "sw", [1]).part is None and Device(1, "sw", [1]).board is None


# ------------------------------------------------------------------------------------- check_cluster

def _case(change):
    kernels, devices, edges = small_cluster()
    change(kernels, devices, edges)
    return kernels, devices, edges


CHECK_ERRORS = {
    "zero id": (lambda k, d, e: k.__setitem__(0, sw_kernel(0, "host")),
                "kernel 0 (host): kernel ID 0 is reserved"),
    "id over 255": (lambda k, d, e: k.append(Kernel(256, "big")),
                    "kernel 256 (big): kernel IDs must be in 1..255"),
    "duplicate id": (lambda k, d, e: k.__setitem__(2, Kernel(2, "part1")),
                     "duplicate kernel ID 2: part0 and part1"),
    "not consecutive": (lambda k, d, e: k.__setitem__(2, Kernel(5, "part1")),
                        "kernel IDs must be consecutive from 1 (Galapagos numbers kernels 1..N): have [1, 2, 5], "
                        "missing [3]"),
    "lone kernel": (lambda k, d, e: (k.__delitem__(slice(1, 3)), d.__delitem__(slice(1, 3))),
                    "a Galapagos cluster needs at least two kernels and two nodes"),
    "device numbering": (lambda k, d, e: d.reverse(),
                         "devices must be numbered 1..3 in list order (their order in the map file), "
                         "got [3, 2, 1]"),
    "device without kernels": (lambda k, d, e: d.append(Device(4, "hw", [], board="pynq-z2")),
                               "device 4 (hw, pynq-z2) has no kernels"),
    "device lists unknown kernel": (lambda k, d, e: d.__setitem__(2, Device(3, "hw", [3, 9], board="pynq-z2")),
                                    "device 3 lists kernel 9, which is not a kernel of the cluster"),
    "kernel on two devices": (lambda k, d, e: d.__setitem__(1, Device(2, "hw", [2, 3], board="pynq-z2")),
                              "kernel 3 (part1) is on two devices, 2 and 3"),
    "kernel twice on one device": (lambda k, d, e: d.__setitem__(1, Device(2, "hw", [2, 2], board="pynq-z2")),
                                   "kernel 2 (part0) is twice on device 2"),
    "kernel on no device": (lambda k, d, e: k.append(Kernel(4, "part2")), "kernel 4 (part2) is on no device"),
    "hw kernel on sw device": (lambda k, d, e: (d.__setitem__(0, Device(1, "sw", [2])),
                                                d.__setitem__(1, Device(2, "hw", [1], board="pynq-z2"))),
                               "kernel 2 (part0) is a hardware kernel (type verilog) on sw device 1"),
    "sw kernel on hw device": (lambda k, d, e: (d.__setitem__(0, Device(1, "hw", [1], board="pynq-z2")),
                                                d.__setitem__(1, Device(2, "sw", [2]))),
                               "kernel 1 (host) is a software kernel (type sw) on hw device 1"),
    "edge unknown source": (lambda k, d, e: e.append((7, 2)), "edge (7, 2) names unknown source kernel 7"),
    "edge unknown destination": (lambda k, d, e: e.append((3, 0)),
                                 "edge (3, 0) names unknown destination kernel 0"),
    "edge not a pair": (lambda k, d, e: e.append((1, 2, 3)),
                        "edge (1, 2, 3) must be a (src kernel ID, dst kernel ID) pair"),
}


@pytest.mark.parametrize("name", CHECK_ERRORS)
def test_check_cluster_errors(name):
    change, message = CHECK_ERRORS[name]
    kernels, devices, edges = _case(change)
    with pytest.raises(ValueError, match=re.escape(message)):
        check_cluster(kernels, devices, edges)


def test_check_cluster_accepts_good_clusters():
    assert check_cluster(*small_cluster()) is None
    # several kernels on one board, edges as lists, no edges at all
    kernels = [sw_kernel(1), Kernel(2, "a"), Kernel(3, "b"), Kernel(4, "c")]
    devices = [Device(1, "sw", [1]), Device(2, "hw", [4, 2, 3], board="pynq-z2")]
    assert check_cluster(kernels, devices, [[1, 2], [2, 3], [3, 4], [4, 1]]) is None
    assert check_cluster(kernels, devices, []) is None


# -------------------------------------------------------------------------------------- dataclasses

@pytest.mark.parametrize("make, message", [
    (lambda: Kernel("1", "a"), "Kernel id must be an integer"),
    (lambda: Kernel(1, "a-b"), "Kernel name must be an identifier"),
    (lambda: Kernel(1, "a", type="hls"), "Kernel 1 (a) type must be one of verilog, system_verilog"),
    (lambda: Kernel(1, "a", clk=None), "Kernel 1 (a) clk must be an identifier"),
    (lambda: Kernel(1, "a", consts=[KernelConst("x", 2, 1), KernelConst("x", 2, 2)]), "name a port twice"),
    (lambda: KernelConst("x", 2, 4), "KernelConst x value must be an integer in 0..3"),
    (lambda: Device(0, "hw", [1], board="pynq-z2"), "Device index must be an integer >= 1"),
    (lambda: Device(1, "fpga", [1]), "Device 1 type must be one of hw, sw"),
    (lambda: Device(1, "hw", [1]), "Device 1 board must be a Galapagos board name"),
    (lambda: Device(1, "hw", [1], board="pynq-z2", comm="ethernet"), "Device 1 comm must be one of udp, tcp"),
    (lambda: Device(1, "hw", [1], board="mystery"), "board 'mystery' has no known FPGA part: give part="),
    (lambda: Device(1, "hw", ["1"], board="pynq-z2"), "kernels must be kernel IDs"),
    (lambda: Device(1, "hw", [1], board="pynq-z2", mac="fa:16:3e:00:00"), "mac must look like"),
    (lambda: Device(1, "hw", [1], board="pynq-z2", ip="10.1.2.256"), "ip must be an IPv4 address"),
    (lambda: Device(1, "sw", [1], autorun=True), "autorun applies to hw nodes only"),
    (lambda: map_xml([Device(2, "sw", [1])]), "devices must be listed in order with indices 1..1"),
])
def test_validation_errors(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_module_does_not_import_rtlgen():
    tree = ast.parse((Path(__file__).resolve().parents[1] / "galapagos" / "cluster.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "rtlgen" not in imported
