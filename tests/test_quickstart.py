"""``docs/quickstart.ipynb`` runs as written: its code cells executed in order in one
namespace, in process (nbclient and a Jupyter kernel are not dependencies of censusdp),
the temporary directory it makes put under the test's own."""

from __future__ import annotations

import ast
import json
import tempfile
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"


def run_notebook(path: Path) -> dict:
    """Execute the code cells of a notebook in order, as a kernel would (the value of a
    cell's last expression is computed, not shown); return the namespace."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__quickstart__"}
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        tree = ast.parse(source, filename=f"{path.name} cell {i}")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body[-1] = ast.Assign(
                targets=[ast.Name(id=f"_cell{i}", ctx=ast.Store())], value=last.value
            )
            ast.fix_missing_locations(tree)
        exec(compile(tree, f"{path.name} cell {i}", "exec"), namespace)
    return namespace


def test_the_notebook_is_stored_clean() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 6
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_the_quickstart_runs_as_written(tmp_path, monkeypatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ns = run_notebook(NOTEBOOK)
    assert ns["work"].parent == tmp_path
    counties = ns["counties"]
    assert len(counties) == ns["cef"].counties >= 2
    assert counties["GEOID"].str.fullmatch(r"50\d{3}").all()
    assert (counties["gls_moe90"] > 0).all()
    # the published counties add up to the state's exact total
    assert counties["P1_001N"].sum() == ns["cef"].persons
    line = ns["fig"].axes[0]
    assert line.get_title() == "Total population by county"
    long = ns["long"]
    shown = long[(long.SUMLEV == "050") & (long.variable == "P1_001N")]
    assert shown["value"].tolist() == counties["P1_001N"].tolist()
    import matplotlib.pyplot as plt

    plt.close("all")
