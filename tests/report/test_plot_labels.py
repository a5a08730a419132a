"""Names in plots are printed as they are: matplotlib reads a label holding two ``$`` as math
text, so a run or stage named ``$\\frac{$`` stopped a diagnosis, a comparison or an experiment page with a
parse error, and ``$x^{2}$`` was typeset. Oracle: matplotlib's own reading of the label (``Text``'s math
preprocessing says plain text, and gives back the name)."""

from __future__ import annotations

import pytest
from samples import tiny

from toolkit.guard.escape import plot_text

NAMES = ["$\\frac{$ first", "rr $x^{2}$ \\$ 5$"]


@pytest.mark.parametrize("name", [*NAMES, "plain", "a\\$b$", "$"])
def test_plot_text_is_read_as_plain_text(name):
    from matplotlib.text import Text

    t = Text(text=plot_text(name))
    assert t._preprocess_math(t.get_text()) == (name, False)


def test_diagnosis_and_comparison_plots_with_math_in_run_names(tmp_path):
    import toolkit as ts
    from toolkit.report.diagnosis_page import diagnosis_plots

    qrels, first, reranked, _, _ = tiny()
    diag = ts.diagnose(qrels, {NAMES[0]: first}, {NAMES[1]: reranked})
    plots = diagnosis_plots(diag.result)
    assert all(png.startswith(b"\x89PNG") for _, png in plots.values())
    cmp = ts.compare(qrels, {NAMES[0]: first, NAMES[1]: reranked}, measures=["P.5"], permutations=50)
    cmp.write(tmp_path / "cmp")
    assert 'src="data:image/png;base64,' in (tmp_path / "cmp" / "compare.html").read_text()
