"""Knowledge base of design heuristics (evidence, versions, review reports)."""
