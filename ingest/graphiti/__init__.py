"""Graphiti interoperability: env.py (the one import of graphiti-core), extractor.py (its extraction
as an SGAM extractor) and importer.py (an existing Graphiti graph as SGAM facts)."""
