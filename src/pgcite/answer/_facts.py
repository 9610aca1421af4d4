"""Entity questions answered from the graph: the facts an answer states before its quotes.

For a who/where/how-often question the entity graph (:mod:`pgcite.retrieve._entities`) knows
what the top passages alone cannot: which people or places are named together with the entity
the question names, and in how many passages. The answer states that in one sentence --
"People named with Sir W. Penn: Sir W. Batten in 42 passages [a][b], ..." -- citing for each
entity only passages that name both, read from the same snapshot under the same filters as the
search (so never one after the cutoff). Those passages join the answer's sources, and the
citation check treats them like the retrieved ones: a fact cites nothing else.

The counts are passages that *name* both, not meetings: the sentence says "named with".

The facts are stated only where they aggregate (MIN_TOP, MIN_EACH): an entity named with the
anchor in one passage is that passage's content, which the quotes carry. Most who/where
questions of a factoid set are not about companions ("Who was the Norse leader?"): on XQuAD en's
165 who/where/how-often questions, stating every fact first cut first-sentence containment from
0.751 to 0.479 and citation precision from 0.976 to 0.809; with these gates 0.746 and 0.959,
while the judged Pepys who/where set keeps all its gain (bench/results/entities, docs/answers.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pgcite.answer._context import to_passage
from pgcite.answer._extractive import _WORD, content_words
from pgcite.answer._types import ContextPassage, EntityFact
from pgcite.retrieve._entities import KIND_LABELS, EntityEvidence, RelatedEntity
from pgcite.retrieve._hits import Hit

# Evidence for one answer: the question is bound, the ids to cite first are given.
Evidence = Callable[[Sequence[str]], EntityEvidence | None]
_HEADS = {"who": "People named with {anchor}: ", "where": "Places named with {anchor}: "}
# who/where: the first entity must be named with the anchor in MIN_TOP passages, each stated
# one in MIN_EACH. how often: the count is the answer, whatever it is, but only of a person or
# a place ("How often do Parliament elections take place?" asks no count of passages).
MIN_TOP, MIN_EACH = 3, 2
_COUNTED = frozenset(KIND_LABELS["person"] + KIND_LABELS["place"])
# ... and only for a question about the entities' presence: how often someone was seen, met,
# visited or mentioned. One that asks how often something happened ("How many times has
# Polonia won the cup?", "How many times did plague occur in Venice?") is not answered by how
# many passages name the entity (XQuAD en: "Polonia is named in 1 passage" was quoted first
# where "won the cup twice" answers). The question's words other than its names must all be
# among these (stemmed as the answerer stems).
_PRESENCE = frozenset(content_words(
    "often frequently times together see saw seen meet met visit mention name named write wrote"
    " written speak spoke spoken talk dine call go went gone come came hear heard"))


@dataclass
class Facts:
    """The facts' sentence, the passages it cites that the generator was not given (as
    context passages for the check and as hits for the sources), and the facts themselves."""

    text: str = ""
    passages: list[ContextPassage] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    entities: list[EntityFact] = field(default_factory=list)


def entity_facts(evidence: EntityEvidence | None, given: Sequence[ContextPassage],
                 question: str) -> Facts:
    """The sentence stating ``evidence`` (empty without evidence, or with nothing to state),
    citing only its passages that the request may see (``evidence.passages``)."""
    if evidence is None or (evidence.ask == "how often" and not asks_presence(question)):
        return Facts()
    readable = {h.id for h in evidence.passages}
    facts = [f for f in (_fact(evidence, e, readable) for e in _stated(evidence))
             if f.citations]
    if not facts:
        return Facts()
    known = {p.id for p in given}
    cited = {c for f in facts for c in f.citations}
    hits = [h for h in evidence.passages if h.id in cited and h.id not in known]
    passages = [to_passage(h).model_copy(update={"rank": len(given) + i + 1})
                for i, h in enumerate(hits)]
    return Facts(text=_sentence(evidence, facts), passages=passages, hits=hits,
                 entities=facts)


def asks_presence(question: str) -> bool:
    """Whether a how-often question asks only how often its names occur (see _PRESENCE): its
    words after the first, leaving out capitalised ones (the names), are all presence words."""
    words = [w for w in _WORD.findall(question)[1:] if not w[:1].isupper()]
    return content_words(" ".join(words)) <= _PRESENCE


def _stated(evidence: EntityEvidence) -> list[RelatedEntity]:
    """The entities worth a sentence (see MIN_TOP, MIN_EACH and _COUNTED)."""
    entities = evidence.entities
    if evidence.ask == "how often":
        return entities if evidence.anchor.label in _COUNTED else []
    if not entities or entities[0].chunks < MIN_TOP:
        return []
    return [e for e in entities if e.chunks >= MIN_EACH]


def _fact(evidence: EntityEvidence, entity: RelatedEntity, readable: set[str]) -> EntityFact:
    return EntityFact(ask=evidence.ask, anchor=evidence.anchor.name, name=entity.name,
                      key=entity.key, label=entity.label, passages=entity.chunks,
                      citations=[c for c in entity.citations if c in readable])


def _sentence(evidence: EntityEvidence, facts: list[EntityFact]) -> str:
    def cites(fact: EntityFact) -> str:
        return "".join(f"[{c}]" for c in fact.citations)

    def count(n: int) -> str:
        return f"{n} passage" + ("" if n == 1 else "s")

    anchor = evidence.anchor.name
    if evidence.ask == "how often":
        fact = facts[0]
        if fact.key == evidence.anchor.key:
            return f"{anchor} is named in {count(fact.passages)} {cites(fact)}."
        return f"{anchor} and {fact.name} are named together in {count(fact.passages)} {cites(fact)}."
    parts = [f"{f.name} in {count(f.passages) if i == 0 else f.passages} {cites(f)}"
             for i, f in enumerate(facts)]
    return _HEADS[evidence.ask].format(anchor=anchor) + ", ".join(parts) + "."
