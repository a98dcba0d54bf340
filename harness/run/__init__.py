"""The run pipeline: a request becomes a plan of pytest invocations, environments, runs
through the runners, and a finished run folder."""
