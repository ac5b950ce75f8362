"""The ``check_fit`` pass: the graph unchanged; under ``strict``, an error if its layers alone are estimated
over the board, before the long steps. A many-level activation kept as a threshold table (no exact
requantizer) is a warning."""

import warnings

from layers.requant import activation_summary
from rtlgen.costmodel import estimate
from rtlgen.errors import CompileError, CompileWarning
from rtlgen.fit import fit_line, fits, usage

__all__ = ["check_fit"]


def check_fit(graph, options):
    for node in graph.nodes:
        note = (activation_summary(node.spec()) or {}).get("note")
        if note:
            warnings.warn(f"{node.name}: {note}", CompileWarning, stacklevel=2)
    used = usage(sum(estimate(n.spec()) for n in graph.nodes), options.board)
    if options.strict and not fits(used):
        fix = f"compile with --fit {options.board} for the fastest folding that fits, lower the folding " \
              f"(--target-fps, --folding)" if options.fit is None and options.budget is None else \
              "lower --max-utilization, split the network across devices (rtlgen partition)"
        raise CompileError(f"{fit_line(used, options.board)}; {fix}, or compile without --strict")
    return graph
