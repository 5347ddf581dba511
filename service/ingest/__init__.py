"""Turning users' benchmark result files into measurement rows (see ``service.ingest.formats``)."""
