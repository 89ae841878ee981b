"""Fault injection: searches whose evaluations, databases, LLMs or sessions fail on purpose, and what they must still do."""
