"""Snakemake's own executor test cases, run with htcannex against the embedded pool.

No shared filesystem and no storage provider: the executor moves inputs, outputs
and the workflow sources with HTCondor file transfer.
"""
from pathlib import Path

import pytest
from snakemake.common.tests import TestWorkflowsLocalStorageBase
from snakemake.resources import Resources
from snakemake.settings.types import ResourceSettings

from snakemake_executor_plugin_htcannex import ExecutorSettings

HARNESS_CONFIG = Path(__file__).parent / "workflows" / "harness" / "htcannex.yaml"


class TestSnakemakeHarness(TestWorkflowsLocalStorageBase):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _pool(self, embedded_pool):
        self.pool = embedded_pool

    def get_executor(self) -> str:
        return "htcannex"

    def get_executor_settings(self) -> ExecutorSettings:
        return ExecutorSettings(config=str(HARNESS_CONFIG), pool_dir=str(self.pool.spool_dir))

    def get_assume_shared_fs(self) -> bool:
        return False

    def get_resource_settings(self) -> ResourceSettings:
        # What `snakemake --executor htcannex` uses when --default-resources is not
        # given (Snakemake's "full" defaults: mem_mb of at least 1000, as a spawned
        # Snakemake needs more than the pool's 128 MB default request_memory), except
        # disk: "full" asks 50,000 MB for a job without input, and the pool's slot
        # advertises the machine's free disk, as a startd does, so on a machine with
        # less free such a job would wait for a slot that never comes.
        return ResourceSettings(default_resources=Resources.parse(
            ["disk_mb=1000"], allow_expressions=True, defaults="full"))
