"""A job's resources walk from the Snakefile to the submit description once: parsed into the typed
request and given its JobDurationCategory once (submit/request.py), judged by placement, and handed
as the admitted request to build_submit. Counted through Snakemake's API, in this process."""
from pathlib import Path

from snakemake import api
from snakemake.settings import types as settings
from snakemake.resources import Resources

from snakemake_executor_plugin_htcannex import ExecutorSettings
from snakemake_executor_plugin_htcannex.submit import request

HARNESS_CONFIG = Path(__file__).parent / "workflows" / "harness" / "htcannex.yaml"
SNAKEFILE = '''
rule one:
    output: "one.txt"
    resources: runtime=5, mem_mb=300
    shell: "echo one > {output}"
'''


def counted(monkeypatch, module, name: str) -> list:
    """The calls of module.name from now on (each call's first argument)."""
    calls, original = [], getattr(module, name)

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_job_s_resources_are_parsed_and_categorised_once_on_their_way_to_the_schedd(tmp_path, embedded_pool,
                                                                                       monkeypatch):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    monkeypatch.chdir(tmp_path)
    parses = counted(monkeypatch, request, "parse")
    categories = counted(monkeypatch, request, "duration_category")
    with api.SnakemakeApi(settings.OutputSettings(verbose=False)) as snakemake_api:
        workflow = snakemake_api.workflow(
            resource_settings=settings.ResourceSettings(
                cores=1, nodes=1, default_resources=Resources.parse(["disk_mb=1000"], allow_expressions=True, defaults="full")),
            storage_settings=settings.StorageSettings(shared_fs_usage=frozenset()),
            workdir=tmp_path, snakefile=tmp_path / "Snakefile")
        workflow.dag().execute_workflow(
            executor="htcannex",
            executor_settings=ExecutorSettings(config=str(HARNESS_CONFIG), pool_dir=str(embedded_pool.spool_dir)),
            execution_settings=settings.ExecutionSettings(latency_wait=5))
    assert (tmp_path / "one.txt").read_text() == "one\n"
    assert parses == ["one"]
    assert categories == [5 * 60]  # runtime: 5 minutes
