"""The ``noc`` search problem: routing and link design of an SDM mesh for guaranteed-bandwidth traffic."""
