"""Run candidates somewhere else: the protocol and its Docker backend."""

from .base import Sandbox

__all__ = ["Sandbox"]
