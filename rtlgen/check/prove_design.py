"""`rtlgen prove OUT`: every node of a compiled design (or of every device of a partition) proven, the
nodes in parallel (:mod:`rtlgen.backend.jobs`: a process per core, ``--jobs N``, or a Dask cluster with
``--cluster ADDRESS``), each by :mod:`rtlgen.check.prove`. Nodes already proven (the cache, by spec) are
not run again, and identical nodes run once. What was shown goes to the terminal as each node finishes and
into ``OUT/prove/report.json`` (:attr:`sim.outdir.OutDir.prove_report`), with the step a timed-out bounded check reached."""

import time
from dataclasses import fields, replace

import numpy as np

from rtlgen.backend.jobs import WorkersLost, cluster_address, completed, local_workers
from rtlgen.check.prove import TRACKED_ROLES, ProofJob, cached_outcome, finish, proof_sources_hash, small_instances, solve
from rtlgen.ir.graph import OPS, HWNode, canonical_op_type, op_with_role
from sim.outdir import OutDir, OutError
from sim import progress

__all__ = ["prove_out", "design_nodes", "cluster_nodes"]


def _attribute(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return tuple(value)
    return value


def design_nodes(out):
    """[(node name, Op, spec)] of the compiled design in ``out``, from its ``model_hw.onnx`` (every node
    with the attributes and memory images it was built with), checked against ``report.json``. For an
    `rtlgen partition` OUT (:func:`cluster_nodes`): every device's nodes and bridges, ``device{d}/NAME``."""
    out = OutDir(out)
    if out.is_partition():
        return cluster_nodes(out)
    _, _, report = out.read_design()            # OutError for a missing, partial or damaged OUT
    return _hw_nodes(out.model_hw, report.get("layers", ()),
                     f"compile again: rtlgen compile MODEL.onnx -o {out}")


def cluster_nodes(out):
    """[(``device{d}/NAME``, Op, spec)] of an `rtlgen partition` OUT: per device, its FromGalapagos
    bridge, the nodes of ``device{d}/model_hw.onnx`` (checked against ``device{d}/report.json``) and its
    ToGalapagos bridge, with the geometry, kernel ID and TDEST the kernel was built with."""
    # start-up (the CLI imports this module): partition OUTs only; scaleout brings flows, emit, ~0.5 s
    from rtlgen.backend.scaleout import load_cluster

    out = OutDir(out)
    again = f"partition again: rtlgen partition MODEL.onnx -o {out} --devices N"
    try:
        plan, devices = load_cluster(out)
    except FileNotFoundError as exc:
        raise OutError(str(exc)) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OutError(f"{out}: damaged partition output ({exc}); {again}") from None
    receiver, sender = op_with_role("from_galapagos"), op_with_role("to_galapagos")
    nodes = []
    for report, _ in devices:
        where = out.device(report['index'])
        try:
            fw, kernel = report["flit_width"], report["kernel_id"]
            rx, tx = report["receive"], report["send"]
            receive = receiver.spec(rx["word_width"], fw, rx["words_per_frame"], kernel_id=kernel,
                                    max_packet_flits=rx["max_packet_flits"])
            send = sender.spec(tx["word_width"], fw, tx["words_per_frame"], dest=tx["dest"], source_id=kernel,
                               max_packet_flits=tx["max_packet_flits"])
        except (KeyError, TypeError, ValueError) as exc:
            raise OutError(f"{where.report}: no bridge geometry ({exc}); {again}") from None
        prefix = f"{out.relative(where.path)}/"         # the device's folder names its nodes
        nodes.append((prefix + receiver.op_type, receiver, receive))
        nodes += [(prefix + name, op, spec)
                  for name, op, spec in _hw_nodes(where.model_hw, report.get("layers", ()), again)]
        nodes.append((prefix + sender.op_type, sender, send))
    return nodes


def _hw_nodes(path, report_layers, again):
    """[(node name, Op, spec)] from the ``model_hw.onnx`` at ``path``, checked against the report's layers
    (OutError saying ``again`` where they disagree or the file is missing or damaged)."""
    import onnx             # start-up: the CLI's main loads no onnx (as sim.outdir)
    from onnx import helper, numpy_helper

    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise OutError(f"{path}: missing; {again}") from None
    except Exception as exc:
        raise OutError(f"{path}: damaged ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                       f"{again}") from None
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = []
    for onode in model.graph.node:
        op_type = canonical_op_type(onode.op_type)
        if op_type not in OPS:
            raise OutError(f"{path}: node {onode.name} has op type {onode.op_type}, which rtlgen has no layer for; "
                           f"{again}")
        op = OPS[op_type]
        spec_fields = {f.name for f in fields(op.spec) if f.init}
        by_finn = {op.finn_names.get(f, f): f for f in spec_fields}
        params, folding = {}, {}
        for attr in onode.attribute:
            value = _attribute(helper.get_attribute_value(attr))
            if attr.name in op.folding:
                folding[attr.name] = value
            elif attr.name in by_finn:
                params[by_finn[attr.name]] = value
        prefix = f"{onode.name}_"
        for name in onode.input:
            if name.startswith(prefix) and name in arrays and name[len(prefix):] in spec_fields:
                a = arrays[name]
                params[name[len(prefix):]] = a.astype(np.int64) if np.all(np.round(a) == a) else a
        node = HWNode(onode.name, op_type, params, folding, inputs=tuple(onode.input), outputs=tuple(onode.output))
        try:
            spec = node.spec()
        except (ValueError, TypeError) as exc:
            raise OutError(f"{path}: node {onode.name} does not make a {op_type}: {exc}; {again}") from None
        nodes.append((onode.name, op, spec))
    layers = {layer["name"]: layer for layer in report_layers if isinstance(layer, dict)}
    for name, op, spec in nodes:
        layer = layers.get(name)
        if layer is None or any(layer.get(k) != getattr(spec, k) for k in ("in_width", "out_width", "exp_cycles")):
            raise OutError(f"{path}: node {name} does not match report.json; {again}")
    if len(layers) != len(nodes):
        raise OutError(f"{path}: {len(nodes)} nodes, {OutDir(path.parent).report} lists {len(layers)}; {again}")
    return nodes


def _jobs(op, spec, *, depth=None, timeout=None):
    """[(:class:`ProofJob`, description of the small instance or None)] of one node of a design (one job
    per instance proven in its place)."""
    track = op.role if op.role in TRACKED_ROLES else None
    return [(ProofJob(small, op.component, track, depth, False, timeout), change)
            for small, change in small_instances(op, spec)]


_RANK = {"failed": 0, "unknown": 1, "bounded": 2, "proven": 3}


def _combined(parts):
    """A node's :class:`Outcome` from its instances' (in order): the weakest, naming every instance; a
    bounded node holds to the smallest depth its bounded instances reached (each one's in ``depths``: a
    proven instance's is its induction's)."""
    if len(parts) == 1:
        return parts[0]
    worst = min(parts, key=lambda o: _RANK[o.status])
    bounded = [o for o in parts if o.status == "bounded"]
    return replace(worst, instance="; ".join(o.instance or "itself" for o in parts),
                   seconds=sum(o.seconds for o in parts), cached=all(o.cached for o in parts),
                   depth=min(o.depth for o in bounded) if worst.status == "bounded" else worst.depth,
                   depths=[o.depth for o in parts] if worst.status == "bounded" else None,
                   note=worst.note if all(o.note == worst.note for o in bounded) else None,
                   runs=[[f"instance {k + 1}: {run[0]}", *run[1:]] for k, o in enumerate(parts) for run in o.runs])


def prove_out(out, *, depth=None, node=None, report=print, timeout=None, jobs=None, cluster=None):
    """Prove every node of the design in ``out`` (or the one named ``node``); the outcomes in the design's
    order, each passed to ``report`` as it comes (cached ones first). The uncached nodes run in parallel:
    ``jobs`` processes (default: one per core) or on the Dask scheduler at ``cluster`` (default:
    ``$RTLGEN_CLUSTER``). An unknown ``node`` is a ValueError naming the legal ones."""
    started = time.monotonic()
    nodes = design_nodes(out)
    if node is not None:
        chosen = [n for n in nodes if n[0] == node]
        if not chosen:
            raise ValueError(f"--node {node!r}: no such node in {out}; legal: {', '.join(n for n, _, _ in nodes)}")
        nodes = chosen
    keep = OutDir(out).prove_dir
    outcomes = [None] * len(nodes)
    parts = [{} for _ in nodes]                 # per node: {cache key: the Outcome of that instance, or None}
    todo = {}                                   # {cache key: (job, [(index, name, instance)])}: identical nodes once
    for index, (name, op, spec) in enumerate(nodes):
        for job, change in _jobs(op, spec, depth=depth, timeout=timeout):
            key = job.key()
            cached = cached_outcome(name, key)
            if cached is not None:
                cached.instance = change
            else:
                todo.setdefault(key, (job, []))[1].append((index, name, change))
            parts[index][key] = cached
        if all(o is not None for o in parts[index].values()):
            outcomes[index] = _combined(list(parts[index].values()))
            report(outcomes[index])
    # the longest proofs first, so that none starts last on an otherwise idle pool: the layers' bounded
    # checks (no tracked word: windows, weights, pools) before the FIFOs' and converters' inductions, the
    # deepest first (CNV's window generators take minutes, its FIFOs seconds)
    keys = sorted(todo, key=lambda k: (todo[k][0].track is None, todo[k][0].plan()[1]), reverse=True)
    _prove_uncached([todo[k] for k in keys], keys, parts, outcomes, keep=keep, report=report, jobs=jobs,
                    cluster=cluster)
    processes = min(local_workers(jobs), max(len(keys), 1))
    ran_on = cluster_address(cluster) or f"{processes} local process{'es' if processes > 1 else ''}"
    _write_report(OutDir(out), outcomes, time.monotonic() - started, ran_on)
    return outcomes


def _prove_uncached(todo, keys, parts, outcomes, *, keep, report, jobs, cluster):
    """Run each (job, [(index, name, instance)]) of ``todo`` (cache key ``keys[i]``) on the job runner,
    fill ``parts`` and, once a node's instances are all done, ``outcomes`` at its index, and ``report`` it."""
    with progress.task(f"proving {len({i for _, names in todo for i, _, _ in names})} nodes ({len(todo)} distinct "
                       f"proofs)",
                       total=len(todo)) as update:
        finished = set()

        def done(position, result):
            for index, name, change in todo[position][1]:
                outcome = finish(name, result, keep=keep, key=keys[position])
                outcome.instance = change
                parts[index][keys[position]] = outcome
                if all(o is not None for o in parts[index].values()):
                    outcomes[index] = _combined(list(parts[index].values()))
                    report(outcomes[index])
            finished.add(position)
            update(len(finished))
        try:
            for position, result in completed(solve, [job for job, _ in todo], jobs=jobs, cluster=cluster,
                                              check=proof_sources_hash):
                done(position, result)
        except WorkersLost:
            pass                # a worker killed (e.g. for memory): the rest here, one at a time
        for position in sorted(set(range(len(todo))) - finished):
            done(position, solve(todo[position][0]))


def _write_report(out, outcomes, seconds, ran_on):
    """``OUT/prove/report.json``: every node's outcome (status, depth, the step a timed-out check reached,
    failed properties and counterexample, seconds, cached) and its line as printed."""
    nodes = [{**{f.name: getattr(o, f.name) for f in fields(o)}, "seconds": round(o.seconds, 3), "line": o.line()}
             for o in outcomes]
    counts = {status: sum(o.status == status for o in outcomes) for status in ("proven", "bounded", "failed", "unknown")}
    try:
        out.write_json(out.prove_report, {"nodes": nodes, **counts, "seconds": round(seconds, 3), "ran_on": ran_on})
    except OSError:
        pass            # an OUT on a read-only disk: the terminal has said it all
