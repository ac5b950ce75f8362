"""The house's rules, checked on its source: the compile flow is what the docs say, dependencies point one
way with no import cycle, the compiler's modules stand in layers that import only downward, no module
reaches into another's private names, and the compiler (``rtlgen``) names no layer op type: it asks the op
registry."""

import ast
import re
from pathlib import Path

import pytest

from rtlgen import flows
from rtlgen.backend import compile as compile_flow
from rtlgen.ir.graph import OPS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rtlgen", "layers", "swg", "memstream", "sim", "golden", "boards", "galapagos")
BELOW_THE_COMPILER = ("layers", "swg", "memstream", "sim", "golden", "boards", "galapagos")
# What each package below the compiler must not import: nothing below imports rtlgen; the layers (and the
# SWG and weight memories) take their reference math from golden, not from the simulation package; sim
# does not import boards; golden, the independent reference, imports nothing of the project.
FORBIDDEN = {package: ("rtlgen",) for package in BELOW_THE_COMPILER}
FORBIDDEN.update({"layers": ("rtlgen", "sim"), "swg": ("rtlgen", "sim"), "memstream": ("rtlgen", "sim"),
                  "sim": ("rtlgen", "boards"), "golden": tuple(p for p in PACKAGES if p != "golden")})
# The compiler's layers, from the ground up (docs/architecture.md says what each is): a module imports
# modules of its own layer or of lower ones, never of a higher one. A name is a module or a package (all
# its modules), except ``rtlgen`` itself: its face (``__init__.py``), which defines nothing; every module of
# rtlgen is on exactly one layer.
COMPILER_LAYERS = (
    ("rtlgen", "rtlgen.errors", "rtlgen.fit", "rtlgen.ir", "rtlgen.forkpool"),     # what everything shares: the graph, boards
    ("rtlgen.costmodel", "rtlgen.options"),                 # resource estimates; the compile options
    ("rtlgen.analyses",),           # what passes and writers both read off a graph: timing, latency, board rate
    ("rtlgen.passes",),             # graph -> graph
    ("rtlgen.flows",),              # the passes in order, the Runner
    ("rtlgen.report",),             # rendering a compile's figures: rows, summary, report.html, inspect
    ("rtlgen.backend",),            # the compile whole: stitch, simulate, write OUT, build, scale out
    ("rtlgen.check",),              # verify, prove, netlist and shell simulations of what the backend made
    ("rtlgen.api", "rtlgen.demo"),
    ("rtlgen.cli_args", "rtlgen.cli_commands", "rtlgen.cli", "rtlgen.__main__"),
)


def _modules():
    """{dotted module name: parsed AST} of every first-party module."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = (path, ast.parse(path.read_text(), str(path)))
    return found


MODULES = _modules()


def _imports(tree, module):
    """(imported module, [names]) for every import in ``tree``, at module level or inside functions."""
    package = module if module in MODULES and MODULES[module][0].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [a.name for a in node.names]
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            yield base, [n for n in names if f"{base}.{n}" not in MODULES]
            for sub in submodules:
                yield sub, []


def _first_party(name):
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graph():
    edges = {}
    for module, (_, tree) in MODULES.items():
        edges[module] = {_first_party(m) for m, _ in _imports(tree, module)} - {None, module}
    return edges


def test_the_compile_flow_is_what_the_docs_say():
    names = [p.name for p in compile_flow.COMPILE]
    documented = re.search(r"^\s*COMPILE\s+(.+)$", flows.__doc__, re.M).group(1)
    assert [n.strip() for n in documented.split(",")] == names
    described = re.findall(r"^    ([a-z_]+)\s{2,}\S", flows.__doc__, re.M)
    assert [n for n in described if n in names] == names          # each pass explained, in order
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"`rtlgen/backend/compile\.py` `COMPILE`:\s*([^)]*)\)", readme)
    assert listed, "README.md names the compile flow (`rtlgen/backend/compile.py` `COMPILE`: ...)"
    assert re.findall(r"`([a-z_]+)`", listed.group(1)) == names
    assert [p.name for p in flows.INSPECT] == names[:3]


def test_no_import_cycle():
    edges = _graph()
    cycles = []
    state = {}

    def visit(module, path):
        state[module] = "open"
        for nxt in sorted(edges[module]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles (counting imports inside functions):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


@pytest.mark.parametrize("package", BELOW_THE_COMPILER)
def test_dependencies_point_one_way(package):
    edges = _graph()
    bad = sorted(f"{m} imports {d}" for m, ds in edges.items() if m.split(".")[0] == package
                 for d in ds if d.split(".")[0] in FORBIDDEN[package])
    assert not bad, "\n".join(bad)


def layer_of(module, layers=COMPILER_LAYERS):
    """The index of ``module``'s layer (the longest name of ``layers`` that is it or a package holding it)."""
    found = [(len(name), index) for index, names in enumerate(layers) for name in names
             if module == name or (name != "rtlgen" and module.startswith(name + "."))]
    return max(found)[1] if found else None


def upward_imports(edges, layers=COMPILER_LAYERS):
    """["a (layer i) imports b (layer j)", ...] for every import of ``edges`` ({module: {imported}}) from a
    lower layer to a higher one."""
    bad = []
    for module, imported in sorted(edges.items()):
        low = layer_of(module, layers)
        bad += [f"{module} (layer {low}) imports {other} (layer {layer_of(other, layers)})"
                for other in sorted(imported) if low is not None and (layer_of(other, layers) or -1) > low]
    return bad


def test_every_compiler_module_is_on_a_layer():
    assert [m for m in MODULES if m.split(".")[0] == "rtlgen" and layer_of(m) is None] == []


def test_the_compiler_imports_only_downward():
    bad = upward_imports(_graph())
    assert not bad, "imports that run back up the compiler's layers:\n" + "\n".join(bad)


def test_an_upward_import_is_caught():
    """The check itself: a planted import of a pass from the options (a lower layer) is reported, one of
    a pass from a flow is not."""
    planted = {"rtlgen.options": {"rtlgen.fit", "rtlgen.passes.fold"}, "rtlgen.flows": {"rtlgen.passes.fold"}}
    assert upward_imports(planted) == ["rtlgen.options (layer 1) imports rtlgen.passes.fold (layer 3)"]
    edges = _graph()
    edges["rtlgen.passes.insert"] = edges["rtlgen.passes.insert"] | {"rtlgen.backend.stitch"}
    assert "rtlgen.passes.insert (layer 3) imports rtlgen.backend.stitch (layer 6)" in upward_imports(edges)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for module, (_, tree) in MODULES.items():
        for imported, names in _imports(tree, module):
            if _first_party(imported) and _first_party(imported) != module:
                bad += [f"{module}: from {imported} import {n}" for n in names if n.startswith("_")]
        aliases = {}            # a first-party module bound to a name: `from pkg import mod as m`, `import a.b as m`
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                    if full in MODULES and full != module and (alias.asname or isinstance(node, ast.ImportFrom)):
                        aliases[alias.asname or alias.name] = full
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{module}: {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(bad)


def _docstrings(tree):
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def test_the_compiler_names_no_layer_op_type():
    """Strings in code (not docstrings or comments) under rtlgen/ that are an op type of the registry, or
    one with FINN's _hls/_rtl/_Batch suffixes or an older name."""
    names = set(OPS) | {old for op in OPS.values() for old in op.old_names}
    spelled = re.compile(rf"^({'|'.join(sorted(names, key=len, reverse=True))})(_hls|_rtl|_Batch)?(_\d+)?$")
    bad = []
    for module, (path, tree) in MODULES.items():
        if not module.startswith("rtlgen"):
            continue
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if spelled.match(node.value):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not bad, "\n".join(bad)


def test_every_compiler_module_is_on_the_architecture_page():
    page = (ROOT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"`([a-z_/]+\.py)`", page))
    short = {name for name in re.findall(r"`([a-z_]+\.py)`", page)}         # layers/mvau.py, `vvau.py`, ...
    missing = [str(path.relative_to(ROOT)) for path, _ in MODULES.values()
               if path.parts[-2] in ("rtlgen", "ir", "analyses", "passes", "backend", "check", "report", "layers",
                                     "galapagos")
               and path.name != "__init__.py" and path.name != "__main__.py"
               and str(path.relative_to(ROOT)) not in listed and not (path.parts[-2] == "layers" and path.name in short)]
    assert not missing, f"docs/architecture.md does not say what these are: {missing}"


MAX_LINES = 600         # a module longer than this does two jobs: split it at its seam


def long_modules(paths, limit=MAX_LINES):
    """["path: N lines", ...] of the modules among ``paths`` longer than ``limit`` lines."""
    counts = {path: len(path.read_text().splitlines()) for path in paths}
    return [f"{path.relative_to(ROOT)}: {n} lines" for path, n in counts.items() if n > limit]


def test_no_module_is_over_the_limit():
    paths = [path for path, _ in MODULES.values()] + sorted((ROOT / "benchmarks").rglob("*.py"))
    assert not long_modules(paths), f"modules over {MAX_LINES} lines:\n" + "\n".join(long_modules(paths))


def test_a_long_module_is_caught(tmp_path):
    module = ROOT / "tests" / "test_architecture.py"
    assert long_modules([module], limit=10) == [f"tests/test_architecture.py: {len(module.read_text().splitlines())} lines"]
