"""Snakemake executor plugin `htcannex`: Snakemake jobs as HTCondor jobs on rotating annexes.

Snakemake discovers the plugin by this module's name and reads `common_settings`,
`ExecutorSettings` (each field becomes `--htcannex-<field>` and a profile key
`htcannex-<field>`) and `Executor`.
"""
from dataclasses import dataclass, field
from typing import Optional

from snakemake_interface_executor_plugins.settings import (
    CommonSettings,
    ExecutorSettingsBase,
)

from snakemake_executor_plugin_htcannex.executor import Executor

__all__ = ["Executor", "ExecutorSettings", "common_settings"]

common_settings = CommonSettings(
    non_local_exec=True,
    # Execute points share nothing with the submit side; a campus pool with a
    # shared filesystem says so with --htcannex-shared-fs.
    implies_no_shared_fs=True,
    # The executor ships the workflow sources itself with HTCondor file transfer,
    # so Snakemake neither archives them to a storage provider ...
    job_deploy_sources=False,
    # ... nor requires a default storage provider for inputs and outputs.
    can_transfer_local_files=True,
    # Otherwise every job would `pip install` every registered storage plugin.
    auto_deploy_default_storage_provider=False,
    pass_default_storage_provider_args=True,
    pass_default_resources_args=True,
    # Environment variables go in the job's `environment` (see executor.py).
    pass_envvar_declarations_to_cmd=False,
    init_seconds_before_status_checks=0,
    pass_group_args=True,
)


@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    config: Optional[str] = field(
        default=None,
        metadata={
            "help": "The profile's htcannex.yaml (site catalogue, rotation, annex guards). "
            "In a profile's config.yaml write `htcannex-config: htcannex.yaml`: Snakemake "
            "resolves a value naming a file in the profile directory to that file.",
            "env_var": True,
        },
    )
    schedd: Optional[str] = field(
        default=None,
        metadata={
            "help": "Pool to submit to, overriding `pool:` in htcannex.yaml: `local` (the "
            "embedded pool), `default` (this access point's schedd) or a schedd name "
            "known to the collector.",
            "env_var": True,
        },
    )
    pool_dir: Optional[str] = field(
        default=None,
        metadata={
            "help": "Spool directory of the embedded pool (default: $HTCANNEX_POOL_DIR "
            "or ./.htcannex/pool).",
            "env_var": True,
        },
    )
    annex_mode: Optional[str] = field(
        default=None,
        metadata={
            "help": "Create annexes on demand: off (print the command for you to run), "
            "ask (confirm on the terminal), auto. Overrides `annex: mode:` in htcannex.yaml.",
            "choices": ["off", "ask", "auto"],
        },
    )
    shared_fs: bool = field(
        default=False,
        metadata={
            "help": "Execute points share this working directory (a campus pool): run "
            "jobs in place instead of transferring inputs, outputs and sources.",
        },
    )
    snakemake_in_every_job: bool = field(
        default=False,
        metadata={
            "help": "Run a Snakemake process in every job. By default a plain shell rule's "
            "command and a Python script rule's script run in their job without one (about "
            "1 s of CPU less per job; direct_command.py says which rules qualify).",
        },
    )
    hold_policy: str = field(
        default="release-transient",
        metadata={
            "help": "Held jobs: release-transient (release file-transfer holds up to "
            "--htcannex-hold-releases times, fail others) or fail (fail at once). A failed "
            "job is removed and reported, so --retries moves it to the next site.",
            "choices": ["release-transient", "fail"],
        },
    )
    hold_releases: int = field(
        default=2,
        metadata={"help": "How often one job is released from a transient hold."},
    )
    idle_timeout: Optional[str] = field(
        default=None,
        metadata={
            "help": "Fail a job that waits this long for an annex that is not up, e.g. "
            "30m or 2h. Overrides `annex: idle_timeout:` in htcannex.yaml.",
        },
    )
    unmatchable: str = field(
        default="fail",
        metadata={
            "help": "A job idle for the idle timeout that no slot can run, neither a slot in the "
            "collector nor a site of htcannex.yaml: fail (remove it and report `htcannex why`'s "
            "explanation) or wait (report it and leave it queued, e.g. for slots you will add).",
            "choices": ["fail", "wait"],
        },
    )
    container_image: Optional[str] = field(
        default=None,
        metadata={
            "help": "Container image every job runs in (HTCondor's container_image), e.g. "
            "docker://python:3.11 or an .sif on OSDF.",
        },
    )
    max_annexes: Optional[int] = field(
        default=None,
        metadata={
            "help": "At most this many annexes requested at once. Overrides "
            "`annex: max_annexes:` in htcannex.yaml.",
        },
    )
