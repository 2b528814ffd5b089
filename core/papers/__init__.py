"""The papers: the ingest pipeline over the source contract, source health and status, classification,
citations."""
