"""CI integration: pipeline generation from the matrices, and checkout hygiene."""
