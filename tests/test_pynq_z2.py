"""PYNQ-Z2 platform: generated XDC for a tiny blinky (no Vivado run), board strings, pin uniqueness.

The expected pins below are written out by hand from the PYNQ-Z2 master XDC (pynq-z2_v1.0.xdc,
``Sch=`` names in the comments), independently of boards/pynq_z2.py.
"""

import re

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.build import Attrs, Pins, Resource, Subsignal
from amaranth.lib import io

from boards.pynq_z2 import PynqZ2Platform


# Port name as Amaranth writes it in the XDC (bit k of a multi-pin port is "name[k]") ->
# (FPGA pins, IOSTANDARD).
EXPECTED = {
    "clk125_0__io":     ("H16", "LVCMOS33"),   # Sch=sysclk
    "led_0__io":        ("R14", "LVCMOS33"),   # Sch=led[0]
    "rgb_led_0__r__io": ("N15", "LVCMOS33"),   # Sch=led4_r
    "button_0__io":     ("D19", "LVCMOS33"),   # Sch=btn[0]
    "switch_1__io":     ("M19", "LVCMOS33"),   # Sch=sw[1]
    # Connector pins, through probe resources added in the test.
    # JA pins 1, 10 = Sch=ja_p[1], ja_n[4]; JB pins 1, 10 = Sch=jb_p[1], jb_n[4]
    "probe_ja_0__io":   ("Y18 W19", "LVCMOS33"),
    "probe_jb_0__io":   ("W14 W13", "LVCMOS33"),
    # RPi physical pins 3, 13, 27, 40 = GPIO2, GPIO27, GPIO0 (ID_SD), GPIO21
    "probe_rpi_0__io":  ("W18 V7 Y16 Y9", "LVCMOS33"),
    # Arduino D0, D10, D13, A5 (digital) = Sch=ar[0], ar[10], ar[13], a[5]
    "probe_ard_0__io":  ("T14 T16 N17 U10", "LVCMOS33"),
    "probe_i2c_0__scl__io": ("P16", "LVCMOS33"),   # Sch=ar_scl
    "probe_i2c_0__sda__io": ("P15", "LVCMOS33"),   # Sch=ar_sda
}

# FPGA pins the PYNQ-Z2 wires to both Pmod JA and the Raspberry Pi header (RPi GPIO0..7).
JA_RPI_SHARED = {"Y18", "Y19", "Y16", "Y17", "U18", "U19", "W18", "W19"}


class _Blinky(Elaboratable):
    def elaborate(self, platform):
        m = Module()
        led = io.Buffer("o", platform.request("led", 0, dir="-"))
        red = io.Buffer("o", platform.request("rgb_led", 0, dir="-").r)
        btn = io.Buffer("i", platform.request("button", 0, dir="-"))
        sw = io.Buffer("i", platform.request("switch", 1, dir="-"))
        m.submodules += [led, red, btn, sw]

        probes = []
        for name in ("probe_ja", "probe_jb", "probe_rpi", "probe_ard"):
            probes.append(io.Buffer("o", platform.request(name, 0, dir="-")))
        i2c = platform.request("probe_i2c", 0, dir="-")
        probes += [io.Buffer("o", i2c.scl), io.Buffer("o", i2c.sda)]
        m.submodules += probes

        counter = Signal(27)
        m.d.sync += counter.eq(counter + 1)
        m.d.comb += [
            led.o.eq(counter[-1] ^ btn.i),
            red.o.eq(counter[-2] & sw.i),
        ]
        for probe in probes:
            m.d.comb += probe.o.eq(counter[:len(probe.o)])
        return m


@pytest.fixture(scope="module")
def xdc():
    platform = PynqZ2Platform()
    platform.add_resources([
        Resource("probe_ja", 0, Pins("1 10", dir="o", conn=("pmod", 0)),
            Attrs(IOSTANDARD="LVCMOS33")),
        Resource("probe_jb", 0, Pins("1 10", dir="o", conn=("pmod", 1)),
            Attrs(IOSTANDARD="LVCMOS33")),
        Resource("probe_rpi", 0, Pins("3 13 27 40", dir="o", conn=("rpi", 0)),
            Attrs(IOSTANDARD="LVCMOS33")),
        Resource("probe_ard", 0, Pins("io0 io10 io13 a5", dir="o", conn=("ck_io", 0)),
            Attrs(IOSTANDARD="LVCMOS33")),
        Resource("probe_i2c", 0,
            Subsignal("scl", Pins("scl", dir="o", conn=("ck_i2c", 0))),
            Subsignal("sda", Pins("sda", dir="o", conn=("ck_i2c", 0))),
            Attrs(IOSTANDARD="LVCMOS33")),
    ])
    plan = platform.build(_Blinky(), name="top", do_build=False)
    return plan.files["top.xdc"]


def _constraints(xdc_text):
    """{port: {property: value}} from the ``set_property NAME VALUE [get_ports "port"]`` lines."""
    props = {}
    for name, value, port in re.findall(
            r'^set_property (\S+) "?([^"\s]+)"? \[get_ports "([^"]+)"\]$', xdc_text, re.M):
        props.setdefault(port.replace("\\[", "["), {})[name] = value
    return props


def test_xdc_pins_and_iostandards(xdc):
    props = _constraints(xdc)
    for base, (pins, iostandard) in EXPECTED.items():
        pins = pins.split()
        ports = [base] if len(pins) == 1 else [f"{base}[{k}]" for k in range(len(pins))]
        for port, pin in zip(ports, pins):
            assert port in props, f"{port} missing from XDC:\n{xdc}"
            # Amaranth writes LOC, which Vivado treats as PACKAGE_PIN for ports.
            assert props[port].get("LOC", props[port].get("PACKAGE_PIN")) == pin, port
            assert props[port]["IOSTANDARD"] == iostandard, port
    # Only the requested ports are constrained.
    expected_ports = set()
    for base, (pins, _) in EXPECTED.items():
        n = len(pins.split())
        expected_ports |= {base} if n == 1 else {f"{base}[{k}]" for k in range(n)}
    assert set(props) == expected_ports


def test_xdc_clock_is_125_mhz(xdc):
    clocks = re.findall(r"^create_clock .*-period (\S+) \[get_nets \"?clk125_0__io\"?\]", xdc, re.M)
    assert len(clocks) == 1, xdc
    assert float(clocks[0]) == pytest.approx(8.0)


def test_board_strings():
    platform = PynqZ2Platform()
    assert (platform.device, platform.package, platform.speed) == ("xc7z020", "clg400", "1")
    assert platform.toolchain == "Vivado"
    assert platform.default_clk == "clk125"


def test_default_clk_frequency():
    assert PynqZ2Platform().default_clk_frequency == 125e6


def _resource_pins(ios):
    for item in ios:
        if isinstance(item, Pins):
            yield from item.names
        elif isinstance(item, Subsignal):
            yield from _resource_pins(item.ios)
        elif not isinstance(item, (Attrs,)):
            # DiffPairs and anything else carrying pins
            for attr in ("p", "n"):
                if hasattr(item, attr):
                    yield from getattr(item, attr).names


def test_pins_unique():
    owners = {}
    for res in PynqZ2Platform.resources:
        for pin in _resource_pins(res.ios):
            owners.setdefault(pin, []).append(f"{res.name}#{res.number}")
    for conn in PynqZ2Platform.connectors:
        conn_pins = list(conn.mapping.values())
        assert len(conn_pins) == len(set(conn_pins)), f"{conn.name}#{conn.number} repeats a pin"
        for pin in conn_pins:
            owners.setdefault(pin, []).append(f"{conn.name}#{conn.number}")

    duplicates = {pin: who for pin, who in owners.items() if len(who) > 1}
    # The only pins used twice are the ones the board itself shares between Pmod JA and the RPi header.
    assert set(duplicates) == JA_RPI_SHARED, duplicates
    for pin in JA_RPI_SHARED:
        assert sorted(duplicates[pin]) == ["pmod#0", "rpi#0"], (pin, duplicates[pin])

    # Every pin is a valid clg400 ball name and the expected counts are present.
    assert all(re.fullmatch(r"[A-HJ-NPRTUVWY](1\d|20|[1-9])", pin) for pin in owners), owners
    conns = {(c.name, c.number): c for c in PynqZ2Platform.connectors}
    assert len(conns[("pmod", 0)].mapping) == 8
    assert len(conns[("pmod", 1)].mapping) == 8
    assert len(conns[("rpi", 0)].mapping) == 28      # GPIO0..GPIO27
    assert len(conns[("ck_io", 0)].mapping) == 21    # D0..D13, A0..A5, "a"
    assert len(conns[("xadc", 0)].mapping) == 12
