"""The extractor families: events.py (event rules), llm.py (an OpenAI-compatible endpoint) and
sgr.py (the schema-guided reasoning prompt and response format llm.py uses)."""
