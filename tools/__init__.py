"""Repository tooling that ships no feature: the docs' generated tables and the corpus."""
