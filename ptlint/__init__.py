"""ptlint: a static linter and autofixer for PyTorch code."""

__version__ = "0.1.0"
