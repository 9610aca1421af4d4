"""The precise extractive answerer: signals, ordering, citations, languages — no database."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pgcite.answer import ContextPassage, GenerationRequest
from pgcite.answer._precise import PreciseGenerator, PreciseOptions, terms
from pgcite.answer._qtype import has_answer_type, question_kind
from pgcite.embed._base import EmbedderSpec, Vectors, normalize

PASSAGES = [
    ContextPassage(id="p1", author=None, date=None, rank=1, text=(
        "The Panthers defense was ranked sixth in the league. The defense gave up just 308 "
        "points. Kawann Short led the team in sacks.")),
    ContextPassage(id="p2", author=None, date=None, rank=2, text=(
        "The stadium opened in 1996. It holds seventy thousand people.")),
]


class KeywordEmbedder:
    """A deterministic stand-in: a vector per vocabulary word present (counts calls)."""

    spec = EmbedderSpec(id="kw", version="1", dim=8, max_tokens=512)
    vocab = ("points", "surrender", "gave", "sacks", "stadium", "opened", "people", "defense")

    def __init__(self) -> None:
        self.document_calls = 0

    def _vec(self, text: str) -> Vectors:
        lowered = text.lower()
        return normalize([[float(w in lowered) + 0.01 for w in self.vocab]])

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.document_calls += 1
        return np.vstack([self._vec(t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        return self._vec(text)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def answer(question: str, generator: PreciseGenerator,
           passages: list[ContextPassage] = PASSAGES) -> str:
    return generator.generate(GenerationRequest(question=question, passages=passages,
                                                abstention_text="ABSTAIN"))


def test_first_sentence_answers_and_cites_only_what_it_quotes() -> None:
    embedder = KeywordEmbedder()
    text = answer("How many points did the defense surrender?",
                  PreciseGenerator(embedder=embedder))
    first = text.splitlines()[0]
    assert first == "The defense gave up just 308 points. [p1]"
    assert embedder.document_calls == 1  # every candidate sentence in one call
    for line in text.splitlines():  # each line cites the passage whose sentence it quotes
        quote, cited = line.rsplit(" [", 1)
        source = next(p for p in PASSAGES if p.id == cited.rstrip("]"))
        assert quote in source.text


def test_answer_type_cue_prefers_the_sentence_with_a_date() -> None:
    passages = [ContextPassage(id="a", author=None, date=None, rank=1, text=(
        "The stadium was a gift of the city. The stadium opened in 1996."))]
    text = answer("When was the stadium opened by the city?",
                  PreciseGenerator(options=PreciseOptions(embedding=0.0, max_sentences=1)),
                  passages)
    assert text == "The stadium opened in 1996. [a]"


def test_a_dated_entry_answers_when_with_its_date_not_a_year_it_mentions() -> None:
    text = "Margaret arrived from Hull to stay. Margaret brought the clock from 1849."
    only = PreciseGenerator(options=PreciseOptions(embedding=0.0, max_sentences=1))
    dated = ContextPassage(id="e", author=None, date="1852-04-28", rank=1, text=text)
    assert answer("When did Margaret arrive?", only, [dated]) == (
        "The entry of 28 April 1852 says: “Margaret arrived from Hull to stay.” [e]")
    # undated, a year in a sentence is still the cue: the passage gives no other "when"
    undated = ContextPassage(id="u", author=None, date=None, rank=1, text=text)
    assert answer("When did Margaret arrive?", only, [undated]).startswith("Margaret brought")


def test_a_sentence_that_only_restates_the_question_does_not_lead() -> None:
    passages = [ContextPassage(id="m", author=None, date="1852-05-12", rank=1, text=(
        "The clock is mended. A tinker charged me a shilling. It strikes behind the church."))]
    only = PreciseGenerator(options=PreciseOptions(embedding=0.0, max_sentences=1))
    assert answer("What did the tinker charge to mend the clock?", only, passages) == (
        "The entry of 12 May 1852 says: “A tinker charged me a shilling.” [m]")
    # a yes-or-no question asks for no new word: the restating sentence may answer it
    assert "The clock is mended." in answer("Was the clock mended?", only, passages)


def test_nothing_matches_without_an_embedder_abstains() -> None:
    assert answer("Who painted the ceiling?", PreciseGenerator()) == "ABSTAIN"


def test_redundant_sentences_are_not_repeated() -> None:
    passages = [ContextPassage(id="a", author=None, date=None, rank=1,
                               text="The defense gave up 308 points."),
                ContextPassage(id="b", author=None, date=None, rank=2,
                               text="The defense gave up 308 points in all.")]
    text = answer("How many points did the defense give up?", PreciseGenerator(), passages)
    assert text == "The defense gave up 308 points. [a]"


def test_attributed_passages_keep_the_speaker() -> None:
    passages = [ContextPassage(id="d1", author="Samuel Pepys", date="1666-09-14", rank=1,
                               text="I dug a pit in the garden and put my Parmazan cheese in it.")]
    request = GenerationRequest(question="Where did he bury his Parmazan cheese?",
                                passages=passages, persona="Samuel Pepys", abstention_text="x")
    assert PreciseGenerator().generate(request) == (
        "On 14 September 1666 I wrote: “I dug a pit in the garden and put my Parmazan cheese in it.” [d1]")


def test_arabic_terms_strip_the_article_and_clitics() -> None:
    assert terms("والدفاع عن الفريق", "arabic") == ["دفاع", "فريق"]
    passages = [ContextPassage(id="ar", author=None, date=None, rank=1,
                               text="افتتح الملعب عام 1996. يتسع الملعب لسبعين ألف شخص.")]
    text = answer("متى افتتح الملعب؟", PreciseGenerator(language="arabic", options=PreciseOptions(
        embedding=0.0, max_sentences=1)), passages)
    assert text == "افتتح الملعب عام 1996. [ar]"


def test_question_kinds_and_cues() -> None:
    assert question_kind("How many points did they score?") == "how many"
    assert question_kind("In what year did it open?") == "when"
    assert question_kind("Who led the team?") == "who"
    assert question_kind("كم نقطة سجلوا؟") == "how many"
    assert question_kind("متى افتتح؟") == "when"
    assert question_kind("Tell me about the fire") == "other"
    assert has_answer_type("who", "The sacks were led by Kawann Short.")
    assert not has_answer_type("who", "Short led.")
    assert has_answer_type("how many", "They had four sacks.")


class CountingEmbedder(KeywordEmbedder):
    """Remembers how many sentences it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        return super().embed_documents(texts)


def test_only_the_shortlist_is_embedded() -> None:
    embedder = CountingEmbedder()
    text = answer("How many points did the defense surrender?",
                  PreciseGenerator(embedder=embedder, options=PreciseOptions(embed_top=2)))
    assert len(embedder.embedded) == 2  # of 5 candidate sentences
    assert text.splitlines()[0] == "The defense gave up just 308 points. [p1]"


def test_a_second_sentence_from_the_best_passage_needs_less_score() -> None:
    passages = [ContextPassage(id="a", author=None, date=None, rank=1, text=(
        "The stadium opened in 1996. It was paid for by the city of Denver.")),
                ContextPassage(id="b", author=None, date=None, rank=2, text=(
        "Denver is a city in Colorado."))]
    strict = PreciseOptions(embedding=0.0, follow_ratio=0.99, same_passage_ratio=0.99)
    lenient = strict.model_copy(update={"same_passage_ratio": 0.0})
    question = "When did the stadium open?"
    assert answer(question, PreciseGenerator(options=strict), passages) == (
        "The stadium opened in 1996. [a]")
    assert answer(question, PreciseGenerator(options=lenient), passages).splitlines() == [
        "The stadium opened in 1996. [a]", "It was paid for by the city of Denver. [a]"]


def test_question_words_after_what_or_which_set_the_kind() -> None:
    assert question_kind("What year did the stadium open?") == "when"
    assert question_kind("In which decade was it built?") == "when"
    assert question_kind("What percentage of voters agreed?") == "how many"
    assert question_kind("What team won?") == "what"


def test_an_old_spelling_matches_the_question_as_asked_today() -> None:
    # the diary writes "The Rivalls" and "musique"; questions ask "The Rivals" and "music"
    assert terms("saw The Rivalls with musique", "english") == terms(
        "saw The Rivals with music", "english")
    assert terms("severall generall matters", "english") == terms(
        "several general matters", "english")
    diary = [
        ContextPassage(id="a", author=None, date=None, rank=1, text=(
            "Read the Rival Ladies, a very pretty play. Then home to bed.")),
        ContextPassage(id="b", author=None, date=None, rank=2, text=(
            "Saw The Rivalls, no excellent play, but good acting in it.")),
    ]
    # unfolded, "Rivalls" matched nothing and the better-ranked "Rival Ladies" tied and won
    first = answer("Was The Rivals a good play?", PreciseGenerator(), diary).splitlines()[0]
    assert first.endswith("[b]"), first
