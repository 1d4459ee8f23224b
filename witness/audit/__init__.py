"""Audit: agreement (Cohen's / Fleiss' kappa), consensus review, stratified samples, blind
adjudication, a calibrated LLM judge and the release gate."""

from .adjudicate import AdjudicationReport, adjudicate
from .agreement import AgreementReport, agreement, grounded_agreement
from .gate import GateReport, gate
from .judge import CORRUPTIONS, JudgeReport, corrupt, judge
from .kappa import KappaResult, cohen_kappa, fleiss_kappa
from .review import ConsensusResult, consensus
from .sample import allocate, blind, stratified_sample
from .simulate import simulate_review

__all__ = [
    "AdjudicationReport", "adjudicate", "AgreementReport", "agreement", "grounded_agreement", "GateReport", "gate",
    "CORRUPTIONS", "JudgeReport", "corrupt", "judge", "KappaResult", "cohen_kappa", "fleiss_kappa",
    "ConsensusResult", "consensus", "allocate", "blind", "stratified_sample", "simulate_review",
]
