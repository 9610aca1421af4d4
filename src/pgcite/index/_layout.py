"""The keyword index's physical layout: the sizes its writer and its reader must agree on.

A segment stores, per term, one row of postings (chunk_pks, tfs, lengths in impact order), one
row of block bounds (per BLOCK_POSTINGS postings: the largest tf and the smallest length) and,
for its commonest lists, dense rows of term frequencies (segment_dense: byte i of block k is
the tf of chunk_pk k * DENSE_BLOCK + i). docs/retrieval.md, "Large collections", says why.
"""

from __future__ import annotations

# Postings per block bound: a 76k-posting list has ~1,200 bounds, cheap to scan at query time.
BLOCK_POSTINGS = 64
# chunk_pks per dense row: 4000 bytes, two rows to a page, stored uncompressed (STORAGE PLAIN):
# get_byte on a compressed or TOASTed value would first expand all of it, once per call.
DENSE_BLOCK = 4000
# A list of at least DENSE_MIN_POSTINGS postings is made dense where it holds at least
# 1 / DENSE_RATIO of the chunk_pks of the blocks it touches: then one byte per chunk_pk costs no
# more than its postings (16 bytes each; roaring bitmaps switch to dense containers at the same
# share). Tests make every list of a tiny corpus dense with (1, DENSE_BLOCK).
DENSE_MIN_POSTINGS = 1024
DENSE_RATIO = 16
# A byte's range: a list with a larger tf stays sparse (a tsvector keeps at most 256 positions
# of a lexeme, so tf can reach 256).
MAX_DENSE_TF = 255
