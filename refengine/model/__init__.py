"""Tiny models: the one decoder layer and the decoder the e2e suite generates with
(decoder.py), the fusion suite's blocks built on that layer (blocks.py), and the seeded
weights they all draw (weights.py)."""
