"""Versioned result schema, run directories and the SQLite history store."""
