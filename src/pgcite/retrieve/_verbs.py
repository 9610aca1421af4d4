"""English irregular verbs: the base form a question asks with ("What did he lend?") and the
forms a narrative writes ("lent"). Snowball's English stemmer folds "lending" and "lends" into
"lend" but never "lent", so to the keyword leg's statistics a question's "lend" is a word the
passages lack. Used by the answerability signals (retrieve/_answerability.py), which read a
question's words as the retrieved passages write them.
"""

from __future__ import annotations

# base -> past and past participle (one form where they are the same); the common verbs of
# letters, journals and minutes, not every irregular verb of the language. Not "be", "do" and
# "have": stop words, which the keyword leg drops.
_TABLE = """
arise arose arisen; awake awoke awoken; bear bore borne; beat beaten;
become became; begin began begun; bend bent; bet; bid; bind bound; bite bit bitten;
bleed bled; blow blew blown; break broke broken; breed bred; bring brought; build built;
burn burnt; burst; buy bought; cast; catch caught; choose chose chosen; cling clung;
come came; cost; creep crept; cut; deal dealt; dig dug; draw drew drawn;
dream dreamt; drink drank drunk; drive drove driven; dwell dwelt; eat ate eaten;
fall fell fallen; feed fed; feel felt; fight fought; find found; flee fled; fling flung;
fly flew flown; forbid forbade forbidden; forget forgot forgotten; forgive forgave forgiven;
freeze froze frozen; get got gotten; give gave given; go went gone; grind ground;
grow grew grown; hang hung; hear heard; hide hid hidden; hit; hold held; hurt;
keep kept; kneel knelt; know knew known; lay laid; lead led; lean leant; leap leapt;
learn learnt; leave left; lend lent; let; lie lay lain; light lit; lose lost; make made;
mean meant; meet met; pay paid; put; quit; read; rend rent; rid; ride rode ridden;
ring rang rung; rise rose risen; run ran; say said; see saw seen; seek sought; sell sold;
send sent; set; sew sewn; shake shook shaken; shed; shine shone; shoot shot; show shown;
shrink shrank shrunk; shut; sing sang sung; sink sank sunk; sit sat; slay slew slain;
sleep slept; slide slid; sling slung; smell smelt; speak spoke spoken; speed sped;
spell spelt; spend spent; spill spilt; spin spun; spit spat; split; spoil spoilt; spread;
spring sprang sprung; stand stood; steal stole stolen; stick stuck; sting stung;
stink stank stunk; stride strode stridden; strike struck; string strung; strive strove
striven; swear swore sworn; sweep swept; swell swollen; swim swam swum; swing swung;
take took taken; teach taught; tear tore torn; tell told; think thought; throw threw thrown;
thrust; tread trod trodden; understand understood; wake woke woken; wear wore worn;
weave wove woven; weep wept; win won; wind wound; wring wrung; write wrote written
"""


def _forms(table: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for entry in table.split(";"):
        words = entry.split()
        if words:
            out[words[0]] = tuple(words[1:])
    return out


# base -> its irregular forms (empty where the verb does not change: "cost", "put", "read")
IRREGULAR: dict[str, tuple[str, ...]] = _forms(_TABLE)
