"""Languages: the translations and the wording of counts."""
