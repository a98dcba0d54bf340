"""Splitting a suite into shards of equal time: the plan, the recorded durations and the
model that estimates untimed tests."""
