"""Test helpers that ship with witness (usable by the tests of every area and by benchmarks).

* :class:`~witness.testing.openai_server.OpenAIServer`: a small real OpenAI-compatible HTTP server
  on 127.0.0.1 whose replies a test scripts.
"""

from __future__ import annotations

from .openai_server import Delay, OpenAIServer, completion

__all__ = ["OpenAIServer", "Delay", "completion"]
