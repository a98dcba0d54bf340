"""``harness bisect``: the first engine release (or commit) where a test's outcome changes.

Each step is one ``harness run --test ID`` in a subprocess of its own, under a pin
(``--pins``: each pin its own environment, built once per pins and shared with every later
run) or at a commit of an engine checkout (``--commits``: a detached worktree, that
commit's code imported from it). A step's verdict comes from its run folder, read as
``harness report compare`` reads one; a step that could not run (a pin pip cannot install,
a test that did not run) is named and never counted as bad. With ``--slower-than FACTOR``
a step is judged by the test's recorded speed against the GOOD end's (verdict.py
``SpeedJudge``).
"""
