"""OUT's layout has one owner, sim/outdir.py (issue 44 item 2): no other module of the compiler or the runtime
spells the name of a file rtlgen writes into OUT as a path; each reads it from sim.outdir. (Prose may name
them: help texts and messages tell the user which file.)"""

import ast
from pathlib import Path

from sim import outdir

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rtlgen", "sim", "boards", "galapagos", "layers", "swg", "memstream")
NAMES = {outdir.VERILOG, outdir.IO, outdir.REPORT, outdir.MODEL_HW, outdir.FOLDING, outdir.PARTITION,
         outdir.CLUSTER_SIM, outdir.VERIFY, outdir.HOST_PRE, outdir.HOST_POST, outdir.REPORT_HTML, outdir.MANIFEST,
         outdir.YOSYS_DIR, outdir.YOSYS_REPORT, outdir.VIVADO_DIR, outdir.WAVES, outdir.PROVE_REPORT}


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


def test_no_module_but_sim_outdir_names_a_file_in_out():
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != ROOT / "sim" / "outdir.py":
                hits = named_out_files(path)
                if hits:
                    found[path.relative_to(ROOT).as_posix()] = hits
    assert not found, f"OUT's file names outside sim/outdir.py (use its constants): {found}"


def test_a_name_planted_in_a_module_is_caught(tmp_path):
    module = tmp_path / "writer.py"
    module.write_text('"""Writes report.json (a docstring may say so)."""\n\n'
                      'def write(out):\n    (out / "report.json").write_text("{}")\n'
                      '    raise OSError(f"{out}: cannot write report.json")\n')
    assert named_out_files(module) == [(4, "report.json")]
