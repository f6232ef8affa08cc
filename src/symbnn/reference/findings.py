"""Findings against the HMC reference, decided by the tests of `symbnn.report.verdicts` (holds,
within noise, contradicted at its level; never a hand-set threshold).

- "Is the paper's target close to the HMC posterior?" Each HMC chain is a unit: the total
  variation from the target's predictive to the chain's is paired with that from the other
  chains' predictive to the chain's (HMC's own spread). The claim tested is "the target is
  farther from each chain than the other chains are" (signed-rank): holds answers "no",
  contradicted answers "yes: closer than HMC's own chains", within noise leaves it open.
- Per method's variant, "closer to HMC than to the target": each unit's total variation to the
  HMC predictive paired with its total variation to the target's predictive (signed-rank,
  claimed lower): holds reads "closer to HMC", contradicted "closer to the target".
"""

from __future__ import annotations

import polars as pl

from symbnn.report.verdicts import (
    CONTRADICTED,
    HOLDS,
    SIGNED_RANK,
    Verdict,
    compare_paired,
)

TARGET_QUESTION = "is the paper's target close to the HMC posterior?"
SCHEMA = {
    "question": pl.String,
    "compared": pl.String,
    "variant": pl.String,
    "answer": pl.String,
    "verdict": pl.String,
    "test": pl.String,
    "figures": pl.String,
}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _figures(verdict: Verdict, a: list[float], b: list[float], names: tuple[str, str]) -> str:
    return f"mean TV {names[0]} {_mean(a):.4f} vs {names[1]} {_mean(b):.4f} ({verdict.text()})"


def target_decision(chains: pl.DataFrame) -> dict:
    """The target question, on the per-chain table of `predictive.chain_table`."""
    a, b = chains["tv_target"].to_list(), chains["tv_rest"].to_list()
    verdict = compare_paired(a, b, claim_lower=False)
    answer = {
        HOLDS: "no: farther from each chain than HMC's other chains",
        CONTRADICTED: "yes: closer to each chain than HMC's other chains",
    }.get(verdict.outcome, "not resolved: within HMC's own spread at this size")
    return {
        "question": TARGET_QUESTION,
        "compared": "target",
        "variant": "paper",
        "answer": answer,
        "verdict": verdict.outcome,
        "test": f"{SIGNED_RANK}: TV(target, chain) above TV(other chains, chain), per chain",
        "figures": _figures(verdict, a, b, ("target-chain", "rest-chain")),
    }


def method_decision(units: pl.DataFrame, method: str, variant: str) -> dict:
    """Is the method's variant closer to HMC than to the target, unit by unit?"""
    rows = units.filter((pl.col("compared") == method) & (pl.col("variant") == variant))
    a, b = rows["tv"].to_list(), rows["tv_target"].to_list()
    verdict = compare_paired(a, b, claim_lower=True)
    answer = {HOLDS: "closer to HMC", CONTRADICTED: "closer to the target"}.get(
        verdict.outcome, "neither resolved at this size"
    )
    return {
        "question": "closer to HMC than to the paper's target?",
        "compared": method,
        "variant": variant,
        "answer": answer,
        "verdict": verdict.outcome,
        "test": f"{SIGNED_RANK}: TV(unit, HMC) below TV(unit, target), per unit",
        "figures": _figures(verdict, a, b, ("to HMC", "to target")),
    }


def reference_findings(units: pl.DataFrame, chains: pl.DataFrame) -> pl.DataFrame:
    """The target question, then one row per method's variant (table order)."""
    rows = [target_decision(chains)]
    methods = units.filter(pl.col("compared") != "target")
    pairs = dict.fromkeys(zip(methods["compared"].to_list(), methods["variant"].to_list()))
    rows += [method_decision(units, m, v) for m, v in pairs]
    return pl.DataFrame(rows, schema=SCHEMA)
