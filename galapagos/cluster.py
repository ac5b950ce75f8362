"""Galapagos cluster files: the logical file (kernels and their ports) and the map file (kernels onto nodes).

Source of the formats: the public repository UofT-HPRC/galapagos (read at commit ed44f092, 2025-02-17):
``README.md`` sections "LOGICALFILE" and "MAPFILE" (the documented elements), ``xml_examples/pynq/`` and
``xml_examples/one_hw_one_sw_device/`` (a pynq-z2 map, a sw + hw map), and the code that reads the files:
``middleware/python/cluster.py`` (``xmltodict`` without ``force_list``, values stripped of spaces; IDs of
``<rep>`` copies ``num + i``; kernel 0 and node 0 are its own gateway; a hw node's FPGA part is taken from
``<part>`` or from its small ``board_pairs`` table, which lacks pynq-z2), the accepted keys of
``middleware/python/kernel.py`` and ``node.py``, and ``middleware/python/tclFileGenerator.py`` (uses
``clk``, ``aresetn``, ``s_axis``/``m_axis`` names, ``id_port``, ``const`` {``name``, ``width``, ``val``}
and the node's ``comm``: ``tcp``/``udp`` (README), ``eth``/``raw`` (older raw-Ethernet routers)). The
board -> part table comes from Galapagos' ``init.sh`` (``galapagos-update-board``).

Logical file, one ``<kernel>`` per kernel (the kernel name is the element's text, before its children)::

    <cluster>
        <userIpPath>/path/to/verilog</userIpPath>            (optional: where <name>.v lives)
        <kernel> name
            <num> 1 </num>                                   (kernel ID: from 1, consecutive)
            <type> verilog </type>                           (sw for a libGalapagos software kernel)
            <clk> ap_clk </clk>  <aresetn> ap_rst_n </aresetn>   (active-low reset)
            <id_port> id </id_port>                          (optional: tied to the kernel ID)
            <s_axis> <scope> global </scope> <name> s_axis_0 </name> </s_axis>
            <m_axis> <scope> global </scope> <name> m_axis_0 </name> </m_axis>
            <const> <name> c </name> <width> 8 </width> <val> 3 </val> </const>   (optional, repeatable)
        </kernel>
    </cluster>

Map file, one ``<node>`` per device, in device order (Galapagos numbers them 1, 2, ... -- node 0 is its
gateway -- and builds node ``N``'s project in ``projects/<name>/N``, so :attr:`Device.index` is that
number)::

    <cluster>
        <node>
            <board> pynq-z2 </board> <comm> udp </comm> <type> hw </type> <part> xc7z020clg400-1 </part>
            <kernel> 1 </kernel> <kernel> 2 </kernel>          (one element per kernel ID)
            <autorun> False </autorun>                       (hw only)
            <mac> fa:16:3e:00:00:01 </mac> <ip> 10.1.2.1 </ip>
        </node>
        <node> <comm> udp </comm> <type> sw </type> <kernel> 3 </kernel> <mac> .. </mac> <ip> .. </ip> </node>
    </cluster>

The host's pre/post processing is a software kernel (``<type> sw </type>``, see :func:`sw_kernel`) on a
``<type> sw </type>`` node: libGalapagos runs it on a CPU and exchanges packets with the FPGA kernels.

The writers format the files like Galapagos' examples (values padded with one space, four-space indent)
and validate only what they write; :func:`check_cluster` checks that kernels, devices and stream edges
fit together and should run before writing. Nothing here imports ``rtlgen``.
"""

import ipaddress
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from galapagos.bridges import ID_BITS

__all__ = ["KERNEL_TYPES", "HW_KERNEL_TYPES", "DEVICE_TYPES", "COMMS", "BOARD_PARTS", "MAX_KERNEL_ID",
           "KernelConst", "Kernel", "Device", "sw_kernel", "placeholder_mac", "placeholder_ip",
           "logical_xml", "map_xml", "parse_logical", "parse_map", "check_cluster"]

# Galapagos README, LOGICALFILE: "The <type> can be sw, open, ip, vhdl, system_verilog, tcl, verilog,
# cpp_viv, or cpp_vit"; sw is a libGalapagos software kernel, every other type is hardware.
KERNEL_TYPES = ("verilog", "system_verilog", "vhdl", "ip", "open", "tcl", "cpp_viv", "cpp_vit", "sw")
HW_KERNEL_TYPES = tuple(t for t in KERNEL_TYPES if t != "sw")
DEVICE_TYPES = ("hw", "sw")                     # MAPFILE: sw for a CPU node, hw for an FPGA node
COMMS = ("udp", "tcp", "eth", "raw")            # tclFileGenerator.py routers; the README documents tcp/udp
MAX_KERNEL_ID = (1 << ID_BITS) - 1              # TDEST/TID carry 8-bit kernel IDs (bridges.py)

# FPGA part of each Galapagos board (init.sh, galapagos-update-board; cluster.py board_pairs adds vck5000).
# map_xml writes <part> on every hw node: Galapagos' cluster.py only knows the parts of a few boards.
BOARD_PARTS = {
    "pynq-z2": "xc7z020clg400-1",
    "zedboard": "xc7z020clg484-1",
    "sidewinder": "xczu19eg-ffvc1760-2-i",
    "adm-8k5": "xcku115-flva1517-2-e",
    "adm-8k5-debug": "xcku115-flva1517-2-e",
    "u200": "xcu200-fsgd2104-2-e",
    "u250": "xcu250-figd2104-2l-e",
    "u280": "xcu280-fsvh2892-2l-e",
    "vck5000": "xcvc1902-vsvd1760-2mp-e-s",
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAC = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}\Z")
_INDENT = "    "
_PLACEHOLDER_NOTE = ("The <mac> and <ip> values written as fa:16:3e:00:00:NN and 10.1.2.N (N = the node's "
                     "number) are placeholders: replace them with each node's real MAC and IP address "
                     "before running Galapagos.")


def placeholder_mac(index):
    """Placeholder MAC of device ``index``: ``fa:16:3e:00:00:NN`` (NN = index in hex; a locally administered
    unicast address, the prefix Galapagos' own examples use). The user replaces it with the real one."""
    return f"fa:16:3e:00:00:{index:02x}"


def placeholder_ip(index):
    """Placeholder IPv4 address of device ``index``: ``10.1.2.N``. The user replaces it with the real one."""
    return f"10.1.2.{index}"


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_ident(owner, name, value, optional=False):
    if value is None and optional:
        return
    if not isinstance(value, str) or not _IDENT.match(value):
        legal = "an identifier ([A-Za-z_][A-Za-z0-9_]*)" + (" or None" if optional else "")
        raise ValueError(f"{owner} {name} must be {legal}, not {value!r}")


def _check_choice(owner, name, value, legal):
    if value not in legal:
        raise ValueError(f"{owner} {name} must be one of {', '.join(legal)}, not {value!r}")


# ------------------------------------------------------------------------------------ dataclasses

@dataclass(frozen=True)
class KernelConst:
    """A kernel input port tied to a constant (logical file ``<const>``: ``name``, ``width``, ``val``)."""
    name: str
    width: int
    value: int

    def __post_init__(self):
        _check_ident("KernelConst", "name", self.name)
        if not _is_int(self.width) or self.width < 1:
            raise ValueError(f"KernelConst {self.name} width must be an integer >= 1, not {self.width!r}")
        if not _is_int(self.value) or not 0 <= self.value < (1 << self.width):
            raise ValueError(f"KernelConst {self.name} value must be an integer in 0..{(1 << self.width) - 1} "
                             f"(width {self.width}), not {self.value!r}")


@dataclass(frozen=True)
class Kernel:
    """One Galapagos kernel of the logical file.

    Fields
    ------
    id : kernel ID (``<num>``); a cluster numbers its kernels 1..N (:func:`check_cluster` checks it), and
        packets address kernels by it (TDEST, TID)
    name : the kernel's name: for type ``verilog`` the top module, in ``<userIpPath>/<name>.v``; for
        type ``sw`` the C++ function libGalapagos runs
    type : one of ``KERNEL_TYPES``; ``verilog`` for a generated Verilog kernel, ``sw`` for host code
    clk : clock port (tied to Galapagos' 200 MHz application clock); required unless ``type == "sw"``
    aresetn : active-low reset port; required unless ``type == "sw"``
    s_axis, m_axis : names of the input and output AXI-Stream interfaces (scope ``global``)
    id_port : optional port tied to a constant equal to the kernel ID
    consts : ports tied to constants (a tuple of :class:`KernelConst`; a list is converted)
    """
    id: int
    name: str
    type: str = "verilog"
    clk: str | None = "ap_clk"
    aresetn: str | None = "ap_rst_n"
    s_axis: str = "s_axis_0"
    m_axis: str = "m_axis_0"
    id_port: str | None = None
    consts: tuple = field(default=())

    def __post_init__(self):
        if not _is_int(self.id):
            raise ValueError(f"Kernel id must be an integer, not {self.id!r}")
        _check_ident("Kernel", "name", self.name)
        owner = f"Kernel {self.id} ({self.name})"
        _check_choice(owner, "type", self.type, KERNEL_TYPES)
        hardware = self.type != "sw"
        _check_ident(owner, "clk", self.clk, optional=not hardware)
        _check_ident(owner, "aresetn", self.aresetn, optional=not hardware)
        _check_ident(owner, "s_axis", self.s_axis)
        _check_ident(owner, "m_axis", self.m_axis)
        _check_ident(owner, "id_port", self.id_port, optional=True)
        consts = tuple(self.consts)
        for c in consts:
            if not isinstance(c, KernelConst):
                raise ValueError(f"{owner} consts must hold KernelConst values, not {c!r}")
        names = [c.name for c in consts]
        if len(set(names)) != len(names):
            raise ValueError(f"{owner} consts name a port twice: {names}")
        object.__setattr__(self, "consts", consts)


def sw_kernel(id, name="host", s_axis="s_axis_0", m_axis="m_axis_0"):
    """A software kernel (``type`` ``sw``, no clock or reset), e.g. the host's pre/post processing."""
    return Kernel(id=id, name=name, type="sw", clk=None, aresetn=None, s_axis=s_axis, m_axis=m_axis)


@dataclass(frozen=True)
class Device:
    """One Galapagos node of the map file: an FPGA (``hw``) or a CPU running libGalapagos (``sw``).

    Fields
    ------
    index : the node's number, 1..M in map-file order (Galapagos' node number and project directory;
        node 0 is Galapagos' gateway)
    type : ``hw`` or ``sw``
    kernels : IDs of the kernels placed on the node (a tuple; a list is converted)
    board : Galapagos board name (``pynq-z2``, ``sidewinder``, ``u250``, ...); required for ``hw``,
        optional (None) for ``sw``
    comm : network protocol of the node, one of ``COMMS``; ``udp`` by default (README: tcp or udp)
    mac, ip : the node's MAC and IPv4 address; None gives the placeholders :func:`placeholder_mac` and
        :func:`placeholder_ip` of ``index``, which the user replaces with the real addresses
    autorun : hw only: Galapagos runs synthesis to bitstream by itself (no ``open`` kernels allowed)
    part : hw only: the FPGA part; None takes it from ``BOARD_PARTS`` (an unknown board needs it given)
    """
    index: int
    type: str
    kernels: tuple
    board: str | None = None
    comm: str = "udp"
    mac: str | None = None
    ip: str | None = None
    autorun: bool = False
    part: str | None = None

    def __post_init__(self):
        if not _is_int(self.index) or self.index < 1:
            raise ValueError(f"Device index must be an integer >= 1 (Galapagos' node 0 is its gateway), "
                             f"not {self.index!r}")
        owner = f"Device {self.index}"
        _check_choice(owner, "type", self.type, DEVICE_TYPES)
        kernels = tuple(self.kernels)
        for k in kernels:
            if not _is_int(k):
                raise ValueError(f"{owner} kernels must be kernel IDs (integers), not {k!r}")
        object.__setattr__(self, "kernels", kernels)
        hardware = self.type == "hw"
        if hardware or self.board is not None:
            if not isinstance(self.board, str) or not self.board.strip() or self.board != self.board.strip():
                raise ValueError(f"{owner} board must be a Galapagos board name (e.g. pynq-z2)"
                                 f"{'' if hardware else ' or None'}, not {self.board!r}")
        _check_choice(owner, "comm", self.comm, COMMS)
        if self.mac is None:
            object.__setattr__(self, "mac", placeholder_mac(self.index))
        elif not isinstance(self.mac, str) or not _MAC.match(self.mac):
            raise ValueError(f"{owner} mac must look like 0c:c4:7a:88:bd:83, not {self.mac!r}")
        if self.ip is None:
            object.__setattr__(self, "ip", placeholder_ip(self.index))
        else:
            try:
                ipaddress.IPv4Address(self.ip)
            except (ipaddress.AddressValueError, TypeError):
                raise ValueError(f"{owner} ip must be an IPv4 address like 10.1.2.1, not {self.ip!r}") from None
        if not isinstance(self.autorun, bool):
            raise ValueError(f"{owner} autorun must be True or False, not {self.autorun!r}")
        if not hardware:
            if self.autorun:
                raise ValueError(f"{owner} autorun applies to hw nodes only")
            if self.part is not None:
                raise ValueError(f"{owner} part applies to hw nodes only, not {self.part!r}")
        elif self.part is None:
            if self.board not in BOARD_PARTS:
                raise ValueError(f"{owner} board {self.board!r} has no known FPGA part: give part= "
                                 f"(known boards: {', '.join(BOARD_PARTS)})")
            object.__setattr__(self, "part", BOARD_PARTS[self.board])
        elif not isinstance(self.part, str) or not self.part.strip() or self.part != self.part.strip():
            raise ValueError(f"{owner} part must be an FPGA part name (e.g. xc7z020clg400-1), not {self.part!r}")


# ----------------------------------------------------------------------------------------- writers

def _leaf(depth, tag, value):
    return f"{_INDENT * depth}<{tag}> {escape(str(value))} </{tag}>"


def _stream(depth, tag, name):
    return [f"{_INDENT * depth}<{tag}>", _leaf(depth + 1, "scope", "global"), _leaf(depth + 1, "name", name),
            f"{_INDENT * depth}</{tag}>"]


def logical_xml(kernels, user_ip_path=None):
    """The Galapagos logical file of ``kernels`` (in the given order), as a string.

    ``user_ip_path``, if given, is written as ``<userIpPath>``: the directory Galapagos takes a ``verilog``
    kernel's ``<name>.v`` from. Run :func:`check_cluster` first: this writes what it is given.
    """
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<!-- Galapagos logical file (format: UofT-HPRC/galapagos README.md, LOGICALFILE). -->",
             "<cluster>"]
    if user_ip_path is not None:
        if not isinstance(user_ip_path, str) or not user_ip_path.strip():
            raise ValueError(f"user_ip_path must be a directory path, not {user_ip_path!r}")
        lines.append(f"{_INDENT}<userIpPath>{escape(str(user_ip_path))}</userIpPath>")
    for k in kernels:
        if not isinstance(k, Kernel):
            raise ValueError(f"logical_xml takes Kernel values, not {k!r}")
        lines.append(f"{_INDENT}<kernel> {k.name}")
        lines.append(_leaf(2, "num", k.id))
        lines.append(_leaf(2, "type", k.type))
        if k.clk is not None:
            lines.append(_leaf(2, "clk", k.clk))
        if k.aresetn is not None:
            lines.append(_leaf(2, "aresetn", k.aresetn))
        if k.id_port is not None:
            lines.append(_leaf(2, "id_port", k.id_port))
        lines += _stream(2, "s_axis", k.s_axis)
        lines += _stream(2, "m_axis", k.m_axis)
        for c in k.consts:
            lines += [f"{_INDENT * 2}<const>", _leaf(3, "name", c.name), _leaf(3, "width", c.width),
                      _leaf(3, "val", c.value), f"{_INDENT * 2}</const>"]
        lines.append(f"{_INDENT}</kernel>")
    lines.append("</cluster>")
    return "\n".join(lines) + "\n"


def map_xml(devices):
    """The Galapagos map file of ``devices``, as a string. The nodes' order is their numbering, so
    ``devices`` must be listed with indices 1, 2, ..., M. Run :func:`check_cluster` first."""
    devices = list(devices)
    for d in devices:
        if not isinstance(d, Device):
            raise ValueError(f"map_xml takes Device values, not {d!r}")
    indices = [d.index for d in devices]
    if indices != list(range(1, len(devices) + 1)):
        raise ValueError(f"map_xml: devices must be listed in order with indices 1..{len(devices)} (a node's "
                         f"number is its position in the map file), got {indices}")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<!-- Galapagos map file (format: UofT-HPRC/galapagos README.md, MAPFILE). -->",
             f"<!-- {_PLACEHOLDER_NOTE} -->",
             "<cluster>"]
    for d in devices:
        lines.append(f"{_INDENT}<node>")
        if d.board is not None:
            lines.append(_leaf(2, "board", d.board))
        lines.append(_leaf(2, "comm", d.comm))
        lines.append(_leaf(2, "type", d.type))
        if d.part is not None:
            lines.append(_leaf(2, "part", d.part))
        lines += [_leaf(2, "kernel", k) for k in d.kernels]
        if d.type == "hw":
            lines.append(_leaf(2, "autorun", "True" if d.autorun else "False"))
        lines.append(_leaf(2, "mac", d.mac))
        lines.append(_leaf(2, "ip", d.ip))
        lines.append(f"{_INDENT}</node>")
    lines.append("</cluster>")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------- parsers

def _root(text, what):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError(f"{what}: not well-formed XML: {e}") from None
    if root.tag != "cluster":
        raise ValueError(f"{what}: the root element must be <cluster>, not <{root.tag}>")
    return root


def _own_text(elem):
    """The element's own character data (before, between and after its children), stripped, the way
    xmltodict's ``#text`` reads a ``<kernel> name ...`` element."""
    return "".join([elem.text or ""] + [child.tail or "" for child in elem]).strip()


def _child(elem, tag, what, required=False):
    found = elem.findall(tag)
    if len(found) > 1:
        raise ValueError(f"{what}: <{tag}> appears {len(found)} times")
    if not found:
        if required:
            raise ValueError(f"{what}: <{tag}> is missing")
        return None
    return found[0].text.strip() if found[0].text else ""


def _int(value, what, tag):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: <{tag}> must be an integer, not {value!r}") from None


def _stream_name(elem, tag, what):
    found = elem.findall(tag)
    if len(found) != 1:
        raise ValueError(f"{what}: expected one <{tag}>, found {len(found)}")
    scope = _child(found[0], "scope", f"{what} <{tag}>")
    if scope is not None and scope != "global":
        raise ValueError(f"{what}: <{tag}> scope {scope!r} is not supported (only global)")
    return _child(found[0], "name", f"{what} <{tag}>", required=True)


def parse_logical(text):
    """The kernels of a Galapagos logical file, in file order, as :class:`Kernel` values.

    A ``<rep> n </rep>`` kernel gives ``n`` kernels with IDs ``num, num + 1, ...`` (as Galapagos does).
    Elements this module does not model (``userIpPath``, ``clusterNumber``, ``control``, ``wan``, ``vendor``,
    ``s_axi``, ...) are ignored. Raises ValueError on malformed XML or a malformed kernel.
    """
    root = _root(text, "logical file")
    kernels = []
    for n, elem in enumerate(root.findall("kernel"), 1):
        name = _own_text(elem)
        what = f"logical file, kernel {n} ({name or 'no name'})"
        num = _int(_child(elem, "num", what, required=True), what, "num")
        rep = _int(_child(elem, "rep", what) or "1", what, "rep")
        if rep < 1:
            raise ValueError(f"{what}: <rep> must be >= 1, not {rep}")
        consts = []
        for c in elem.findall("const"):
            cwhat = f"{what} <const>"
            consts.append(KernelConst(name=_child(c, "name", cwhat, required=True),
                                      width=_int(_child(c, "width", cwhat, required=True), cwhat, "width"),
                                      value=_int(_child(c, "val", cwhat, required=True), cwhat, "val")))
        common = dict(name=name, type=_child(elem, "type", what, required=True),
                      clk=_child(elem, "clk", what), aresetn=_child(elem, "aresetn", what),
                      s_axis=_stream_name(elem, "s_axis", what), m_axis=_stream_name(elem, "m_axis", what),
                      id_port=_child(elem, "id_port", what), consts=tuple(consts))
        try:
            kernels += [Kernel(id=num + i, **common) for i in range(rep)]
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    return kernels


def _bool(value, what, tag):
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{what}: <{tag}> must be True or False, not {value!r}")
    return value.lower() == "true"


def parse_map(text):
    """The nodes of a Galapagos map file, as :class:`Device` values numbered 1, 2, ... in file order.

    A multi-SLR ``<kernel>`` (``<num>`` and ``<slr>`` children) gives its ``<num>``; ``<slr>``, ``<dns>``
    and other elements this module does not model are ignored. Raises ValueError on malformed XML or a
    malformed node.
    """
    root = _root(text, "map file")
    devices = []
    for index, elem in enumerate(root.findall("node"), 1):
        what = f"map file, node {index}"
        kernels = []
        for k in elem.findall("kernel"):
            value = _child(k, "num", what, required=True) if k.find("num") is not None else (k.text or "").strip()
            kernels.append(_int(value, what, "kernel"))
        autorun = _child(elem, "autorun", what)
        try:
            devices.append(Device(index=index, type=_child(elem, "type", what, required=True),
                                  kernels=tuple(kernels), board=_child(elem, "board", what),
                                  comm=_child(elem, "comm", what) or "udp",
                                  mac=_child(elem, "mac", what), ip=_child(elem, "ip", what),
                                  autorun=False if autorun is None else _bool(autorun, what, "autorun"),
                                  part=_child(elem, "part", what)))
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    return devices


# ---------------------------------------------------------------------------------------- checking

def _describe(kernel):
    return f"kernel {kernel.id} ({kernel.name})"


def check_cluster(kernels, devices, edges):
    """Check that ``kernels`` (:class:`Kernel`), ``devices`` (:class:`Device`) and the stream ``edges``
    (``(src kernel ID, dst kernel ID)`` pairs) form a cluster Galapagos can build. Returns None; raises
    ValueError with one message naming the first problem found:

    - a kernel ID outside 1..255 (0 is Galapagos' gateway; TDEST/TID are 8 bits), a duplicate ID, or IDs
      that are not consecutive from 1 (Galapagos README: "IDs must start at 1 and be consecutive");
    - fewer than two kernels or two nodes (Galapagos' parser reads a lone ``<kernel>`` or ``<node>`` as a
      dict, not a list, and fails);
    - device indices that are not 1..M in list order;
    - a device with no kernels, or listing an ID that is no kernel's;
    - a kernel on no device, on two devices, or twice on one;
    - a software kernel (type ``sw``) on a hw device, or a hardware kernel on a sw device;
    - an edge that is not a pair of IDs, or names an unknown kernel.
    """
    kernels, devices, edges = list(kernels), list(devices), list(edges)
    for k in kernels:
        if not isinstance(k, Kernel):
            raise ValueError(f"check_cluster: kernels must be Kernel values, not {k!r}")
    for d in devices:
        if not isinstance(d, Device):
            raise ValueError(f"check_cluster: devices must be Device values, not {d!r}")

    by_id = {}
    for k in kernels:
        if k.id == 0:
            raise ValueError(f"{_describe(k)}: kernel ID 0 is reserved (Galapagos' gateway); IDs start at 1")
        if not 1 <= k.id <= MAX_KERNEL_ID:
            raise ValueError(f"{_describe(k)}: kernel IDs must be in 1..{MAX_KERNEL_ID} "
                             f"({ID_BITS}-bit TDEST/TID), not {k.id}")
        if k.id in by_id:
            raise ValueError(f"duplicate kernel ID {k.id}: {by_id[k.id].name} and {k.name}")
        by_id[k.id] = k
    missing = sorted(set(range(1, len(kernels) + 1)) - set(by_id))
    if missing:
        raise ValueError(f"kernel IDs must be consecutive from 1 (Galapagos numbers kernels 1..N): "
                         f"have {sorted(by_id)}, missing {missing}")
    if len(kernels) < 2 or len(devices) < 2:
        raise ValueError(f"a Galapagos cluster needs at least two kernels and two nodes (its parser cannot "
                         f"read a lone <kernel> or <node>), got {len(kernels)} kernel(s) and "
                         f"{len(devices)} device(s); put the host's software kernel on a sw node")

    indices = [d.index for d in devices]
    if indices != list(range(1, len(devices) + 1)):
        raise ValueError(f"devices must be numbered 1..{len(devices)} in list order (their order in the map "
                         f"file), got {indices}")
    placed = {}
    for d in devices:
        if not d.kernels:
            raise ValueError(f"device {d.index} ({d.type}{', ' + d.board if d.board else ''}) has no kernels")
        for kid in d.kernels:
            if kid not in by_id:
                raise ValueError(f"device {d.index} lists kernel {kid}, which is not a kernel of the cluster "
                                 f"(IDs {sorted(by_id)})")
            k = by_id[kid]
            if kid in placed:
                where = (f"twice on device {d.index}" if placed[kid] == d.index
                         else f"on two devices, {placed[kid]} and {d.index}")
                raise ValueError(f"{_describe(k)} is {where}")
            placed[kid] = d.index
            if (k.type == "sw") != (d.type == "sw"):
                kind = "software" if k.type == "sw" else "hardware"
                raise ValueError(f"{_describe(k)} is a {kind} kernel (type {k.type}) on {d.type} device "
                                 f"{d.index}: sw kernels go on sw nodes, hardware kernels on hw nodes")
    for k in kernels:
        if k.id not in placed:
            raise ValueError(f"{_describe(k)} is on no device")

    for e in edges:
        if not (isinstance(e, (tuple, list)) and len(e) == 2 and all(_is_int(x) for x in e)):
            raise ValueError(f"edge {e!r} must be a (src kernel ID, dst kernel ID) pair")
        for role, kid in zip(("source", "destination"), e):
            if kid not in by_id:
                raise ValueError(f"edge {tuple(e)} names unknown {role} kernel {kid} (IDs {sorted(by_id)})")
    return None
