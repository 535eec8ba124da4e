"""Vector file formats: a table of readers and writers (filled in by the formats work)."""
