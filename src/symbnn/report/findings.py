"""The paper's qualitative findings, tested on our Table 1 and on the paper's own MNIST table.

Each finding is an ordering between rows of Table 1 (never a sentence written by hand):
multi-mode against single-mode per method, out- against in-distribution MI per row, or one
method against all the others. It is evaluated on our table and on the paper's MNIST-OptuNet
block (`symbnn.report.paper`). A finding the paper's table supports in every case it can be
tested on is a **claim** (``status`` "claim": ours should agree); so is one the paper states
in its text where its table has no column for it (NLL, section 4.3); one the paper's table
contradicts somewhere is reported as an **observation** only, with both counts, and no claim
is made from it. A claim is judged on the cases the paper could test (its methods; for a
claim from its text, the methods it ran in both variants): our extra rows (multi-mode SGHMC)
are shown, marked "beyond the paper", and not counted. Single-mode figures are the mean over
the modes (see `method_tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from symbnn.methods.registry import LABELS
from symbnn.report.paper import paper_table1

DE = LABELS["de"]
PAPER_BLOCK = "MNIST - OptuNet"
# section 4.3: "multi-mode techniques consistently demonstrate superior performance in terms of
# MMD [...]. This trend holds true in accuracy and negative log-likelihood."
STATED_IN_TEXT = ("multi-mode NLL below single-mode",)


@dataclass(frozen=True)
class Finding:
    name: str
    # (table) -> list of (subject, holds, detail) over every case the table can test
    cases: Callable[[pl.DataFrame], list[tuple[str, bool, str]]]


def _pairs(table: pl.DataFrame) -> pl.DataFrame:
    """One row per method with both variants: its one-mode and multi-mode figures side by side."""
    one = table.filter(pl.col("group") == "one mode").drop("group")
    multi = table.filter(pl.col("group") == "multi mode").drop("group")
    return one.join(multi, on="method", suffix=" multi")


def _multi_vs_one(column: str, lower: bool) -> Finding:
    word = "below" if lower else "above"

    def cases(table: pl.DataFrame) -> list[tuple[str, bool, str]]:
        out = []
        for row in _pairs(table).iter_rows(named=True):
            multi, one = row.get(f"{column} multi"), row.get(column)
            if multi is None or one is None:
                continue
            holds = multi < one if lower else multi > one
            out.append((row["method"], holds, f"{multi:.2f} vs {one:.2f}"))
        return out

    return Finding(f"multi-mode {column} {word} single-mode", cases)


def _ood_mi_above_id_mi(group: str) -> Finding:
    def cases(table: pl.DataFrame) -> list[tuple[str, bool, str]]:
        rows = table.filter(pl.col("group") == group)
        return [
            (r["method"], r["OODMI"] > r["IDMI"], f"OODMI {r['OODMI']:.2f}, IDMI {r['IDMI']:.2f}")
            for r in rows.iter_rows(named=True)
        ]

    return Finding(f"{group}: OOD mutual information above in-distribution", cases)


def _lowest(method: str, column: str, group: str | None, exclude: str | None = None) -> Finding:
    where = "all rows" if group is None else f"{group} rows"
    rest = "" if exclude is None else f" but {exclude}"

    def cases(table: pl.DataFrame) -> list[tuple[str, bool, str]]:
        rows = table if group is None else table.filter(pl.col("group") == group)
        if exclude is not None:
            rows = rows.filter(pl.col("method") != exclude)
        if rows.filter(pl.col("method") == method).height == 0 or rows.height < 2:
            return []
        own = rows.filter(pl.col("method") == method)[column].min()
        best = rows.sort(column).row(0, named=True)
        # a tie with the lowest counts (the paper prints one decimal)
        return [
            (method, own <= best[column], f"{own:.2f}; lowest: {best['method']} {best[column]:.2f}")
        ]

    return Finding(f"{method} lowest {column} among {where}{rest}", cases)


FINDINGS = [
    _multi_vs_one("MMD", lower=True),
    _multi_vs_one("NS MMD", lower=True),
    _multi_vs_one("Acc", lower=False),
    _multi_vs_one("NLL", lower=True),
    _multi_vs_one("ECE", lower=True),
    _multi_vs_one("Brier", lower=True),
    _multi_vs_one("AUPR", lower=False),
    _multi_vs_one("FPR95", lower=True),
    _multi_vs_one("IDMI", lower=False),
    _ood_mi_above_id_mi("multi mode"),
    _ood_mi_above_id_mi("one mode"),
    _lowest(DE, "MMD", None),
    _lowest(DE, "NS MMD", None),
    *[
        _lowest("Laplace", column, group, exclude=DE)
        for column in ("MMD", "NS MMD")
        for group in ("one mode", "multi mode")
    ],
]


def _case_text(case: tuple[str, bool, str], in_paper: bool) -> str:
    subject, holds, detail = case
    marks = ("" if holds else " (not)") + ("" if in_paper else " (beyond the paper)")
    return f"{subject}: {detail}{marks}"


def findings(table1: pl.DataFrame, paper: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows (finding, status, paper, ours, holds, cases): each finding's support in the
    paper's MNIST table ("k of n") and in ours, with every case's figures."""
    paper = paper_table1(PAPER_BLOCK) if paper is None else paper
    paired_in_paper = set(_pairs(paper)["method"])
    rows = []
    for finding in FINDINGS:
        theirs, ours = finding.cases(paper), finding.cases(table1)
        if not ours:
            continue
        tested = {subject for subject, _, _ in theirs} or paired_in_paper
        judged = [case for case in ours if case[0] in tested]
        paper_holds = sum(holds for _, holds, _ in theirs)
        if not theirs and finding.name in STATED_IN_TEXT:
            status = "claim (the paper's text)"
        elif not theirs:
            status = "observation (the paper's table cannot test it)"
        elif paper_holds == len(theirs):
            status = "claim"
        else:
            status = "observation (the paper's table is mixed)"
        rows.append(
            {
                "finding": finding.name,
                "status": status,
                "paper": f"{paper_holds} of {len(theirs)}" if theirs else "-",
                "ours": f"{sum(h for _, h, _ in judged)} of {len(judged)}",
                "holds": all(h for _, h, _ in judged) if status.startswith("claim") else None,
                "cases": "; ".join(_case_text(case, case[0] in tested) for case in ours),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "finding": pl.String,
            "status": pl.String,
            "paper": pl.String,
            "ours": pl.String,
            "holds": pl.Boolean,
            "cases": pl.String,
        },
    )


__all__ = ["FINDINGS", "PAPER_BLOCK", "findings"]
