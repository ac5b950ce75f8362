"""Amaranth platform for the TUL PYNQ-Z2 (Zynq-7020, xc7z020-clg400-1), in the style of amaranth-boards.

Pins follow the PYNQ-Z2 master XDC (``pynq-z2_v1.0.xdc``, "This file is a general .xdc for the
PYNQ-Z2 board"); the ``Sch=`` net name of each pin is given in the comments. They were cross-checked
against the PYNQ base/logictools overlay constraints for the Pynq-Z2 (``Xilinx/PYNQ``,
``boards/Pynq-Z2/{base,logictools}/vivado/constraints/*.xdc``). The PYNQ-Z2 is not a PYNQ-Z1: where
the Z1 has the inner chipKIT digital/analog header, the Z2 has a Raspberry Pi header, and the audio
path is an ADAU1761 codec instead of a PWM output.

Resources
    clk125       H16 (Sch=sysclk), 125 MHz, LVCMOS33.
    led 0..3     LD0..LD3.
    rgb_led 0, 1 LD4, LD5.
    button 0..3  BTN0..BTN3 (amaranth-boards name "button", as ``ButtonResources`` makes it).
    switch 0, 1  SW0, SW1 (amaranth-boards name "switch", as ``SwitchResources`` makes it).

Connectors and their pin numbering
    pmod 0 (JA), pmod 1 (JB)
        Pmod physical pins 1..12 (5, 6, 11, 12 are GND/VCC, given as "-"); pins 1-4 are Sch=ja[0..3]
        (jb[0..3]), pins 7-10 are Sch=ja[4..7] (jb[4..7]).
    ck_io 0      Arduino shield (J3/J4 digital, J1 analog used as digital), keyed by net name:
        "io0".."io13" = Sch=ar[0..13] (D0..D13), "a0".."a5" = Sch=a[0..5] (A0..A5 as digital I/O),
        "a" = Sch=a (Y13).
    ck_spi 0     Arduino SPI header: "cipo" (Sch=miso), "copi" (Sch=ar_mosi_r), "sck", "ss".
    ck_i2c 0     Arduino I2C: "scl" (Sch=ar_scl, P16), "sda" (Sch=ar_sda, P15).
    xadc 0       Arduino A0..A5 as XADC auxiliary inputs, keyed "vauxN_p"/"vauxN_n" (Sch=ar_anK_p/n).
    rpi 0        Raspberry Pi 40-pin header, keyed by PHYSICAL header pin 1..40 (power and ground
        pins are "-"). Physical pin -> Broadcom GPIO name (Sch=rpio_NN_r) -> FPGA pin:
             3 GPIO2  W18     5 GPIO3  W19     7 GPIO4  Y18     8 GPIO14 V6
            10 GPIO15 Y6     11 GPIO17 U7     12 GPIO18 C20    13 GPIO27 V7
            15 GPIO22 U8     16 GPIO23 W6     18 GPIO24 Y7     19 GPIO10 V8
            21 GPIO9  V10    22 GPIO25 F20    23 GPIO11 W10    24 GPIO8  F19
            26 GPIO7  U19    27 GPIO0  Y16    28 GPIO1  Y17    29 GPIO5  Y19
            31 GPIO6  U18    32 GPIO12 B20    33 GPIO13 W8     35 GPIO19 Y8
            36 GPIO16 B19    37 GPIO26 W9     38 GPIO20 A20    40 GPIO21 Y9
        GPIO0/GPIO1 are Sch=rpio_sd_r/rpio_sc_r (ID_SD/ID_SC). GPIO27 (V7) is not in the master XDC;
        it is taken from the PYNQ Pynq-Z2 overlay constraints (rpi_gpio[19] / rp_pg_clk).

Shared pins
    On the PYNQ-Z2 the eight Pmod JA signals are wired to Raspberry Pi GPIO0..GPIO7 as well (the
    PYNQ base overlay says "RPi GPIO 7-0 are shared with pmoda"), so the pins Y18 Y19 Y16 Y17 U18
    U19 W18 W19 appear in both ``pmod 0`` and ``rpi 0``. Use only one of the two at a time.
    No other FPGA pin appears twice.
"""

from amaranth.build import *
from amaranth.vendor import XilinxPlatform

from amaranth_boards.resources import *


__all__ = ["PynqZ2Platform"]


class PynqZ2Platform(XilinxPlatform):
    device      = "xc7z020"
    package     = "clg400"
    speed       = "1"
    default_clk = "clk125"
    resources   = [
        Resource("clk125", 0,                                   # Sch=sysclk
            Pins("H16", dir="i"), Clock(125e6), Attrs(IOSTANDARD="LVCMOS33")),

        *LEDResources(                                          # Sch=led[0..3] (LD0..LD3)
            pins="R14 P14 N16 M14",
            attrs=Attrs(IOSTANDARD="LVCMOS33")),

        RGBLEDResource(0,                                       # LD4, Sch=led4_r/g/b
            r="N15", g="G17", b="L15",
            attrs=Attrs(IOSTANDARD="LVCMOS33")),
        RGBLEDResource(1,                                       # LD5, Sch=led5_r/g/b
            r="M15", g="L14", b="G14",
            attrs=Attrs(IOSTANDARD="LVCMOS33")),

        *ButtonResources(                                       # Sch=btn[0..3] (BTN0..BTN3)
            pins="D19 D20 L20 L19",
            attrs=Attrs(IOSTANDARD="LVCMOS33")),

        *SwitchResources(                                       # Sch=sw[0..1] (SW0, SW1)
            pins="M20 M19",
            attrs=Attrs(IOSTANDARD="LVCMOS33")),
    ]
    connectors  = [
        # Pmod physical pins 1-4, (GND, VCC), 7-10, (GND, VCC).
        Connector("pmod", 0, "Y18 Y19 Y16 Y17 - - U18 U19 W18 W19 - -"),  # JA, Sch=ja_p/ja_n
        Connector("pmod", 1, "W14 Y14 T11 T10 - - V16 W16 V12 W13 - -"),  # JB, Sch=jb_p/jb_n

        Connector("ck_io", 0, {
            # Digital header, Sch=ar[0..13]
            "io0":  "T14",
            "io1":  "U12",
            "io2":  "U13",
            "io3":  "V13",
            "io4":  "V15",
            "io5":  "T15",
            "io6":  "R16",
            "io7":  "U17",
            "io8":  "V17",
            "io9":  "V18",
            "io10": "T16",
            "io11": "R17",
            "io12": "P18",
            "io13": "N17",

            # Analog header A0..A5 used as digital I/O, Sch=a[0..5]
            "a0": "Y11",
            "a1": "Y12",
            "a2": "W11",
            "a3": "V11",
            "a4": "T5",
            "a5": "U10",

            # Sch=a
            "a": "Y13",
        }),

        Connector("ck_spi", 0, {
            "cipo": "W15",                                      # Sch=miso
            "copi": "T12",                                      # Sch=ar_mosi_r
            "sck":  "H15",                                      # Sch=sck
            "ss":   "F16",                                      # Sch=ss
        }),

        Connector("ck_i2c", 0, {
            "scl": "P16",                                       # Sch=ar_scl
            "sda": "P15",                                       # Sch=ar_sda
        }),

        Connector("xadc", 0, {
            # Arduino A0..A5 as XADC inputs, Sch=ar_an0..5_p/n
            "vaux1_p":  "E17", "vaux1_n":  "D18",               # A0
            "vaux9_p":  "E18", "vaux9_n":  "E19",               # A1
            "vaux6_p":  "K14", "vaux6_n":  "J14",               # A2
            "vaux15_p": "K16", "vaux15_n": "J16",               # A3
            "vaux5_p":  "J20", "vaux5_n":  "H20",               # A4
            "vaux13_p": "G19", "vaux13_n": "G20",               # A5
        }),

        # Raspberry Pi header, physical pins 1..40 (see the module docstring for the GPIO names).
        # GPIO0..GPIO7 share their FPGA pins with Pmod JA.
        Connector("rpi", 0,
            "-   -   "      #  1 3V3,    2 5V
            "W18 -   "      #  3 GPIO2,  4 5V
            "W19 -   "      #  5 GPIO3,  6 GND
            "Y18 V6  "      #  7 GPIO4,  8 GPIO14
            "-   Y6  "      #  9 GND,   10 GPIO15
            "U7  C20 "      # 11 GPIO17, 12 GPIO18
            "V7  -   "      # 13 GPIO27, 14 GND
            "U8  W6  "      # 15 GPIO22, 16 GPIO23
            "-   Y7  "      # 17 3V3,   18 GPIO24
            "V8  -   "      # 19 GPIO10, 20 GND
            "V10 F20 "      # 21 GPIO9,  22 GPIO25
            "W10 F19 "      # 23 GPIO11, 24 GPIO8
            "-   U19 "      # 25 GND,   26 GPIO7
            "Y16 Y17 "      # 27 GPIO0 (ID_SD), 28 GPIO1 (ID_SC)
            "Y19 -   "      # 29 GPIO5,  30 GND
            "U18 B20 "      # 31 GPIO6,  32 GPIO12
            "W8  -   "      # 33 GPIO13, 34 GND
            "Y8  B19 "      # 35 GPIO19, 36 GPIO16
            "W9  A20 "      # 37 GPIO26, 38 GPIO20
            "-   Y9  "),    # 39 GND,   40 GPIO21
    ]

    def __init__(self, *, toolchain="Vivado"):
        super().__init__(toolchain=toolchain)


if __name__ == "__main__":
    from amaranth_boards.test.blinky import Blinky
    PynqZ2Platform().build(Blinky(), do_program=False)
