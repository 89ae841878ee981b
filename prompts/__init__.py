"""Prompt templates shipped as package data (YAML with Jinja placeholders)."""
