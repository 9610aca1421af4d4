"""Thin adapters that let other frameworks use a :class:`pgcite.Collection`.

Each adapter calls ``Collection.search`` (or ``answer``) and only reshapes what comes back: the
same filters, snapshots and citation ids as the Python API. Each lives in its own module and
imports its framework only there, so ``import pgcite`` never needs them:

- ``pgcite.integrations.langchain``: ``PgciteRetriever`` (``pip install 'pgcite[langchain]'``)
- ``pgcite.integrations.llamaindex``: ``PgciteRetriever`` (``pip install 'pgcite[llamaindex]'``)
"""
