"""Reading corpora and the work directory's array files."""
