"""witness: build, audit, train on and evaluate grounded visual-question-answering data.

Every answer is tied to the set of boxes that witnesses it (one, several or none), and questions
come in logically equivalent pairs whose answers must agree.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
