"""BM25 as pgcite scores it, written once: every statement that weighs a posting, bounds a block
or orders a list composes these parts, so a change to the formula is a change here.

Lucene's BM25 (docs/retrieval.md): a term's idf is ln(1 + (N - df + 0.5) / (df + 0.5)) and a
posting of term frequency tf in a chunk of length len weighs

    idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))

with N the snapshot's chunks, df the chunks holding the term and avgdl the average length of the
chunks with at least one lexeme (a snapshot's statistics, docs/snapshots.md "Segments"). The
statements fold its constants: per term wt = idf * (k1 + 1), per snapshot base = k1 * (1 - b)
and slope = k1 * b / avgdl, leaving wt * tf / (tf + base + slope * len) a posting (8 operators
against the textbook form's 13; a summed query's time is its postings'). Checked against an
exhaustive BM25 written out in the tests and against bm25s (tests/test_segments.py).

:func:`idf_value` and :func:`weight_value` are the same two formulas in Python, for what scores
text outside the index (answer sentences, pgcite.answer._precise); tests check that both forms
agree.
"""

from __future__ import annotations

import math

from psycopg import sql

# Lucene's defaults; each snapshot records the pair it was built with (snapshots.bm25_k1/_b)
# and every query reads them from there.
K1 = 1.2
B = 0.75


def idf(n: sql.Composable, df: sql.Composable) -> sql.Composed:
    """A term's idf among ``n`` chunks of which ``df`` hold it."""
    return sql.SQL("ln(1 + ({n} - {df} + 0.5) / ({df} + 0.5))").format(n=n, df=df)


def term_factor(idf_: sql.Composable, k1: sql.Composable) -> sql.Composed:
    """wt: what every posting of a term is multiplied by, idf * (k1 + 1)."""
    return sql.SQL("{idf} * ({k1} + 1)").format(idf=idf_, k1=k1)


def norm_base(k1: sql.Composable, b: sql.Composable) -> sql.Composed:
    """The length norm's constant part, k1 * (1 - b)."""
    return sql.SQL("{k1} * (1 - {b})").format(k1=k1, b=b)


def norm_slope(k1: sql.Composable, b: sql.Composable, avgdl: sql.Composable) -> sql.Composed:
    """The length norm's part per lexeme of length, k1 * b / avgdl."""
    return sql.SQL("{k1} * {b} / {avgdl}").format(k1=k1, b=b, avgdl=avgdl)


def weight(wt: sql.Composable, tf: sql.Composable, length: sql.Composable, *,
           base: sql.Composable, slope: sql.Composable) -> sql.Composed:
    """BM25's weight of a posting: ``wt * tf / (tf + base + slope * len)``.

    With ``wt`` = 1 it is the impact a segment orders its lists by (the weight over the term's
    constant factor); with the largest tf and the smallest length of a block, a bound of every
    posting in it (the weight grows with tf and shrinks with length)."""
    return sql.SQL("{wt} * {tf} / ({tf} + {base} + {slope} * {len})").format(
        wt=wt, tf=tf, len=length, base=base, slope=slope)


def idf_value(n: float, df: float) -> float:
    """:func:`idf` in Python."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def weight_value(idf_: float, tf: float, length: float, avgdl: float, *, k1: float = K1,
                 b: float = B) -> float:
    """:func:`weight` in Python, its constants folded the same way."""
    return idf_ * (k1 + 1) * tf / (tf + k1 * (1 - b) + k1 * b / avgdl * length)
