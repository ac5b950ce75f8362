"""Galapagos multi-FPGA support: the stream bridges between a layer's AXI-Stream words and Galapagos flits
(two ops, found by :func:`layers.op.discover` like the layers'),
and the cluster files (logical file, map file) that tell Galapagos which kernels run on which node.

Galapagos (UofT-HPRC) connects kernels across FPGAs with a packet stream whose flits carry TDATA, TKEEP,
TLAST, TDEST (destination kernel ID) and TID (sender kernel ID); reference/galapagos.md describes it.
This package depends on ``layers`` (for :class:`layers.op.Resources`) and on nothing of ``rtlgen``: the
compiler's partition pass imports it, never the other way round.
"""

from galapagos.bridges import FLIT_WIDTHS, ID_BITS, flit_layout
from galapagos.from_galapagos import FromGalapagos, FromGalapagosSpec
from galapagos.to_galapagos import ToGalapagos, ToGalapagosSpec
from galapagos.cluster import (BOARD_PARTS, COMMS, DEVICE_TYPES, HW_KERNEL_TYPES, KERNEL_TYPES, MAX_KERNEL_ID,
                               Device, Kernel, KernelConst, check_cluster, logical_xml, map_xml, parse_logical,
                               parse_map, placeholder_ip, placeholder_mac, sw_kernel)

__all__ = ["FLIT_WIDTHS", "ID_BITS", "flit_layout", "ToGalapagosSpec", "ToGalapagos", "FromGalapagosSpec",
           "FromGalapagos",
           "KERNEL_TYPES", "HW_KERNEL_TYPES", "DEVICE_TYPES", "COMMS", "BOARD_PARTS", "MAX_KERNEL_ID",
           "KernelConst", "Kernel", "Device", "sw_kernel", "placeholder_mac", "placeholder_ip",
           "logical_xml", "map_xml", "parse_logical", "parse_map", "check_cluster"]
