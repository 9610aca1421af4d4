"""What a sentence of a source passage is *for*: a statement, or the frame around one.

Journals, letters and minutes put lines around what they say: a heading ("# The Mill", "A
Walk to the Mill"), a date line ("March 22", "4th (Lord's day)."), a salutation ("Dear Sir,"),
a signature or closing ("Yours ever, J. H."). Those lines share the question's words (a title is
all key words) and so win a sentence ranking, yet quoted alone they answer nothing. The answerer
never quotes them (:func:`frame_role` is not None). Neither does it quote a short fragment
without a verb ("Thence home.", "The Storm."), which says no more than a heading.

Every test is light: the shape of the line for any language (a markdown heading, a short line
without closing punctuation, a line of dates and numbers), and, for English only, salutation
and closing formulas and a verb check over a word list (spaCy would do better, but it is an
optional extra; the answer must not depend on it). A long sentence is never a frame: Pepys's
verbless "Up betimes and to the office, where all the morning busy with …" is his statement.
"""

from __future__ import annotations

import re
from typing import Literal

Role = Literal["heading", "date", "salutation", "signature", "fragment"]

HEADING_MAX_WORDS = 8  # a longer line without closing punctuation is a sentence cut short
FRAGMENT_MAX_WORDS = 7  # a longer sentence without a verb from the list is kept (elided verbs)
_CLOSING_MARKS = ".!?؟۔。！？…\"'”’»)]"
_WORD = re.compile(r"[^\W_]+(?:['’][^\W\d_]+)*")
_MONTHS = ("january february march april may june july august september october november "
           "december jan feb mar apr jun jul aug sep sept oct nov dec "
           "يناير فبراير مارس أبريل مايو يونيو يوليو أغسطس سبتمبر أكتوبر نوفمبر ديسمبر")
_DAYS = ("monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur "
         "thurs fri sat sun morning afternoon evening night noon midnight day lord’s lord's "
         "today yesterday a.d ad bc anno domini of the and to st nd rd th o'clock o’clock")
_DATE_WORDS = frozenset((_MONTHS + " " + _DAYS).split())
# "a.m." and "p.m." in a clock time ("Friday, 4 o'clock p.m."), read apart from initials ("A. M.")
_CLOCK = re.compile(r"(?<=\d)\s*[ap]\.?m\.?|(?<=o'clock|o’clock)\s*[ap]\.m\.", re.IGNORECASE)
_ORDINAL = re.compile(r"^\d{1,4}(?:st|nd|rd|th|d)?$|^[ivxlc]+$|^[٠-٩]+$")
_SALUTATION = re.compile(
    r"^(?:(?:my\s+)?(?:dear(?:est)?|beloved|honou?red|respected)\b|to\s+whom\b|"
    r"(?:sir|madam|madame|gentlemen|ladies|friends?)\s*[,:!]|hello\b|hi\b)", re.IGNORECASE)
_ADVERBS = r"(?:ever|always|very\s+truly|truly|sincerely|faithfully|affectionately|" \
    r"respectfully|cordially|gratefully|obediently)"
_KIN = r"(?:servant|friend|brother|sister|son|daughter|wife|husband|father|mother|cousin)"
# A closing formula, after a dash or not ("— Yours ever"). A dash alone makes no signature:
# "— Walked to the mill with Hartley." is a journal's entry after its date line; a signed name
# after a dash is _NAME_LINE's.
_CLOSING = re.compile(r"^(?:[—–\-~]+\s*)?(?:" + "|".join((
    rf"(?:{_ADVERBS}\s+)*yours\b",  # "Yours ever", "Ever yours"
    # "(Ever) your loving sister", "Your Lordship's most obedient Servant"
    rf"(?:{_ADVERBS}\s+)*your\s+(?:[\w'’]+\s+){{0,3}}{_KIN}\b",
    rf"{_ADVERBS}\s*[,.]",  # "Sincerely,"
    r"i\s+(?:am|remain)\b[^.!?]{0,40}\b(?:yours|your\s)",  # "I remain, dear Sir, yours …"
    r"believe\s+me\b[^.!?]{0,40}\b(?:yours|your\s)",  # "Believe me, dear Ellen, yours …"
    r"(?:with\s+)?(?:all\s+my\s+|much\s+)?(?:love|regards|best\s+wishes|thanks)\s*[,.]",
    r"signed\b",
)) + ")", re.IGNORECASE)
# A field of minutes or a register, its label and then several values ("Present: Mr. Green,
# Mr. Sugden, the Secretary."; "Weather: fine, wind N.E."): a statement, though its names make
# it look like a title. A label over one value ("Subject: The Library") is still read as a line.
_FIELD = re.compile(r"^[A-Z][\w ]{0,24}:\s+[^,]+,\s*\S")
# A list item's marker ("- ", "* ", "• ", "3. "): what follows is judged as a line of its own.
# Read as a dash before a name, "- One brass telescope, three feet long" was a signature.
_LIST_ITEM = re.compile(r"^(?:[-*•]|\d{1,3}[.)])\s+(?=\S)")
# A signed name: initials ("J. H.", "J. Hartley"), or a name after a dash ("— Hartley").
_NAME_LINE = re.compile(r"^(?:[—–\-~]+\s*)?(?:[A-Z]\.\s*){1,3}(?:[A-Z][a-z’']+\.?)?$"
                        r"|^[—–\-~]+\s*(?:[A-Z][a-z’'.]*\s*){1,3}$")
_VERB_TEXT = """
am is are was were be been being isn't aren't wasn't weren't 's 're 'm
have has had having haven't hasn't hadn't 've 'd do does did done doing don't doesn't didn't
will would shall should can could may might must ought won't wouldn't can't cannot couldn't
shan't shouldn't mustn't 'll hath doth art wast wert dost didst hast hadst canst couldst wilt
shalt
go goes went gone going come comes came coming see sees saw seen seeing say says said saying
take takes took taken taking get gets got gotten getting make makes made making give gives
gave given giving find finds found finding think thinks thought know knows knew known tell
tells told let lets put puts set sets begin begins began begun keep keeps kept leave leaves
left meet meets met bring brings brought buy buys bought lose loses lost pay pays paid sit
sits sat stand stands stood speak speaks spoke spoken write writes wrote written read reads
run runs ran eat eats ate eaten drink drinks drank drunk sleep sleeps slept lie lies lay lain
rise rises rose risen fall falls fell fallen feel feels felt hear hears heard hold holds held
send sends sent spend spends spent build builds built break breaks broke broken choose chose
chosen draw drew drawn drive drove driven fly flew flown forget forgot forgotten grow grew
grown hide hid hidden hit hits hurt lead leads led lend lent mean means meant ride rode
ridden ring rang rung seek sought sell sells sold shake shook shine shone shoot shot show
shows showed shown shut sing sang sung sink sank sunk slide slid spread steal stole stolen
strike struck swear swore sworn sweep swept swim swam swum teach taught tear tore torn throw
threw thrown understand understood wake woke wear wore worn weep wept win won wind wound
bear bore born borne bid bind bound bite bit dig dug feed fed fight fought flee fled forbid
forgave forgive freeze froze hang hung lay laid quit
"""
# Regular verbs common in narrative and expository prose: each with its -s and -ed forms.
_REGULAR_TEXT = """
seem look want like live die love walk talk call ask try use work play move turn help stay
exist include raise remain appear occur provide suggest show indicate increase reduce cause
require contain follow describe report involve allow return open close enter carry cry hope
wish believe receive answer order pass reach mention visit dine sup rain snow happen agree
refuse promise consider remember expect hear learn fear need care serve change start end
"""
_VERBS = frozenset(_VERB_TEXT.split()) | frozenset(
    form for base in _REGULAR_TEXT.split() for form in (
        base, base + "s", base + "es", base + "d", base + "ed", base[:-1] + "ies",
        base[:-1] + "ied"))
_NOT_VERB_TEXT = "hundred bed red sacred naked wicked kindred wretched ragged aged beloved crooked"
_NOT_VERBS = frozenset(_NOT_VERB_TEXT.split())
_MINOR_TEXT = "a an the of and or to in on at by for with from"  # not capitalised in a title
_MINOR = frozenset(_MINOR_TEXT.split())
_SUBJECT_TEXT = "he she we they you it"
_SUBJECTS = frozenset(_SUBJECT_TEXT.split())
_LINK_TEXT = "so then thence after and but at to up home"  # Pepys: "So home to bed."
_LINKS = frozenset(_LINK_TEXT.split())


def frame_role(sentence: str, language: str = "english") -> Role | None:
    """The sentence's framing role, or None for a statement worth quoting."""
    text = _LIST_ITEM.sub("", sentence.strip())
    if not text:
        return "fragment"
    bare = text.lstrip("#>*_ \t").rstrip("*_ \t")
    words = _WORD.findall(bare.casefold())
    if (text.startswith("#") and len(words) <= 2 * HEADING_MAX_WORDS) or (
            len(words) <= HEADING_MAX_WORDS and _capitals(text)):
        return "heading"
    when = _WORD.findall(_CLOCK.sub(" ", bare).casefold())
    if when and _all_dates(when):
        return "date"
    if language == "english" and len(words) <= HEADING_MAX_WORDS + 4 and _SALUTATION.match(bare):
        return "salutation"
    if language == "english" and signs_off(bare):
        return "signature"
    if _FIELD.match(bare):  # "Present: Mr. Green, Mr. Sugden, the Secretary." says who was there
        return "date" if _all_dates(_WORD.findall(bare.split(":", 1)[1].casefold())) else None
    if not bare.endswith(tuple(_CLOSING_MARKS)) and len(words) <= HEADING_MAX_WORDS:
        return "heading"  # a title: short, and nothing closes it
    if language == "english" and len(words) == 1:
        return "fragment"  # "Thanksgiving.", "Thawing.", "Rain!": a day's label or its weather
    if language != "english" or len(words) > FRAGMENT_MAX_WORDS or _has_verb(_verb_slots(bare)):
        return None
    if _title_case(bare):
        return "heading"  # a title with a full stop: "A Walk to the Mill."
    if len(words) <= FRAGMENT_MAX_WORDS // 2 + 1:
        return "fragment"  # "So to bed.", "Thence home." (not "Several causes exist.")
    return None


def dates_only(line: str) -> bool:
    """A line of dates only ("15th Sept.", "Sat. 18 Nov.", "27/6/16."): a journal's date line.
    The break after it is no wrap: joined, "15th Sept. Saw the tanks" would be one sentence, the
    month's abbreviation no end."""
    return frame_role(line) == "date"


def signs_off(line: str, *, names: bool = True) -> bool:
    """A line that is a letter's closing or (``names``) a signed name on its own ("Your
    Lordship's most obedient Servant,", "S. P.", "— W. Hewer"): the line break after it is no
    wrap (joined, "S. P." would run on into the date below it, its initial's period no end),
    nor the one before a closing. (Before a name it may be: "… walked out with\nJ. Hartley".)"""
    bare = line.strip()
    return (len(_WORD.findall(bare)) <= HEADING_MAX_WORDS + 4
            and (_CLOSING.match(bare) is not None
                 or (names and _NAME_LINE.match(bare) is not None)))


def quotable(sentence: str, language: str = "english") -> bool:
    """May the answerer quote this sentence (alone, or first)?"""
    return frame_role(sentence, language) is None


def is_list_item(line: str) -> bool:
    """A line that starts with a list marker ("- ", "* ", "• ", "3. ")."""
    return _LIST_ITEM.match(line.strip()) is not None


def heads_a_list(line: str, following: str | None) -> bool:
    """A line that nothing closes, followed by a list item, is that list's heading however long
    ("Inventory of instruments lent by J. Hartley to the Philosophical Society" over "- One
    brass telescope …"): it names what the list holds and says none of it."""
    return (following is not None and is_list_item(following) and not is_list_item(line)
            and not line.strip().endswith(tuple(_CLOSING_MARKS)))


def _all_dates(words: list[str]) -> bool:
    """Every word a date's: a month, a weekday, an ordinal ("thursday", "march", "22nd")."""
    return all(w in _DATE_WORDS or _ORDINAL.match(w) for w in words)


def _capitals(text: str) -> bool:
    """Set in capitals ("CHAPTER III", "THE STORM"), not a sentence with one capital letter in
    a script without case."""
    cased = [c for c in text if c.isalpha() and (c.isupper() or c.islower())]
    return len(cased) >= 4 and all(c.isupper() for c in cased)


def _title_case(text: str) -> bool:
    """Most words after the first capitalised ("A Walk to the Mill."; "I" and small words
    do not count)."""
    shown = _WORD.findall(text)[1:]
    content = [w for w in shown if w.casefold() not in _MINOR and w != "I"]
    return bool(content) and sum(w[:1].isupper() for w in content) >= 0.75 * len(content)


def _verb_slots(text: str) -> list[str]:
    """The words that may be a verb: the first, and every lowercase one (a title capitalises
    its verbs, "A Walk to the Mill", a sentence does not)."""
    shown = _WORD.findall(text)
    return [w.casefold() for i, w in enumerate(shown) if i == 0 or not w[:1].isupper()]


def _has_verb(words: list[str]) -> bool:
    """A verb from the list, a contraction, or a regular past/participle (-ed), leniently: a
    sentence wrongly thought to have one is only kept, never dropped."""
    if words and words[0] in _SUBJECTS:
        return True  # "They blanch them."
    for word in words:
        w = word.replace("’", "'")
        if w in _VERBS or "n't" in w or (w.endswith("ed") and len(w) > 4 and w not in _NOT_VERBS):
            return True
        if (w.endswith("ing") and len(w) > 5) or (w.endswith("es") and len(w) > 6):
            return True  # "… was building", "AMPK also suppresses …" (or nouns: lenient)
    # "Cycloheximide blocks this effect.": a subject, then a word in -s (not "So home …")
    second = words[1] if len(words) > 2 else ""
    return (second.endswith("s") and not second.endswith(("ss", "'s", "’s", "us", "is"))
            and words[0] not in _MINOR and words[0] not in _LINKS)
