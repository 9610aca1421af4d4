"""Sentence splitting for quoting: whole sentences out of hard-wrapped, old or Arabic text.

A passage is first cut into paragraphs at blank lines. Inside a paragraph a line break is
*soft* (the text was wrapped to a width, so the lines are joined with a space) unless the next
line opens a block of its own (a list item, a heading, a quote, a table row) or the line before
it is a title (a heading, or short with no closing punctuation); and a date line, a letter's
closing or a signature is a line of its own ("S. P." over "May 31, 1669.": joined, the initial's period
would not end it). A sentence then ends at
``. ! ? ؟ ۔`` (with closing quotes, brackets and citations ``[id]`` kept on it) followed by
space or a dash (a journal's "March 22.—Walked to the mill": the dash is left off the sentence
after it), and at the CJK marks ``。！？`` without any; but not after an initial ("Sir W.
Pen"), a known abbreviation ("Mr.", "St.", "e.g.", "chap.", "Thermo.", "N.B."), a ditto
("Do."), before a lowercase word or "&" (the diary's "so. and then", "5 P.M. & did"), or before
a number after "No.", "c.", "p.", "ref." or a sum's unit ("10l. 5s. 6d.").

A hand-written splitter, not a library: pysbd (last release 2021) was the candidate, and
these few rules cover what the answer needs (English, the Pepys diary, Arabic) with tests.
"""

from __future__ import annotations

import re

from pgcite.answer._roles import dates_only, signs_off

# A candidate end: the marks, closing quotes/brackets, then any citations; the rules in
# _is_end decide. Latin and Arabic marks need a space (or the end) after them, or a dash: a
# journal's "March 22.—Walked to the mill" puts its date line and the entry on one line. CJK
# marks need nothing after them.
_CANDIDATE = re.compile(
    r"(?:[.!?؟۔]+[\"'”’»)\]]*(?:\s*\[[^\[\]\n]*\])*(?=\s|$|[—–])"
    r"|[。！？]+[”’」』)）]*(?:\s*\[[^\[\]\n]*\])*)"
)
_ABBREVIATION_TEXT = """
mr mrs ms messrs dr st sr jr prof capt col gen lt sgt rev hon gov mt ft vs viz cf e.g i.e
esp approx dept univ inc ltd co jan feb mar apr jun jul aug sep sept oct nov dec
wm thos tho jno geo chas robt richd captn coll mons ld bp esq gent
febr septemb octob novemb decemb oz dwt lb lbs cwt ca vol vols pp fig al
chap chaps feby janry augt thermo barom n.b p.s pte cpl lieut bn coy bde regt
"""
# Old given-name abbreviations after a title ("Sir Wm. Batten", "Capt. Jer. Smith", "Sir Ph.
# Warwick"): a short capitalised word ending in a period right after a title does not end.
_TITLE_TEXT = "sir mr mrs dr capt captn lord lady king duke st"
_TITLES = frozenset(_TITLE_TEXT.split())
ABBREVIATIONS = frozenset(_ABBREVIATION_TEXT.split())
_BLOCK_START = re.compile(r"\s*(?:[-*•+]\s|\d{1,3}[.)]\s|#|>|\|)")
_TITLE_MAX = 40  # a shorter line without closing punctuation reads as a title, not a wrap
_CLOSING = ".!?؟۔。！？:;\"'”’»)]"
_WORDS_BEFORE = re.compile(r"[\s—–]+")
# Abbreviations that read on to a number: "No. 5", "c. 1455", "p. 561", "v. 56.3%", "(ref. 3)".
_BEFORE_A_NUMBER = frozenset(["no", "nos", "c", "p", "v", "ref", "refs"])
# A number with its unit ("10l", "5s", "6d", "3lb"): an old sum's next unit follows it.
_AMOUNT = re.compile(r"[£$]?\d+(?:[.,]\d+)?[a-z]{1,3}")


def split_sentences(text: str, *, keep_lines: bool = False) -> list[str]:
    """Sentences (with their trailing citations), in reading order, whitespace-trimmed.

    ``keep_lines``: every line break ends a sentence — for generated answers, which put one
    cited claim a line; source passages are unwrapped (see the module doc).
    """
    out: list[str] = []
    for block in _blocks(text, keep_lines=keep_lines):
        start = 0
        for match in _CANDIDATE.finditer(block):
            if _is_end(block, match):
                out.append(block[start:match.end()].strip())
                start = match.end()
        out.append(block[start:].strip())
    if not keep_lines:  # "March 22. — Walked …": the dash joins the entry to its date line
        out = [s.lstrip("—– ") for s in out]
    return [s for s in out if s]


def _blocks(text: str, *, keep_lines: bool) -> list[str]:
    """Runs of text inside which no line break is left: paragraphs with soft breaks joined."""
    if keep_lines:
        return text.splitlines()
    blocks: list[str] = []
    for paragraph in re.split(r"\n[ \t]*\n", text):
        lines = [line.strip() for line in paragraph.splitlines() if line.strip()]
        current, previous = "", ""
        for line in lines:
            if current and _soft(current, line, previous):
                current = current + line if current.endswith("-") else f"{current} {line}"
            else:
                if current:
                    blocks.append(current)
                current = line
            previous = line
        if current:
            blocks.append(current)
    return blocks


def _soft(before: str, line: str, previous: str) -> bool:
    """Is the break between ``before`` (the text so far, ending in the line ``previous``) and
    ``line`` a wrap?"""
    last = before.rsplit("\n", 1)[-1]
    if _BLOCK_START.match(line) or last.startswith("#"):
        return False
    if line[:1].islower():
        return True  # a sentence carried on
    if signs_off(previous) or signs_off(line, names=False) or dates_only(previous):
        return False  # "Your obedient Servant," over "S. P.", "15th Sept." over the entry
    # A short line that does not end a sentence is a title ("Chapter 1", "Monday").
    return not (len(last) < _TITLE_MAX and not last.endswith(tuple(_CLOSING)))


def _is_end(block: str, match: re.Match[str]) -> bool:
    marks = match.group()
    rest = block[match.end():].lstrip().lstrip("—–").lstrip()  # "March 22.—Walked …"
    if marks[0] in "。！？":
        return True
    if rest[:1].islower() or rest[:1] == "&":
        return False  # "so. and then", "at 5 P.M. & did the milking": not a sentence end
    if not marks.startswith(".") or marks.startswith(".."):
        return True
    before = _WORDS_BEFORE.split(block[:match.start()].strip())  # "Tuesday.—Mr" is two words
    word = before[-1].lstrip("(\"'“‘[").casefold()
    if word in ABBREVIATIONS or before[-1] == "Do":
        return False  # "Do." capitalised is an account's ditto ("Do. Wednesday, 48 lbs.")
    if (len(before) >= 2 and before[-2].rstrip(".").casefold() in _TITLES and len(word) <= 3
            and rest[:1].isupper()):
        return False  # "Sir Ph. Warwick"
    if len(word) == 1 and word.isalpha() and word != "i" and block[match.start() - 1].isupper():
        return False  # an initial: "Sir W. Pen"
    # "No. 5", "c. 1455", "p. 561", "(ref. 3)"; an old sum, "10l. 5s. 6d.", goes on to its unit
    number_goes_on = word in _BEFORE_A_NUMBER or _AMOUNT.match(word) is not None
    return not (rest[:1].isdigit() and number_goes_on)
