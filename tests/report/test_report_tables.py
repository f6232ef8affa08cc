"""The report's HTML tables: sortable, each column's best value marked where the header says
which way is better, units in the headers."""

import polars as pl

from symbnn.report.method_tables import with_units
from symbnn.report.tables import best_rows, better_direction, to_html


def test_direction_follows_the_header():
    assert better_direction("MMD (x100)") == "min" and better_direction("NS MMD max") == "min"
    assert better_direction("Acc (%)") == "max" and better_direction("AUPR (%, ours / paper)")
    assert better_direction("MMD rej (% of layers)") == "min"
    assert better_direction("IDMI (nats x100)") is None and better_direction("method") is None


def test_best_value_of_each_column_is_marked():
    frame = pl.DataFrame(
        {
            "method": ["a", "b", "c"],
            "MMD (x100)": ["3.0 ± 0.1", "1.5 ± 2.0", "9.0"],
            "Acc (%)": [80.0, 95.5, None],
            "IDMI (nats x100)": [1.0, 2.0, 3.0],
        }
    )
    assert best_rows(frame) == {"MMD (x100)": {1}, "Acc (%)": {1}}
    page = to_html(frame)
    assert page.count("class='best'") == 2
    assert "<td class='best' title='best in column'><b>1.5 ± 2.0</b></td>" in page
    assert "<td class='best' title='best in column'><b>95.500</b></td>" in page
    assert "MMD (x100) &darr;</th>" in page and "Acc (%) &uarr;</th>" in page
    assert "addEventListener('click'" in page  # sortable headers
    assert "http" not in page  # self-contained: nothing fetched


def test_units_join_the_headers():
    frame = pl.DataFrame({"group": ["x"], "MMD median": [1.0], "Acc": ["1 / 2"], "note": ["n"]})
    assert with_units(frame).columns == ["group", "MMD median (x100)", "Acc (%)", "note"]
    assert with_units(frame, "ours / paper").columns[2] == "Acc (%, ours / paper)"
