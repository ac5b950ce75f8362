"""Galapagos multi-FPGA support: the stream bridges between a layer's AXI-Stream words and Galapagos flits.

Galapagos (UofT-HPRC) connects kernels across FPGAs with a packet stream whose flits carry TDATA, TKEEP,
TLAST, TDEST (destination kernel ID) and TID (sender kernel ID); reference/galapagos.md describes it.
This package depends on ``layers`` (for :class:`layers.op.Resources`) and on nothing of ``rtlgen``: the
compiler's partition pass imports it, never the other way round.
"""

from galapagos.bridges import (FLIT_WIDTHS, ID_BITS, FromGalapagos, FromGalapagosSpec, ToGalapagos,
                               ToGalapagosSpec, flit_layout)

__all__ = ["FLIT_WIDTHS", "ID_BITS", "flit_layout", "ToGalapagosSpec", "ToGalapagos", "FromGalapagosSpec",
           "FromGalapagos"]
