"""The follow language and matching: parsing a follow, the index of every follow, matching a paper, and why
it matched."""
