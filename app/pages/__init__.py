"""Page-data functions: each returns the typed dataclass a page, its JSON twin and its fragments are made from."""
