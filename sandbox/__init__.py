"""Untrusted-code execution and judging. Imports no celery and no redis.

Modules are imported individually (``from sandbox.verdict import Verdict``); this
package initialiser deliberately imports nothing so that pure data modules
(verdict, problem, results) can be used without touching the execution machinery.
"""
