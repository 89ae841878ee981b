"""A worked example of a method family: a toy cache model (sim), its search problem and its tool (docs/examples/family/README.md)."""
