"""The ledger: what each subscriber is owed and what was carried to whom (the match and digest
tables), read and written by taste, people, delivery and the overview."""
