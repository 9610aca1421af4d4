"""Answerability: does the collection answer this query, from what retrieval already knows?

A single best-cosine threshold cannot tell "the archive does not say" from "the archive says it
in other words": a paraphrase scores as low as an absent topic. The hybrid statement returns, at
no extra round trip, further evidence from both legs (columns computed before its LIMIT, so none
depends on ``top_k``):

- ``cosine``: the best cosine similarity among the vector leg's candidates;
- ``coverage``: the share of the query's BM25 idf mass held by lexemes the snapshot contains
  (a lexeme the snapshot lacks counts with document frequency 0, the largest idf);
- ``best_coverage``: the share of that mass held by the best keyword hit's own lexemes;
- ``agreement``: how many of the two legs' top ``EVIDENCE_DEPTH`` candidates both legs found,
  as a share of ``EVIDENCE_DEPTH``;
- ``gap``: how far the best cosine stands above the ``EVIDENCE_DEPTH``-th best (a flat top
  suggests nothing in particular matched);
- ``unknown_names``: how many of the query's names (capitalised words: people, places, titles)
  the snapshot has never seen -- "Rembrandt", "Sedgemoor" or "Pennsylvania" put to a diary that
  never names them. The cosine cannot see this (a question about an unknown painter is still
  a question about painting), and the idf-mass ``coverage`` dilutes it among the other words;
- ``terms``: how many distinct lexemes the query has. Not evidence by itself, but the scale the
  coverage shares are read on: a long question ("What happened when the Dutch fleet raided the
  Medway and Chatham in June 1667?") is rarely held whole by one passage, while a short one
  missing its one topic word ("Did Pepys eat potatoes?") is. Without it the fit took every long
  question's lower coverage for absence.

A small logistic model turns them into one probability. It is fitted on judged queries
(``pgcite eval COLLECTION --golden FILE --fit-abstention``, in pure numpy), stored in the
collection's settings under the embedding model it was fitted for, and refused for any other
model: the signals' scales belong to one model.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pgcite._errors import ConfigError
from pgcite.retrieve._hits import Hit, SearchResult
from pgcite.retrieve._query_text import unaccented
from pgcite.retrieve._sql import EVIDENCE_DEPTH
from pgcite.retrieve._verbs import IRREGULAR
from pgcite.retrieve._when import UPPER_BOUND, YEAR
from pgcite.store._collections import CollectionSettings, validate_name

SIGNALS: tuple[str, ...] = ("cosine", "coverage", "best_coverage", "agreement", "gap",
                             "unknown_names", "terms")
# Signals where a HIGHER value speaks for abstaining (every other signal: higher = answerable).
# A one-signal threshold rule reads them negated, so "abstain below t" means the same for all.
ABSENT_WHEN_HIGH: frozenset[str] = frozenset({"unknown_names"})
# The signals the fitted score combines by default (every signal is still reported alone).
FEATURES: tuple[str, ...] = SIGNALS
# The signals the shipped default model reads: no cosine and no gap, whose scales belong to one
# embedding model (and, measured, to one collection): so one model serves every embedding
# model, fp32 or int8 MiniLM, e5, a server's (bench/abstention.py).
LEXICAL: tuple[str, ...] = ("coverage", "best_coverage", "agreement", "unknown_names", "terms")
# L2 penalty on the standardised weights: with ~100 judged queries an unpenalised fit runs
# off to infinity as soon as the classes separate; 1.0 keeps weights finite and changes little
# when they do not.
DEFAULT_L2 = 1.0
# Abstain below this probability. The fit weighs both classes equally (balanced accuracy is
# the target), so 0.5 is its natural decision point.
DEFAULT_CUT = 0.5
MODEL_VERSION = 1


# A word (letters first, then letters, digits, apostrophes or hyphens); a name is one written
# with a capital. Stop words ("What", "Did") fall out when the database analyses them.
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


# A regnal or ordinal numeral ("Charles II", "Henry VIII", "Part IV"): written in capitals but
# not a name, and archives write it other ways ("Charles the Second"), so as a name it was
# "unknown" in answerable questions.
_NUMERAL = re.compile(r"X{0,3}(IX|IV|V?I{0,3})")


def names_text(text: str) -> str:
    """The query's capitalised words, for the ``unknown_names`` signal (empty for scripts
    without capitals, where the signal is 0); roman numerals are not names. A hyphenated word
    counts by its capitalised parts: PostgreSQL's parser also gives the whole compound as a
    lexeme ("huguenot-descend"), which a collection that writes "Huguenot" and "descended" lacks,
    so "Huguenot-descended" counted as an unknown name (XQuAD en)."""
    return " ".join(part for w in _WORD.findall(text) for part in w.split("-")
                    if part and part[0].isupper() and not _NUMERAL.fullmatch(part))


# The signals the keyword leg reads off the question's words (the others come from the legs'
# ranks and the cosine).
WORDING_SIGNALS: tuple[str, ...] = ("coverage", "best_coverage", "unknown_names", "terms")
_POSSESSIVE = re.compile(r"['’]s$")


def metadata_words(question: str, hits: Sequence[Hit]) -> list[str]:
    """The question's words that name what the passages' metadata says, not what their text
    does: a name that is a word of a retrieved passage's author ("Pepys", or "Pepys's", put to
    passages by "Samuel Pepys"), a year the retrieved passages' dates span ("in 1666" put to
    entries dated 1660-1668) and, where the passages are dated, a year that bounds the question
    from above ("up to 1664", "before 1664": the time frame a cutoff states, not a topic). A
    journal seldom writes its writer's name or its own years, so in the text such a word is
    unknown and holds a large share of the question's idf mass: read as evidence it makes every
    question about the writer, or about a year of the journal, look absent, though it only says
    whose words, and when, are asked about."""
    authors = {w.casefold() for h in hits if h.author for w in _WORD.findall(h.author)}
    found: list[str] = []
    for word in names_text(question).split():
        base = _POSSESSIVE.sub("", word)
        if base.casefold() in authors and base not in found:
            found.append(base)
    dates = [d for h in hits for d in (h.date_start, h.date_end) if d is not None]
    if dates:
        first, last = min(dates).year, max(dates).year
        bounds = set(UPPER_BOUND.findall(question))
        found += [y for y in dict.fromkeys(YEAR.findall(question))
                  if first <= int(y) <= last or y in bounds]
    return found


def respellings(question: str, hits: Sequence[Hit]) -> dict[str, str]:
    """The question's words that the retrieved passages write otherwise, each mapped to the
    passages' form; the keyword leg's statistics would read them as words the passages lack:

    - a name with other accents ("Maiziere" -> "Maizière", "Muller" -> "Müller"): people type a
      name as their keyboard allows, and PostgreSQL's configurations fold case, not accents (an
      XQuAD question naming him abstained as if the archive never did);
    - an irregular verb asked in its base form and written in its past ("What did Hartley
      lend?" -> "lent", "begin" -> "began"; retrieve/_verbs.py): Snowball folds "lends" and
      "lending" into "lend", never "lent", and questions ask with "did" and the base form while
      letters, journals and minutes narrate in the past.

    A word some retrieved passage writes as asked (a verb also in its regular forms) needs
    none."""
    names: dict[str, str] = {}
    for word in names_text(question).split():
        name = _POSSESSIVE.sub("", word)
        names.setdefault(unaccented(name), name)
    verbs = [w for w in dict.fromkeys(x.casefold() for x in _WORD.findall(question))
             if IRREGULAR.get(w)]
    written = {form: v for v in verbs for form in IRREGULAR[v]}
    as_asked_forms = {form: v for v in verbs for form in (v, v + "s", v + "es", v + "ing")}
    found: dict[str, str] = {}
    as_asked: set[str] = set()
    for hit in hits:
        for word in _WORD.findall(hit.body):
            folded = word.casefold()
            if (verb := as_asked_forms.get(folded)) is not None:
                as_asked.add(verb)
            elif (verb := written.get(folded)) is not None:
                found.setdefault(verb, folded)
            elif (named := names.get(unaccented(word))) is not None:
                if folded == named.casefold():
                    as_asked.add(named)
                else:
                    found.setdefault(named, word)
    return {asked: word for asked, word in found.items() if asked not in as_asked}


class Wording(NamedTuple):
    """What :func:`read_wording` changed in the question before reading its wording signals."""

    left_out: list[str]  # metadata words (:func:`metadata_words`)
    respelled: dict[str, str]  # words as the passages write them (:func:`respellings`)

    def describe(self) -> str:
        """One clause for the answer's trace (empty when nothing changed)."""
        parts = []
        if self.left_out:
            parts.append("without the words the metadata says (the writer's name, the "
                         "sources' years, a bounding year): " + ", ".join(self.left_out))
        if self.respelled:
            parts.append("with words as the passages write them: " + ", ".join(
                f"{name} -> {spelling}" for name, spelling in self.respelled.items()))
        return "; ".join(parts)


def read_wording(question: str, result: SearchResult,
                 keyword_search: Callable[[str], SearchResult]) -> tuple[SearchResult, Wording]:
    """``result`` with the wording signals (:data:`WORDING_SIGNALS`) read off the question as
    the passages would write it: without its metadata words (:func:`metadata_words`) and with
    its words written as the retrieved passages write them (:func:`respellings`), by
    ``keyword_search`` of that text (one keyword-only statement, no embedding); unchanged when
    neither applies."""
    wording = Wording(metadata_words(question, result.hits), respellings(question, result.hits))
    if not wording.left_out and not wording.respelled:
        return result, wording
    text = question
    for name, spelling in wording.respelled.items():
        text = re.sub(rf"\b{re.escape(name)}\b", spelling, text, flags=re.IGNORECASE)
    if wording.left_out:
        pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, wording.left_out))
                             + r")(?:['’]s)?\b")
        text = " ".join(pattern.sub(" ", text).split())
    if not _WORD.search(text):
        return result, Wording([], {})
    read = keyword_search(text).signals
    signals = {**result.signals, **{k: read.get(k) for k in WORDING_SIGNALS}}
    return result.model_copy(update={"signals": signals}), wording


def signals_from_row(row: Mapping[str, Any]) -> dict[str, float | None]:
    """The signals of one search, from any row of the hybrid statement (they are constant)."""

    def num(key: str) -> float | None:
        value = row.get(key)
        return None if value is None else float(value)

    overlap = num("leg_overlap")
    return {
        "cosine": num("best_similarity"),
        "coverage": num("coverage"),
        "best_coverage": num("best_coverage"),
        "agreement": None if overlap is None else overlap / EVIDENCE_DEPTH,
        "gap": num("similarity_gap"),
        "unknown_names": num("unknown_names"),
        "terms": num("query_terms"),
    }


def orientation(name: str) -> float:
    """+1 when a higher ``name`` speaks for answering, -1 when for abstaining."""
    return -1.0 if name in ABSENT_WHEN_HIGH else 1.0


def signal_values(signals: Mapping[str, float | None], names: Sequence[str]) -> list[float] | None:
    """The named signals as numbers, or None when the best cosine is missing (no vector leg:
    nothing to score). A missing lexical signal (a query of stop words only) counts as 0:
    there is nothing in it for the keyword leg to find."""
    if signals.get("cosine") is None:
        return None
    return [float(signals.get(name) or 0.0) for name in names]


class AnswerabilityModel(BaseModel):
    """A fitted logistic answerability score for one embedding model and retrieval mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = MODEL_VERSION
    model_key: str = Field(description="the embedding model (id@version) it was fitted for")
    mode: str = "hybrid"
    signals: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    cut: float = DEFAULT_CUT
    l2: float = DEFAULT_L2
    fitted_on: str = ""
    fitted_at: str = ""
    cross_validated: dict[str, Any] = Field(
        default_factory=dict, description="the leave-one-out figures reported when it was fitted")

    @model_validator(mode="after")
    def _one_value_per_signal(self) -> AnswerabilityModel:
        # a stored model with a column short would fail at the first answer, far from its cause
        if not len(self.mean) == len(self.scale) == len(self.weights) == len(self.signals):
            raise ValueError(f"mean, scale and weights need one value per signal "
                             f"({len(self.signals)}: {', '.join(self.signals)})")
        return self

    def probability(self, result: SearchResult) -> float | None:
        """P(answerable) for a search result; None when the model cannot score it (another
        retrieval mode, or no vector leg). Another embedding model is refused outright."""
        if result.embedding_model != self.model_key:
            raise ConfigError(
                f"the answerability model was fitted for {self.model_key}, not "
                f"{result.embedding_model}",
                hint="refit it: pgcite eval COLLECTION --golden FILE --fit-abstention")
        if result.mode != self.mode:
            return None
        values = signal_values(result.signals, self.signals)
        if values is None:
            return None
        return float(self.predict(np.asarray([values]))[0])

    def predict(self, x: np.ndarray) -> np.ndarray:
        """P(answerable) for raw signal rows (columns in ``self.signals`` order)."""
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.weights) + self.bias)


def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = DEFAULT_L2,
                 sample_weight: np.ndarray | None = None,
                 iterations: int = 100) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression by Newton's method: (weights, bias).

    The bias is not penalised. ``sample_weight`` defaults to 1 per row. Converges in a handful
    of steps on standardised inputs; the penalty keeps separable data finite.
    """
    n, d = x.shape
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    design = np.hstack([x, np.ones((n, 1))])
    penalty = np.diag([l2] * d + [0.0])
    theta = np.zeros(d + 1)
    for _ in range(iterations):
        p = _sigmoid(design @ theta)
        grad = design.T @ (sw * (p - y)) + penalty @ theta
        hessian = design.T @ (design * (sw * p * (1 - p))[:, None]) + penalty
        # a tiny ridge keeps the step defined when a class is absent or a column constant
        step = np.linalg.solve(hessian + 1e-9 * np.eye(d + 1), grad)
        theta -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return theta[:d], float(theta[d])


def fit_model(x: np.ndarray, y: np.ndarray, *, model_key: str, names: Sequence[str] = FEATURES,
              mode: str = "hybrid", l2: float = DEFAULT_L2, fitted_on: str = "",
              cross_validated: Mapping[str, Any] | None = None,
              sample_weight: np.ndarray | None = None) -> AnswerabilityModel:
    """Standardise the signals, weigh both classes equally (or as ``sample_weight`` says:
    a pooled fit weighs each collection's classes equally), fit (``y``: 1 = answerable)."""
    if len(set(y.tolist())) < 2:
        raise ConfigError("fitting an answerability score needs answerable and absent queries",
                          hint="add queries of kind absent (no relevant documents)")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    weights, bias = fit_logistic(
        (x - mean) / scale, y, l2=l2,
        sample_weight=balanced_weights(y) if sample_weight is None else sample_weight)
    return AnswerabilityModel(
        model_key=model_key, mode=mode, signals=list(names), mean=mean.tolist(),
        scale=scale.tolist(), weights=weights.tolist(), bias=bias, l2=l2, fitted_on=fitted_on,
        fitted_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        cross_validated=dict(cross_validated or {}))


# Where the default model lives (package data), and the key of its model for any embedding
# model it has no model of its own for.
DEFAULT_FILE = "answerability_default.json"
ANY_MODEL = "*"


def model_family(model_key: str) -> str:
    """The embedding model a key names, without version or variant: fp32 and int8 MiniLM
    ("all-MiniLM-L6-v2@ab12", "all-MiniLM-L6-v2@ab12+int8", "all-MiniLM-L6-v2-int8@ab12") are
    one family -- int8 vectors are within 0.01 cosine of fp32 ones, so the signals read alike."""
    return re.sub(r"-int8$", "", model_key.split("@", 1)[0])


class DefaultAnswerability(BaseModel):
    """The answerability model that ships with pgcite: it decides for every collection without
    a fitted model of its own. ``models`` are keyed by embedding-model family, ``*`` for any;
    the shipped file has the one ``*`` model over the :data:`LEXICAL` signals, which read
    alike under every embedding model (a family's own model would come first). Fitted on
    pooled judged sets of several collections; ``figures`` are its leave-one-collection-out
    figures (bench/abstention.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    models: list[AnswerabilityModel]
    # The text-search configurations (languages) it was fitted and measured on: a collection in
    # another language keeps the cosine threshold (none for e5: it abstains only when nothing
    # is found, as before), since stop words, stemming and capitals change every signal.
    languages: list[str] = Field(default_factory=lambda: ["english"])
    figures: dict[str, Any] = Field(default_factory=dict)

    def for_key(self, model_key: str, language: str = "english") -> AnswerabilityModel | None:
        """The model for this embedding model (keyed to it) in a collection of this language,
        or None when none applies."""
        if language not in self.languages:
            return None
        family = model_family(model_key)
        for candidate in (family, ANY_MODEL):
            for model in self.models:
                if model.model_key == candidate:
                    return model.model_copy(update={"model_key": model_key})
        return None


@functools.cache
def shipped_default() -> DefaultAnswerability:
    """The default model in the package (read once per process)."""
    text = resources.files("pgcite.retrieve").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return DefaultAnswerability.model_validate_json(text)


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Per-row weights giving both classes the same total weight (n / 2 each)."""
    counts = {label: int(np.sum(y == label)) for label in (0, 1)}
    return np.array([len(y) / (2 * counts[int(label)]) for label in y])


def stored_model(settings: CollectionSettings, model_key: str) -> AnswerabilityModel | None:
    """The model fitted for ``model_key`` in these settings, if any."""
    payload = settings.abstention.get(model_key)
    return None if payload is None else AnswerabilityModel.model_validate(payload)


def store_model(conn: psycopg.Connection, collection: str, model: AnswerabilityModel) -> None:
    """Save the model under its embedding model in the collection's settings, in place (other
    settings and other models' entries are left as they are)."""
    row = conn.execute(
        "UPDATE pgcite.collections SET settings = jsonb_set(settings, '{abstention}',"
        " coalesce(settings->'abstention', '{}'::jsonb) || jsonb_build_object(%s::text, %s))"
        " WHERE name = %s RETURNING name",
        (model.model_key, Jsonb(model.model_dump(mode="json")), validate_name(collection)),
    ).fetchone()
    if row is None:
        raise ConfigError(f"no collection named {collection!r}")


def answerability_verdict(result: SearchResult, model: AnswerabilityModel | None,
                          threshold: float | None,
                          decider: str = "fitted") -> tuple[bool, str | None]:
    """Whether to answer on this retrieval, and what decided it (None: nothing did -- no model
    could score it and no threshold applies). A model (the collection's fitted one, or the
    default: ``decider`` names it) decides when it can score the result; otherwise the bare
    best-cosine ``threshold`` does. The reason is given both ways, so that an answer's trace
    says how close it came to abstaining, not only an abstention's."""
    if model is not None:
        p = model.probability(result)
        if p is not None:
            shown = ", ".join(f"{k} {v:.3f}" for k, v in result.signals.items() if v is not None)
            ok = p >= model.cut
            return ok, (f"answerability {p:.3f} {_relation(ok)} {model.cut:.3f} "
                        f"(the {decider} model; {shown})")
    if threshold is not None and result.confidence is not None:
        ok = result.confidence >= threshold
        return ok, (f"best similarity {result.confidence:.3f} {_relation(ok)} the threshold "
                    f"{threshold:.3f}")
    return True, None


def _relation(answer: bool) -> str:
    return "is at or above" if answer else "is below"


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free for large |z|

