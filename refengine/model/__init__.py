"""Tiny models: fusion-suite blocks (blocks.py) and the decoders the e2e suite generates with."""
