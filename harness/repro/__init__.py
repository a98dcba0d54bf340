"""Repro: rebuild a recorded run (its matrix, environment and chosen tests) and run it again."""
