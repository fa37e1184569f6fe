"""What a job learns from HTCondor: its site (machine ad) and whether to stop at a self-checkpoint (job ad)."""
import pytest

from protein_lm.job_environment import checkpoint_exit_code, current_site, provenance


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("HTCANNEX_SITE", "_CONDOR_MACHINE_AD", "_CONDOR_JOB_AD", "PROTEIN_LM_SELF_CHECKPOINT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_site_from_machine_ad_then_variable(clean_env, tmp_path):
    assert current_site() == "local"
    ad = tmp_path / ".machine.ad"
    ad.write_text('AnnexName = "htcannex-delta"\nCpus = 1\n')
    clean_env.setenv("_CONDOR_MACHINE_AD", str(ad))
    assert current_site() == "htcannex-delta"
    clean_env.setenv("HTCANNEX_SITE", "expanse")
    assert current_site() == "expanse"


def test_stop_only_when_the_job_ad_asks(clean_env, tmp_path):
    assert checkpoint_exit_code() is None  # local executor: keep training
    ad = tmp_path / ".job.ad"
    ad.write_text("SuccessCheckpointExitCode = 85\nClusterId = 3\n")
    clean_env.setenv("_CONDOR_JOB_AD", str(ad))
    assert checkpoint_exit_code() == 85
    clean_env.setenv("PROTEIN_LM_SELF_CHECKPOINT", "continue")
    assert checkpoint_exit_code() is None


def test_bad_override_is_named(clean_env):
    clean_env.setenv("PROTEIN_LM_SELF_CHECKPOINT", "sometimes")
    with pytest.raises(ValueError, match=r"\$PROTEIN_LM_SELF_CHECKPOINT='sometimes': use 'stop' or 'continue'"):
        checkpoint_exit_code()


def test_provenance_from_the_ads_the_job_sees(clean_env, tmp_path):
    assert provenance() == {"site": "local", "slot": None, "job": None, "planned_site": None, "job_rule": None,
                            "job_wildcards": None}
    machine, job = tmp_path / ".machine.ad", tmp_path / ".job.ad"
    machine.write_text('AnnexName = "htcannex-delta"\nName = "slot1@delta-ep"\n')
    job.write_text('ClusterId = 12\nProcId = 0\nTargetAnnexName = "htcannex-anvil"\nHtcannexRule = "train_chunk"\n'
                   'HtcannexWildcards = "{\\"run\\": \\"r1\\", \\"chunk\\": \\"3\\"}"\n')
    clean_env.setenv("_CONDOR_MACHINE_AD", str(machine))
    clean_env.setenv("_CONDOR_JOB_AD", str(job))
    assert provenance() == {"site": "htcannex-delta", "slot": "slot1@delta-ep", "job": "12.0", "planned_site": "htcannex-anvil",
                            "job_rule": "train_chunk", "job_wildcards": {"run": "r1", "chunk": "3"}}
