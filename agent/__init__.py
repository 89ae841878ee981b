"""The agent: command line, and (as they land) reasoners, the co-evolution operator and chat."""
