"""OUT has one owner, the class sim.outdir.OutDir (issue 44 item 2): no other module of the compiler or the
runtime spells the name of a file rtlgen writes into OUT as a path, and none uses OUT but through the class
(sim/outdir_swap.py, the swap and lock the class calls, is its own second module). Prose may name the files:
help texts and messages tell the user which file."""

import ast
from pathlib import Path

from sim.outdir import OutDir

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rtlgen", "sim", "boards", "galapagos", "layers", "swg", "memstream")
OWNERS = {ROOT / "sim" / "outdir.py", ROOT / "sim" / "outdir_swap.py"}
# the files (and folders below build/) of OUT: a bare folder name (build, prove) is too common a word
NAMES = {name for name in OutDir.FILES.values() if "." in name or "/" in name}
PUBLIC = {"OutDir", "OutError"}         # all a caller imports of sim.outdir


def _strings(tree):
    """The string constants of ``tree`` that are code, not docstrings (text in f-strings included)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def named_out_files(path):
    """[(line, text)] of the string constants in the module at ``path`` that are a path naming one of OUT's
    files (no white space: a message or a help text is prose)."""
    return [(node.lineno, node.value) for node in _strings(ast.parse(path.read_text()))
            if not any(c.isspace() for c in node.value) and any(name in node.value for name in NAMES)]


def out_uses_past_the_class(path):
    """[(line, what)] where the module at ``path`` reaches OUT but through :class:`OutDir`: an import from
    sim.outdir of another name, of sim.outdir as a module, or of sim.outdir_swap."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "sim.outdir":
            found += [(node.lineno, f"sim.outdir.{a.name}") for a in node.names if a.name not in PUBLIC]
        elif isinstance(node, ast.ImportFrom) and node.module == "sim.outdir_swap":
            found.append((node.lineno, "sim.outdir_swap"))
        elif isinstance(node, ast.ImportFrom) and node.module == "sim":
            found += [(node.lineno, f"sim.{a.name}") for a in node.names if a.name in ("outdir", "outdir_swap")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name in ("sim.outdir", "sim.outdir_swap")]
    return found


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in OWNERS:
                yield path


def test_no_module_but_the_owner_names_a_file_in_out():
    found = {path.relative_to(ROOT).as_posix(): hits for path in _modules() if (hits := named_out_files(path))}
    assert not found, f"OUT's file names outside sim/outdir.py (use sim.outdir.OutDir's paths): {found}"


def test_every_module_uses_out_through_the_class():
    found = {path.relative_to(ROOT).as_posix(): hits for path in _modules() if (hits := out_uses_past_the_class(path))}
    assert not found, f"OUT reached past sim.outdir.OutDir: {found}"


def test_a_name_planted_in_a_module_is_caught(tmp_path):
    module = tmp_path / "writer.py"
    module.write_text('"""Writes report.json (a docstring may say so)."""\n\n'
                      'def write(out):\n    (out / "report.json").write_text("{}")\n'
                      '    raise OSError(f"{out}: cannot write report.json")\n')
    assert named_out_files(module) == [(4, "report.json")]


def test_a_use_past_the_class_planted_in_a_module_is_caught(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text("from sim.outdir import OutDir, OutError\nfrom sim.outdir import read_io\n"
                      "from sim import outdir_swap\nimport sim.outdir\n")
    assert out_uses_past_the_class(module) == [(2, "sim.outdir.read_io"), (3, "sim.outdir_swap"), (4, "sim.outdir")]


def test_paths_and_names():
    out = OutDir("somewhere")
    assert OutDir.report == "report.json" and out.report == Path("somewhere") / "report.json"
    assert out.device(1).model_hw == Path("somewhere") / "device1" / "model_hw.onnx"
    assert out.relative(out.yosys_report) == "build/yosys/report.json"
    assert out.missing() == ["finn_design_wrapper.v", "io.json", "report.json"]
