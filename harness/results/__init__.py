"""Results: the run folder's JUnit files, their merge, the manifest, the history."""
