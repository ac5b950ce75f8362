"""Jobs past one machine (rtlgen/backend/jobs.py): the same jobs on a local process pool and on a Dask
distributed cluster give what they give serially: each layer's Verilog byte for byte, each proof's verdict.
The cluster is a LocalCluster of two worker processes (one thread each) on this machine, reached by its
address as a remote one would be; a bad address, a scheduler that is not there and a missing Dask are
one line and exit 2."""

import os
import sys
from pathlib import Path

import pytest

from rtlgen.backend import jobs, layer_verilog
from rtlgen.ir.graph import HWNode

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    """The scheduler address of a LocalCluster: 2 worker processes, 1 thread each, no dashboard."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as local:
        yield local.scheduler_address


def _node(name, op_type, params, folding=None):
    return HWNode(name, op_type, params, folding or {}, inputs=(f"{name}_in",), outputs=(f"{name}_out",))


def _layers():
    import numpy as np
    weights = np.arange(-8, 8).reshape(4, 4) % 3 - 1
    return [_node("StreamingFIFO_0", "StreamingFIFO", {"width": 8}, {"depth": 16}),
            _node("StreamingFIFO_1", "StreamingFIFO", {"width": 5}, {"depth": 4}),
            _node("MVAU_0", "MVAU", {"mw": 4, "mh": 4, "input_dtype": "INT2", "weight_dtype": "INT2",
                                     "weights": weights}, {"PE": 2, "SIMD": 2, "mem_mode": "internal_embedded"})]


def _converted(tmp_path, monkeypatch, where, **using):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path / where))
    monkeypatch.setattr(layer_verilog, "_MEMORY", {})
    nodes = _layers()
    with jobs.using(**using):
        return [m.text for m in layer_verilog.layer_modules(nodes, [n.spec() for n in nodes], prefix="top")]


def test_jobs_run_where_asked(cluster):
    """Serially, on the local pool and on the cluster: every item's result at its index; the pool and the
    cluster run them in other processes."""
    items = list(range(5))
    serial = dict(jobs.completed(_square_and_pid, items, jobs=1))
    pooled = dict(jobs.completed(_square_and_pid, items, jobs=2))
    remote = dict(jobs.completed(_square_and_pid, items, cluster=cluster))
    assert [serial[i][0] for i in items] == [pooled[i][0] for i in items] == [remote[i][0] for i in items] \
        == [i * i for i in items]
    assert {pid for _, pid in serial.values()} == {os.getpid()}
    assert os.getpid() not in {pid for _, pid in pooled.values()}
    assert os.getpid() not in {pid for _, pid in remote.values()}
    with pytest.raises(ZeroDivisionError):          # a job's error is raised here, as itself
        dict(jobs.completed(_inverse, [1, 0], cluster=cluster))
    with pytest.raises(jobs.ClusterError, match="runs other rtlgen sources than this machine"):
        dict(jobs.completed(_square_and_pid, items, cluster=cluster, check=_this_process))
    with pytest.raises(jobs.WorkersLost):           # a local worker killed: the caller may run the rest itself
        dict(jobs.completed(_die, [1, 2], jobs=2))


def _square_and_pid(x):
    return x * x, os.getpid()


def _this_process():
    return str(os.getpid())         # differs on every worker: as a worker with other sources would


def _die(x):
    os._exit(9)


def _inverse(x):
    return 1 / x


def test_layer_verilog_on_the_cluster_is_byte_identical(cluster, tmp_path, monkeypatch):
    """Three layers (two FIFOs and an MVAU) converted here one by one and on the cluster's workers: the
    same texts byte for byte, and the cluster did convert them (its task stream shows the three)."""
    serial = _converted(tmp_path, monkeypatch, "serial", jobs=1)
    with distributed.Client(cluster, set_as_default=False) as client, distributed.get_task_stream(client) as tasks:
        remote = _converted(tmp_path, monkeypatch, "cluster", cluster=cluster)
    assert remote == serial
    assert sum(t["key"].startswith("_convert") for t in tasks.data) == 3, [t["key"] for t in tasks.data]


def test_proofs_on_the_cluster_give_the_serial_verdicts(cluster, tmp_path):
    """A FIFO's proof (k-induction closes) and a mutant FIFO that drops a word (the order property
    fails, with its counterexample): the same verdicts here and on the cluster."""
    from layers.fifo import FIFOSpec, StreamingFIFO
    from rtlgen.check.prove import ProofJob, solve
    from tests.mutants import mutant

    proofs = [ProofJob(FIFOSpec(3, 2), StreamingFIFO, "fifo"), ProofJob(FIFOSpec(3, 2), mutant(StreamingFIFO, "drop"), "fifo")]
    serial = [solve(job) for job in proofs]
    remote = dict(jobs.completed(solve, proofs, cluster=cluster))
    verdict = lambda r: (r["status"], r["depth"], r.get("failed"))     # noqa: E731
    assert [verdict(remote[i]) for i in range(2)] == [verdict(r) for r in serial]
    assert serial[0]["status"] == "proven" and serial[1]["status"] == "failed" and "order" in serial[1]["failed"]
    assert remote[1]["vcd_text"].startswith("$")        # the counterexample comes back as text


def test_a_cluster_that_cannot_be_used_is_one_line(tmp_path, capsys, monkeypatch):
    """No scheduler at the address, an address that is no address, and Dask not installed: exit 2, one line
    naming the address (or the package) and what to do."""
    from rtlgen.cli import main

    monkeypatch.setattr(jobs, "CONNECT_SECONDS", 2)
    out = tmp_path / "nothing-here"         # the cluster is checked first, before the OUT is read
    for address, words in (("tcp://127.0.0.1:1", "no Dask scheduler reached ([Errno 111] Connection refused"),
                           ("nonsense", "no Dask scheduler reached (missing port number")):
        assert main(["prove", str(out), "--cluster", address]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--cluster {address}: {words}" in err[0] and "dask scheduler" in err[0], err

    from rtlgen import api          # the API says it before the compile touches OUT
    with pytest.raises(jobs.ClusterError, match="--cluster tcp://127.0.0.1:1: no Dask scheduler reached"):
        api.compile(Path(__file__).parent / "models" / "digits_tfc_w1a1i1_clean.onnx", out, cluster="tcp://127.0.0.1:1")
    assert not out.exists()

    monkeypatch.setenv(jobs.ENV, "tcp://127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "distributed", None)          # as if not installed
    assert main(["prove", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Dask distributed is not installed; pip install 'dask[distributed]'" in err[0], err


def test_a_kernel_synthesis_that_fails_brings_its_log_back():
    """A partition's kernel synthesized as a job (rtlgen/backend/scaleout.py): Yosys's error comes back as
    a line and its log as a file for OUT, not as a path into the worker's removed temporary directory."""
    from rtlgen.backend.scaleout import synthesize_kernel

    synth, files, failure = synthesize_kernel(("module top(input a); assign b = ; endmodule\n", "top", None))
    assert synth is None and failure.startswith("yosys failed on 'top' during ") and "rtlgen-kernel-" not in failure
    assert "ERROR" in files["yosys.log"].decode() and files["top.v"].startswith(b"module top")
