"""How any external command runs: its own process group, bounded stops, cancellation as
CI does it, and secrets kept out of every log."""
