-- The LLM-written sentence that situates a chunk in its document (contextual = "llm"): part of
-- what was embedded, kept so that a re-embed embeds exactly the same text. NULL otherwise.
ALTER TABLE {schema}.chunks ADD COLUMN IF NOT EXISTS context text;
