"""The paper's qualitative findings, tested on our replicated Table 1 and on the paper's own
MNIST table.

Each finding is an ordering between rows of Table 1 (never a sentence written by hand):
multi-mode against single-mode per method, out- against in-distribution MI per row, or one
method against all the others. On the paper's MNIST-OptuNet block (`symbnn.report.paper`),
which has one figure per row, it is read off the point values: a finding the paper's table
supports in every case it can be tested on is a **claim** (``status`` "claim": ours should
agree); so is one the paper states in its text where its table has no column for it (NLL,
section 4.3); one the paper's table contradicts somewhere is an **observation** only, with both
counts, and no claim is made from it.

Ours is decided by a test on the units behind each row (`symbnn.report.verdicts`): every mode
of a one-mode variant and every replicate of a multi-mode variant is one figure, so each case
is "holds", "within noise" or "contradicted" at a stated level, with n and the p-value shown. A
claim is judged on the cases the paper could test (its methods; for a claim from its text, the
methods it ran in both variants): our extra rows (multi-mode SGHMC) are shown, marked "beyond
the paper", and not counted; the claim's verdict holds when every judged case holds, is
contradicted when one is, and is within noise otherwise.

A last row checks what the paper's table cannot: whether a one-mode row's accuracy exceeds the
accuracy of the modes it started from by more than the target posterior's own spread, i.e.
whether its ranking reflects further training rather than its posterior (an ensemble of
several modes beats its members anyway, so multi-mode rows are not judged by it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from symbnn.methods.registry import LABELS
from symbnn.report.paper import paper_table1
from symbnn.report.verdicts import (
    LEVEL,
    RANK_SUM,
    SIGNED_RANK,
    WITHIN_NOISE,
    Verdict,
    all_of,
    compare_groups,
    compare_paired,
    count_outcomes,
)

DE = LABELS["de"]
PAPER_BLOCK = "MNIST - OptuNet"
ONE, MULTI = "one mode", "multi mode"
# section 4.3: "multi-mode techniques consistently demonstrate superior performance in terms of
# MMD [...]. This trend holds true in accuracy and negative log-likelihood."
STATED_IN_TEXT = ("multi-mode NLL below single-mode",)
SCHEMA = {
    "finding": pl.String,
    "status": pl.String,
    "paper": pl.String,
    "ours": pl.String,
    "verdict": pl.String,
    "test": pl.String,
    "cases": pl.String,
}


@dataclass(frozen=True)
class Case:
    """One tested case of a finding on our table: its subject (a method), the outcome and the
    figures behind it."""

    subject: str
    outcome: str
    detail: str


@dataclass(frozen=True)
class Finding:
    name: str
    test: str
    # the paper's table (one figure per row) -> (subject, holds) for every case it can test
    paper_cases: Callable[[pl.DataFrame], list[tuple[str, bool]]]
    # our units (`method_tables.unit_table`) -> a tested Case for every case
    cases: Callable[[pl.DataFrame], list[Case]]


def _values(units: pl.DataFrame, group: str, method: str, column: str) -> list[float]:
    rows = units.filter((pl.col("group") == group) & (pl.col("method") == method))
    return [v for v in rows[column].to_list() if v is not None] if column in rows.columns else []


def _rows(frame: pl.DataFrame, group: str | None = None) -> list[tuple[str, str]]:
    """(group, method) of each row, in table order."""
    if group is not None:
        frame = frame.filter(pl.col("group") == group)
    return list(dict.fromkeys(zip(frame["group"].to_list(), frame["method"].to_list())))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _figures(verdict: Verdict, a: list[float], b: list[float], names: tuple[str, str]) -> str:
    return f"{names[0]} {_mean(a):.2f} vs {names[1]} {_mean(b):.2f} (means; {verdict.text()})"


def _multi_vs_one(column: str, lower: bool) -> Finding:
    word = "below" if lower else "above"

    def paper_cases(table: pl.DataFrame) -> list[tuple[str, bool]]:
        out = []
        for method in {m for g, m in _rows(table, MULTI)} & {m for g, m in _rows(table, ONE)}:
            multi, one = _values(table, MULTI, method, column), _values(table, ONE, method, column)
            if multi and one:
                out.append((method, multi[0] < one[0] if lower else multi[0] > one[0]))
        return sorted(out)

    def cases(units: pl.DataFrame) -> list[Case]:
        out = []
        for _, method in _rows(units, MULTI):
            multi, one = _values(units, MULTI, method, column), _values(units, ONE, method, column)
            if not multi or not one:
                continue
            verdict = compare_groups(multi, one, claim_lower=lower)
            out.append(
                Case(method, verdict.outcome, _figures(verdict, multi, one, ("multi", "one")))
            )
        return out

    return Finding(f"multi-mode {column} {word} single-mode", RANK_SUM, paper_cases, cases)


def _ood_mi_above_id_mi(group: str) -> Finding:
    def paper_cases(table: pl.DataFrame) -> list[tuple[str, bool]]:
        out = []
        for _, method in _rows(table, group):
            ood, idmi = (
                _values(table, group, method, "OODMI"),
                _values(table, group, method, "IDMI"),
            )
            if ood and idmi:
                out.append((method, ood[0] > idmi[0]))
        return out

    def cases(units: pl.DataFrame) -> list[Case]:
        out = []
        for _, method in _rows(units, group):
            rows = units.filter((pl.col("group") == group) & (pl.col("method") == method))
            ood, idmi = rows["OODMI"].to_list(), rows["IDMI"].to_list()
            verdict = compare_paired(ood, idmi, claim_lower=False)
            out.append(
                Case(method, verdict.outcome, _figures(verdict, ood, idmi, ("OODMI", "IDMI")))
            )
        return out

    return Finding(
        f"{group}: OOD mutual information above in-distribution", SIGNED_RANK, paper_cases, cases
    )


def _lowest(method: str, column: str, group: str | None, exclude: str | None = None) -> Finding:
    where = "all rows" if group is None else f"{group} rows"
    rest = "" if exclude is None else f" but {exclude}"

    def scope(frame: pl.DataFrame) -> list[tuple[str, str]]:
        return [(g, m) for g, m in _rows(frame, group) if m != exclude]

    def paper_cases(table: pl.DataFrame) -> list[tuple[str, bool]]:
        rows = scope(table)
        own = [v for g, m in rows if m == method for v in _values(table, g, m, column)]
        others = [v for g, m in rows if m != method for v in _values(table, g, m, column)]
        if not own or not others:
            return []
        # a tie with the lowest counts (the paper prints one decimal)
        return [(method, min(own) <= min(others))]

    def cases(units: pl.DataFrame) -> list[Case]:
        rows = scope(units)
        mine = [(g, m) for g, m in rows if m == method]
        others = [(g, m) for g, m in rows if m != method]
        out = []
        for g, m in mine:
            own = _values(units, g, m, column)
            parts = []
            verdicts = []
            for og, om in others:
                other = _values(units, og, om, column)
                verdict = compare_groups(own, other, claim_lower=True)
                verdicts.append(verdict)
                parts.append(f"vs {om} ({og}): {verdict.outcome}, p={_p(verdict)}")
            label = m if group is not None else f"{m} ({g})"
            detail = f"{_mean(own):.2f} (mean); " + "; ".join(parts)
            out.append(Case(label, all_of(verdicts), detail))
        return out

    return Finding(f"{method} lowest {column} among {where}{rest}", RANK_SUM, paper_cases, cases)


def _p(verdict: Verdict) -> str:
    return "-" if verdict.p_value is None else f"{verdict.p_value:.3g}"


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
    _ood_mi_above_id_mi(MULTI),
    _ood_mi_above_id_mi(ONE),
    _lowest(DE, "MMD", None),
    _lowest(DE, "NS MMD", None),
    *[
        _lowest("Laplace", column, group, exclude=DE)
        for column in ("MMD", "NS MMD")
        for group in (ONE, MULTI)
    ],
]


def _status(finding: Finding, theirs: list[tuple[str, bool]]) -> str:
    if not theirs and finding.name in STATED_IN_TEXT:
        return "claim (the paper's text)"
    if not theirs:
        return "observation (the paper's table cannot test it)"
    if all(holds for _, holds in theirs):
        return "claim"
    return "observation (the paper's table is mixed)"


def _case_text(case: Case, in_paper: bool) -> str:
    return f"{case.subject}: {case.outcome}; {case.detail}" + (
        "" if in_paper else " (beyond the paper)"
    )


def findings(
    units: pl.DataFrame,
    paper: pl.DataFrame | None = None,
    target_accuracy_sd: float | None = None,
) -> pl.DataFrame:
    """Rows (finding, status, paper, ours, verdict, test, cases): each finding's support in
    the paper's MNIST table ("k of n") and its tested outcome in ours, with every case's
    figures, n and p-value. `units` is `method_tables.unit_table`; with `target_accuracy_sd`
    (the target networks' test accuracy sd, x100) a last row names the rows whose accuracy
    exceeds their modes' by more than it."""
    paper = paper_table1(PAPER_BLOCK) if paper is None else paper
    paired_in_paper = {m for _, m in _rows(paper, MULTI)} & {m for _, m in _rows(paper, ONE)}
    out = []
    for finding in FINDINGS:
        theirs, ours = finding.paper_cases(paper), finding.cases(units)
        if not ours:
            continue
        tested = {subject for subject, _ in theirs} or paired_in_paper
        judged = [case for case in ours if case.subject.split(" (")[0] in tested]
        status = _status(finding, theirs)
        out.append(
            {
                "finding": finding.name,
                "status": status,
                "paper": (f"{sum(h for _, h in theirs)} of {len(theirs)}" if theirs else "-"),
                "ours": f"{count_outcomes([c.outcome for c in judged])} of {len(judged)}",
                "verdict": _verdict(judged),
                "test": f"{finding.test}, level {LEVEL}",
                "cases": " | ".join(
                    _case_text(c, c.subject.split(" (")[0] in tested) for c in ours
                ),
            }
        )
    if target_accuracy_sd is not None:
        out.append(training_gain_row(units, target_accuracy_sd))
    return pl.DataFrame(out, schema=SCHEMA)


def _verdict(judged: list[Case]) -> str:
    outcomes = [c.outcome for c in judged]
    if not outcomes:
        return WITHIN_NOISE
    if "contradicted" in outcomes:
        return "contradicted"
    return "holds" if all(o == "holds" for o in outcomes) else WITHIN_NOISE


def training_gain_row(units: pl.DataFrame, target_sd: float) -> dict[str, str]:
    """The one-mode rows whose mean accuracy exceeds the mean accuracy of their modes by more
    than the target networks' standard deviation: their ranking reflects further training (a
    method that trains on from its mode) rather than the posterior it samples. Multi-mode rows
    are left out: an ensemble of several modes is expected to beat its members without any
    further training."""
    flagged, lines = [], []
    for group, method in _rows(units, ONE):
        acc = _values(units, group, method, "Acc")
        modes = _values(units, group, method, "Modes acc")
        if not acc or not modes:
            continue
        gain = _mean(acc) - _mean(modes)
        beyond = gain > target_sd
        lines.append(f"{method}: {gain:+.2f} points{' (beyond)' if beyond else ''}")
        if beyond:
            flagged.append(method)
    return {
        "finding": "one-mode accuracy above its modes' by more than the target's spread",
        "status": "check (not in the paper)",
        "paper": "-",
        "ours": f"{len(flagged)} of {len(lines)} rows",
        "verdict": ", ".join(flagged) if flagged else "none",
        "test": f"mean Acc - mean Modes acc > target accuracy sd ({target_sd:.2f} points)",
        "cases": " | ".join(lines),
    }


__all__ = ["FINDINGS", "PAPER_BLOCK", "findings", "training_gain_row"]
