"""refengine: a small inference-engine core in torch, the harness's default test target.

``refengine.ops`` holds the ops (torch custom ops ``refengine::<op>``), ``refengine.registry``
picks a provider per call, ``refengine.providers`` holds the kernel sources.
"""

__all__ = ["ops", "providers", "registry"]
