"""The embedded HTCondor pool: an access point (schedd) plus annex execute slots.

See docs/pool.md for what of HTCondor it reproduces. The plugin uses only
`Pool` (and through it `PoolSchedd` / `PoolCollector`).
"""
from .client import DEFAULT_SPOOL, Pool, PoolCollector, PoolError, PoolRequestError, PoolSchedd, SubmitResult

__all__ = ["DEFAULT_SPOOL", "Pool", "PoolCollector", "PoolError", "PoolRequestError", "PoolSchedd", "SubmitResult"]
