"""What a node's option forces stitching to add after it, charged by the folding optimizer's 0/1 program
only where the consumer's option does not avoid it (issue 43).

A dense parallel-window SWG emits a whole window a word (``Op.stitched_after``): a consumer reading less a
cycle gets a narrowing width converter with the FIFO on its wide side (ResNet-8's 1,152-bit windows: about
2,400 LUT, against the 143 the style saves over the default one), one reading whole windows gets neither
(CNV-w1a1's MVAUs at SIMD 576). The per-node costs saw neither, so ``--fit`` picked the parallel style for
ResNet-8 and then found the stitched design over budget; charging the converter to the option always
would overprice CNV's generators by ~1.2k LUT each. So an option carries that cost apart
(``Option.forced``: the options are pruned with it, as if always paid), and the program pays it through
one variable per such option, z >= x(option) - (the consumer's options reading its word whole), z >= 0.
"""

from dataclasses import dataclass

from layers.op import input_widths
from rtlgen.costmodel import estimate

__all__ = ["forced_cost", "Charge", "stitch_charges"]

RESOURCES = ("LUT", "FF", "BRAM18", "DSP")
NOTHING = (0, 0, 0, 0)


def _forced_specs(node, folding):
    hook = node.op.stitched_after
    return hook(node.spec(**folding)) if hook is not None else ()


def forced_cost(nodes, candidate):
    """(LUT, FF, BRAM18, DSP) that stitching adds after the nodes of a candidate whoever reads them."""
    specs = [s for i, f in candidate for s in _forced_specs(nodes[i], f)]
    if not specs:
        return NOTHING
    total = sum((estimate(s) for s in specs), start=0)
    return tuple(int(total[r]) for r in RESOURCES)


@dataclass(frozen=True)
class Charge:
    """Option ``option`` of group ``group`` costs ``cost`` more unless group ``consumer`` takes one of the
    options ``avoided_by`` (None, (): always)."""
    group: int
    option: int
    cost: tuple
    consumer: int = None
    avoided_by: tuple = ()


def stitch_charges(graph, groups, choices):
    """The :class:`Charge` of every option with a ``forced`` cost: avoided by the options of its one
    consumer whose input word is the option's output word (a consumer behind a fan-out: always paid)."""
    where = {k: (g, i) for g, group in enumerate(groups) for i, k in enumerate(group)}
    widths = {}         # (consumer group, position, port) -> each of its options' input width there
    charges = []
    for g, options in enumerate(choices):
        for k, option in enumerate(options):
            if not any(getattr(option, "forced", NOTHING)):
                continue
            consumer, avoided = None, ()
            for i, folding in option.folding:
                node = graph.nodes[groups[g][i]]
                if node.op.stitched_after is None:
                    continue
                readers = [(c, port) for c, n in enumerate(graph.nodes) for port, t in enumerate(n.inputs)
                           if t == node.outputs[0]]
                if len(readers) == 1 and readers[0][0] in where:
                    (c, port), width = readers[0], node.spec(**folding).out_width
                    consumer, pos = where[c]
                    key = (consumer, pos, port)
                    if key not in widths:
                        widths[key] = [_input_width(graph.nodes[c], o, pos, port) for o in choices[consumer]]
                    avoided = tuple(j for j, w in enumerate(widths[key]) if w == width)
            charges.append(Charge(g, k, option.forced, consumer, avoided))
    return charges


def _input_width(node, option, pos, port):
    folding = dict(option.folding)[pos]
    try:
        return input_widths(node.spec(**folding))[port]
    except ValueError:
        return None
