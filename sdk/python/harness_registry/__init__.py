"""Typed Python client for the Harness Registry HTTP API."""

from . import models
from .client import Registry, RegistryError

__all__ = ["Registry", "RegistryError", "models"]
