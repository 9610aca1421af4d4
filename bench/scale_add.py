"""Add 100 documents, twice, to a collection bench/scale.py built (``--collection``), with
scale.add_documents: each time the new snapshot's build, the same snapshot from scratch beside it,
the growth of the keyword index's tables, and both snapshots' keyword top-10 compared on 50
random queries. Writes bench/results/scale_segments/add_documents.json.

Membership is derived from the segments since migration 0006 (bench/scale_members.py measures
what that saves).

    python bench/scale.py --sizes 100000 --results scale_segments
    python bench/scale_add.py --collection scale_100k
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _common import RESULTS, client
from scale import SEED, add_documents, vocabulary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="scale_100k")
    args = parser.parse_args()
    vocab = vocabulary()
    rng = np.random.default_rng(SEED + 1)
    centroids = rng.normal(size=(2000, 384)).astype(np.float32)
    with client() as c:
        col = c.collection(args.collection)
        runs = [add_documents(col, 300_000 + 1000 * i, vocab, rng, centroids) for i in range(2)]
    out = RESULTS / "scale_segments"
    out.mkdir(parents=True, exist_ok=True)
    (out / "add_documents.json").write_text(json.dumps(
        {"collection": args.collection, "runs": runs}, indent=2))
    print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
