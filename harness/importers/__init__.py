"""Other CI systems' test definitions read as matrices: ``harness import buildkite``."""
