"""Untrusted-code execution and judging, on top of ``cpfleet.core``. Imports no celery and no redis.

Modules are imported individually (``from cpfleet.sandbox.env import evaluate``); this package
initialiser imports nothing, so the zygote (booted with this folder as its only package path)
and the workers load only what they use.
"""
