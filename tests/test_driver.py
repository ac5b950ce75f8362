"""The host driver's logic (buffer packing, register sequence, error and timeout handling) on the
faithful fake board, whose DMA runs the compiled accelerator's Verilog; outputs against qonnx."""

from pathlib import Path

import numpy as np
import pytest

from boards.driver import AcceleratorDriver, DriverError, SimulatedBoard
from rtlgen.check.verify import qonnx_reference

MODELS = Path(__file__).parent / "models"
DIGITS = MODELS / "digits_tfc_w1a1i1_clean.onnx"


@pytest.fixture
def out(digits_out):
    return digits_out


def digits(n):
    return np.load(MODELS / "digits_tfc_w1a1i1_testset.npz")["x"][:n]


@pytest.mark.sim
def test_run_returns_the_models_outputs(out):
    board = SimulatedBoard(out)
    driver = AcceleratorDriver.from_compile(out, board)
    x = digits(6)
    assert np.array_equal(driver.run(x), qonnx_reference(DIGITS, x))
    assert driver.last_cycles > 6 * 640 and board.batches == 1
    y = driver.run(x[:1].reshape(1, 1, 8, 8))                   # one sample, the model's own shape
    assert np.array_equal(y, qonnx_reference(DIGITS, x[:1]))


def test_error_status_becomes_a_clear_error_and_the_next_batch_works(out):
    board = SimulatedBoard(out)
    driver = AcceleratorDriver.from_compile(out, board)
    board.fail_next = 5
    with pytest.raises(DriverError, match="AXI write error response"):
        driver.run(digits(2))
    assert board.regs["STATUS"] & 0b110 == 0                    # cleared by the driver's reset


def test_timeout(out):
    board = SimulatedBoard(out)
    board.hang = True
    driver = AcceleratorDriver.from_compile(out, board, timeout_s=0.05)
    with pytest.raises(DriverError, match=r"timed out after 0.05 s with 0 of 2 frames done"):
        driver.run(digits(2))


def test_wrong_bitstream_is_refused(out):
    board = SimulatedBoard(out)
    board.regs["MAGIC"] = 0
    with pytest.raises(DriverError, match="no rtlgen zynq shell"):
        AcceleratorDriver.from_compile(out, board)
    board.regs["MAGIC"] = 0x52544C47
    board.regs["IN_BYTES"] += 1
    with pytest.raises(DriverError, match="bitstream and compile output differ"):
        AcceleratorDriver.from_compile(out, board)


def test_input_of_the_wrong_shape(out):
    driver = AcceleratorDriver.from_compile(out, SimulatedBoard(out))
    with pytest.raises(ValueError, match=r"does not match the model input"):
        driver.run(np.zeros((2, 3)))


def test_register_sequence(out):
    """What the driver writes, in order: clear, FRAMES, SRC, DST, START."""
    board = SimulatedBoard(out)
    writes = []
    original = board.write

    def spy(offset, value):
        writes.append((offset, value))
        original(offset, value)
    board.write = spy
    board.hang = True           # the batch stays busy: only the start sequence is seen
    driver = AcceleratorDriver.from_compile(out, board, timeout_s=0.0)
    with pytest.raises(DriverError):
        driver.run(digits(3))
    assert [o for o, _ in writes[:5]] == [0x00, 0x08, 0x0C, 0x10, 0x00]
    assert writes[0][1] == 0b010 and writes[1][1] == 3 and writes[4][1] == 0b001
    assert writes[2][1] % 8 == 0 and writes[3][1] % 8 == 0 and writes[2][1] != writes[3][1]
    assert writes[5] == (0x00, 0b100)                           # timeout: reset the accelerator
