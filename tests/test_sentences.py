"""Sentence splitting for quotes: hard-wrapped text, abbreviations, old and Arabic punctuation."""

from __future__ import annotations

import pytest

from pgcite.answer import ContextPassage, ExtractiveGenerator, GenerationRequest, split_sentences

WRAPPED = """The first portable model was small enough that it could run for a whole day
on one battery. Mr. Smith of St. Paul's, who built it, said so in 1901.

A second paragraph starts here. It has two sentences."""


def test_soft_line_breaks_are_unwrapped_and_paragraphs_kept() -> None:
    assert split_sentences(WRAPPED) == [
        "The first portable model was small enough that it could run for a whole day on one "
        "battery.",
        "Mr. Smith of St. Paul's, who built it, said so in 1901.",
        "A second paragraph starts here.",
        "It has two sentences.",
    ]


@pytest.mark.parametrize(("text", "expected"), [
    ("Dr. Who met Mrs. Hudson, e.g. at noon. Then i.e. nothing.",
     ["Dr. Who met Mrs. Hudson, e.g. at noon.", "Then i.e. nothing."]),
    ("Sir W. Pen and I went out [a]. Then we dug a pit [b][c]! e.g. this.\nNext line",
     ["Sir W. Pen and I went out [a].", "Then we dug a pit [b][c]! e.g. this.", "Next line"]),
    ("He lives at No. 5 Fleet St. near the bridge. So did I. Then home.",
     ["He lives at No. 5 Fleet St. near the bridge.", "So did I.", "Then home."]),
    # an old sum in pounds, shillings and pence (53 Pepys entries have one) is one sentence
    ("It cost me 10l. 5s. 6d. in all. So to bed. We walked 3 miles. 4 of us came back.",
     ["It cost me 10l. 5s. 6d. in all.", "So to bed.", "We walked 3 miles.",
      "4 of us came back."]),
    ("“Is it so?” she asked. “Yes.” He left.", ["“Is it so?” she asked.", "“Yes.”", "He left."]),
])
def test_abbreviations_initials_and_quotes(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_pepys_old_punctuation() -> None:
    # A period before a lowercase word is the diary's comma; "viz." and "…" end nothing.
    text = ("My wife … gave me hopes, but on the last day of the year … [the hope was belied.]\n"
            "The condition of the State was thus; viz. the Rump was returned. and so to bed.")
    assert split_sentences(text) == [
        "My wife … gave me hopes, but on the last day of the year … [the hope was belied.]",
        "The condition of the State was thus; viz. the Rump was returned. and so to bed.",
    ]


def test_arabic_and_cjk_marks() -> None:
    assert split_sentences("هل هذا صحيح؟ نعم، إنه صحيح. وهذا أيضا!") == [
        "هل هذا صحيح؟", "نعم، إنه صحيح.", "وهذا أيضا!"]
    assert split_sentences("我们走了。他来了！好") == ["我们走了。", "他来了！", "好"]


def test_titles_and_list_items_keep_their_line_breaks() -> None:
    assert split_sentences("Chapter 1\nIt was dark. It rained.") == [
        "Chapter 1", "It was dark.", "It rained."]
    assert split_sentences("Items we packed:\n- the plate\n- the wine\n1. the cheese") == [
        "Items we packed:", "- the plate", "- the wine", "1. the cheese"]
    assert split_sentences("# Notes\nThe wrapped line goes on and on past forty\ncharacters.") == [
        "# Notes", "The wrapped line goes on and on past forty characters."]


def test_keep_lines_ends_a_sentence_at_every_line_break() -> None:
    """Generated answers put one cited claim a line: the guard reads them that way."""
    assert split_sentences("A wrote: “one thing” [a]\nB wrote: “another” [b]",
                           keep_lines=True) == ["A wrote: “one thing” [a]",
                                                "B wrote: “another” [b]"]


def test_answers_over_hard_wrapped_text_quote_whole_sentences() -> None:
    passage = ContextPassage(id="p1", author=None, date=None, text=WRAPPED, rank=1)
    text = ExtractiveGenerator().generate(GenerationRequest(
        question="How long could the portable model run on one battery?",
        passages=[passage], abstention_text="none"))
    assert "“The first portable model was small enough that it could run for a whole day on " \
           "one battery.” [p1]" in text


@pytest.mark.parametrize(("text", "expected"), [
    ("March 22. — Walked to the mill with Hartley.",
     ["March 22.", "Walked to the mill with Hartley."]),
    ("Saturday, 14th.—Rode to the village.", ["Saturday, 14th.", "Rode to the village."]),
    ("Tuesday.—Mr. Green dined with us.", ["Tuesday.", "Mr. Green dined with us."]),
    ("It was 3 p.m.—late. We dined.", ["It was 3 p.m.—late.", "We dined."]),
    ("Yours ever,\n— A. M.", ["Yours ever,", "A. M."]),
])
def test_a_date_line_joined_by_a_dash_is_a_sentence_of_its_own(text: str,
                                                              expected: list[str]) -> None:
    """Journals of the 19th century write "March 22.—Walked …": the date line and the entry on
    one line, joined by a dash, which the entry's sentence does not keep."""
    assert split_sentences(text) == expected


def test_a_closing_and_a_signature_are_lines_of_their_own() -> None:
    # the diary's last entry: "S. P." over its date ran on into one sentence, its initial's
    # period no end, and was quoted as "S. P. May 31, 1669."
    assert split_sentences("the good God prepare me!\nS. P.\nMay 31, 1669.") == [
        "the good God prepare me!", "S. P.", "May 31, 1669."]
    letter = ("and in all humility take leave, may it please your Lordship,\n"
              "Your Lordship’s most obedient Servant,\nS. P.\nThe letter was sealed up.")
    assert split_sentences(letter) == [
        "and in all humility take leave, may it please your Lordship,",
        "Your Lordship’s most obedient Servant,", "S. P.", "The letter was sealed up."]
    # a wrap is still a wrap: after an initial inside a line, before a lowercase line
    assert split_sentences("I went with Sir W.\nPen to the office.") == [
        "I went with Sir W. Pen to the office."]
    wrapped = "In the afternoon we walked across the moor to the mill with\nJ. Hartley\nWho met us."
    assert split_sentences(wrapped)[0].endswith("to the mill with J. Hartley")


def test_a_farm_journals_abbreviations_dittos_and_ampersands() -> None:
    # 19th-century account-book and farm-journal habits: none of these ends a sentence
    assert split_sentences("Mr. Parsons preached from Ecclesiastes 3d chap. 1st verse.") == [
        "Mr. Parsons preached from Ecclesiastes 3d chap. 1st verse."]
    assert split_sentences("Cold. Thermo. 4° below. Killed the hogs.") == [
        "Cold.", "Thermo. 4° below.", "Killed the hogs."]
    assert split_sentences("N.B. The cow calved. P.S. Papa is better.") == [
        "N.B. The cow calved.", "P.S. Papa is better."]
    assert split_sentences("Made 62 lbs. of sugar. Do. Wednesday, 48 lbs.") == [
        "Made 62 lbs. of sugar.", "Do. Wednesday, 48 lbs."]
    assert split_sentences("Came home at ½ past 5 P.M. & did the milking. So to bed.") == [
        "Came home at ½ past 5 P.M. & did the milking.", "So to bed."]
    # "do." in lowercase still ends one: "I know not what to do. The next day …"
    assert split_sentences("I knew not what to do. The next day it rained.") == [
        "I knew not what to do.", "The next day it rained."]


def test_a_date_line_over_its_entry_and_a_soldiers_ranks() -> None:
    # "15th Sept." on its own line: joined, the month's abbreviation ran it into the entry
    assert split_sentences("15th Sept.\nSaw the new machines they call tanks.") == [
        "15th Sept.", "Saw the new machines they call tanks."]
    assert split_sentences("Sat. 18 Nov.\nFirst snow.")[-1] == "First snow."
    # a rank before a name is no sentence end (Pepys's "Lieut. Lambert" too)
    assert split_sentences("Pte. Harris wounded. Cpl. Evans made L/Sgt. Lieut. Morgan lectured.") \
        == ["Pte. Harris wounded.", "Cpl. Evans made L/Sgt.", "Lieut. Morgan lectured."]
    assert split_sentences("The 2nd Bn. relieved us. Of our Coy. only 31 answered.") == [
        "The 2nd Bn. relieved us.", "Of our Coy. only 31 answered."]
