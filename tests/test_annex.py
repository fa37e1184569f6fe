"""Annex lifecycle guards, modes and the create command lines."""
import getpass
import shlex
import threading
import time

import classad2
import pytest
from htcondor_codes import annex_start

from snakemake_executor_plugin_htcannex.annex.htcondor_cli import HtcondorCliBackend
from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
from snakemake_executor_plugin_htcannex.annex.manager import AnnexManager, AnnexState
from snakemake_executor_plugin_htcannex.sites.catalogue import AnnexGuards
from snakemake_executor_plugin_htcannex.sites.site import Site, SiteKind


def make_site(name="expanse", **overrides):
    fields = dict(
        name=name, kind=SiteKind.ANNEX, source="htcannex.yaml", system="expanse", queue="gpu-shared",
        nodes=1, cpus=10, memory_mb=94208, gpus=1, gpu_type="V100", gpu_type_flag="V100",
        gpu_memory_mb=32768, gpu_capability=7.0, lifetime_s=4 * 3600, project="ABC123", login="jdoe",
    )
    fields.update(overrides)
    return Site(**fields)


class SlotsCollector:
    """The collector's slot ads, as `htcondor2.Collector.query` filters them; counts the queries."""

    def __init__(self):
        self.annexes_up = set()
        self.last_heard: dict[str, float] = {}  # AnnexName -> LastHeardFrom, where the test sets one
        self.queries = 0

    def query(self, ad_type, constraint, projection):
        self.queries += 1
        ads = [classad2.ClassAd({"Name": f"slot1@{name}", "AnnexName": name,
                                 "LastHeardFrom": int(self.last_heard.get(name, time.time()))})
               for name in sorted(self.annexes_up)]
        return [ad for ad in ads if classad2.ExprTree(constraint).eval(ad) is True]


class RecordingBackend(HtcondorCliBackend):
    def __init__(self):
        self.created = []

    def create(self, site):
        self.created.append(site.annex_name)
        return True


@pytest.fixture
def manager(tmp_path):
    def build(mode="auto", clock=lambda: 1000.0, ask=None, **guards):
        return AnnexManager(
            SlotsCollector(), RecordingBackend(), AnnexLedger(tmp_path / "annex-requests.json"),
            AnnexGuards(**{"core_hour_budget": 5000, **guards}), mode=mode, clock=clock, ask=ask or (lambda q: None),
        )

    return build


def test_up_annex_is_not_requested(manager):
    annexes = manager()
    annexes.collector.annexes_up.add("htcannex-expanse")
    assert annexes.ensure(make_site()).state is AnnexState.UP
    assert annexes.backend.created == []


def test_auto_requests_once_even_across_restarts(manager):
    first = manager()
    assert first.ensure(make_site()).state is AnnexState.REQUESTED
    assert first.ensure(make_site()).state is AnnexState.REQUESTED
    restarted = manager()  # a new Snakemake run in the same working directory
    assert restarted.ensure(make_site()).state is AnnexState.REQUESTED
    assert first.backend.created == ["htcannex-expanse"] and restarted.backend.created == []


def test_an_annex_asked_for_by_two_threads_at_once_is_requested_once(manager):
    """The submit thread (a job just queued) and the status thread (a job already waiting) may ask for one
    annex at the same time; `htcondor annex create` takes seconds to minutes, and a second create would be a
    second annex, charged twice."""
    annexes = manager()
    creating, finish = threading.Event(), threading.Event()
    record = annexes.backend.create

    def slow_create(site):
        creating.set()
        finish.wait(10)
        return record(site)

    annexes.backend.create = slow_create
    first = threading.Thread(target=annexes.ensure, args=(make_site(),))
    first.start()
    assert creating.wait(10)
    second_said = []
    second = threading.Thread(target=lambda: second_said.append(annexes.ensure(make_site()).state))
    second.start()
    second.join(0.5)  # it asks while the first create runs
    finish.set()
    first.join(10)
    second.join(10)
    assert annexes.backend.created == ["htcannex-expanse"] and second_said == [AnnexState.REQUESTED]


def test_expired_request_may_be_renewed(manager):
    manager().ensure(make_site())
    later = manager(clock=lambda: 1000.0 + 4 * 3600 + 1)
    assert later.ensure(make_site()).state is AnnexState.REQUESTED
    assert later.backend.created == ["htcannex-expanse"]


def test_max_annexes_at_once(manager):
    annexes = manager(max_annexes=2)
    for site in ("expanse", "delta"):
        annexes.ensure(make_site(site))
    status = annexes.ensure(make_site("anvil"))
    assert status.state is AnnexState.NEEDS_USER
    assert "max_annexes=2" in status.message
    assert annexes.backend.created == ["htcannex-expanse", "htcannex-delta"]


def test_core_hour_budget_counts_every_request(manager):
    # 1 node x 10 cpus x 4 h = 40 core-hours per request
    annexes = manager(core_hour_budget=100)
    annexes.ensure(make_site("expanse"))
    annexes.ensure(make_site("delta"))
    status = annexes.ensure(make_site("anvil"))
    assert status.state is AnnexState.NEEDS_USER
    assert "core_hour_budget=100" in status.message and "80 spent" in status.message


def test_mode_off_prints_the_create_command(manager):
    status = manager(mode="off").ensure(make_site())
    assert status.state is AnnexState.NEEDS_USER
    command = status.message.splitlines()[-1].strip()
    # Copied into a shell it must work: HTCondor takes a knob from the environment as _CONDOR_<KNOB>.
    assert command.startswith("_CONDOR_ANNEX_USE_OLD_CREATE=true htcondor annex create htcannex-expanse ")
    argv = shlex.split(command)[1:]
    assert argv[4] == "gpu-shared@expanse"
    assert argv[argv.index("--project") + 1] == "ABC123"
    assert argv[argv.index("--login-name") + 1] == "jdoe"
    assert argv[argv.index("--lifetime") + 1] == "14400"


def test_whole_node_queue_gets_no_cpus_or_memory():
    argv = HtcondorCliBackend().command(make_site(allocation="node", gpus=0))
    assert "--cpus" not in argv and "--mem_mb" not in argv and "--gpus" not in argv


def test_ask_without_terminal_behaves_as_off_and_says_so(manager):
    annexes = manager(mode="ask", ask=lambda question: None)
    status = annexes.ensure(make_site())
    assert status.state is AnnexState.NEEDS_USER
    assert "no terminal" in status.message and "htcondor annex create" in status.message
    assert annexes.backend.created == []


def test_ask_yes_creates(manager):
    questions = []
    annexes = manager(mode="ask", ask=lambda q: questions.append(q) or True)
    assert annexes.ensure(make_site()).state is AnnexState.REQUESTED
    assert "htcondor annex create htcannex-expanse" in questions[0]


def test_bad_ledger_names_the_file(manager, tmp_path):
    (tmp_path / "annex-requests.json").write_text("{not json")
    with pytest.raises(RuntimeError, match="annex-requests.json"):
        manager().ensure(make_site())


def test_bad_mode_names_the_setting(manager):
    with pytest.raises(ValueError, match="htcannex-annex-mode"):
        manager(mode="sometimes")


def test_placeholder_login_is_refused_before_anything_runs(manager):
    with pytest.raises(ValueError, match="sites.expanse.login"):
        manager(mode="off").ensure(make_site(login="CHANGE_ME"))


def test_failed_create_leaves_jobs_waiting_with_the_command(manager):
    annexes = manager()

    def refuse(site):
        raise RuntimeError("ssh: connection refused")

    annexes.backend.create = refuse
    status = annexes.ensure(make_site())
    assert status.state is AnnexState.NEEDS_USER
    assert "ssh: connection refused" in status.message and "htcondor annex create" in status.message
    assert annexes.ledger.requests() == []  # nothing spent; the next poll tries again


def test_ask_declined_is_not_asked_again_in_the_same_run(manager):
    questions = []
    annexes = manager(mode="ask", ask=lambda q: questions.append(q) or False)
    for _ in range(3):  # run_job, then two status checks
        assert annexes.ensure(make_site()).state is AnnexState.NEEDS_USER
    assert len(questions) == 1 and annexes.backend.created == []


def test_the_waiting_path_makes_one_collector_query_and_one_ledger_read_per_poll(manager, monkeypatch):
    annexes = manager()
    sites = [make_site(name) for name in ("expanse", "delta", "anvil")]
    reads = []
    real_read = annexes.ledger.requests
    monkeypatch.setattr(annexes.ledger, "requests", lambda: reads.append(1) or real_read())
    for poll in range(3):
        annexes.new_poll()
        before = len(reads)
        for site in sites * 4:  # twelve jobs waiting on three annexes
            annexes.ensure(site)
        assert annexes.collector.queries == poll + 1
        # one read per poll (the first poll also re-reads it to add each of its three requests)
        assert len(reads) - before == (1 + 3 if poll == 0 else 1)
    annexes.collector.annexes_up.add("htcannex-delta")
    assert annexes.ensure(sites[1]).state is AnnexState.REQUESTED  # as of this poll: not up yet
    annexes.new_poll()
    assert annexes.ensure(sites[1]).state is AnnexState.UP and annexes.collector.queries == 4


def test_manual_site_is_never_requested_nor_charged_and_its_steps_are_said_once(manager):
    annexes = manager()
    site = make_site("jetstream2", create="manual", facts="catalogue", system="jetstream2", queue="g3.xl",
                     project=None, login=None)
    first, second = annexes.ensure(site), annexes.ensure(site)
    assert first.state is second.state is AnnexState.NEEDS_USER
    assert annexes.backend.created == [] and annexes.ledger.requests() == []
    # An execute point joining the pool for this annex only, as HTCondor's annex pilot configures one.
    assert 'AnnexName = "htcannex-jetstream2"' in first.message
    assert "STARTD_ATTRS = $(STARTD_ATTRS) AnnexName" in first.message
    assert f"START = $(START) && {annex_start(getpass.getuser())}" in first.message  # the one START of annexes
    assert "STARTD_ATTRS" not in second.message and "create: manual" in second.message
    annexes.collector.annexes_up.add("htcannex-jetstream2")
    annexes.new_poll()
    assert annexes.ensure(site).state is AnnexState.UP


def test_manual_site_in_the_system_table_gets_htcondor_25s_setup_tarball_steps(manager):
    status = manager().ensure(make_site("delta", create="manual", system="delta", queue="gpuA100x4"))
    assert "htcondor annex create htcannex-delta\n" in status.message
    assert "annex-htcannex-delta.tar" in status.message and "./annex-setup.sh" in status.message
    assert "sbatch hpc.slurm" in status.message


def test_an_annex_already_there_is_waited_for_but_not_charged(manager):
    annexes = manager()
    annexes.backend.create = lambda site: False  # the pool had it: nothing was requested
    assert annexes.ensure(make_site()).state is AnnexState.REQUESTED
    assert annexes.ledger.requests() == []


def test_an_annex_whose_slots_are_no_longer_heard_from_is_not_up_and_is_requested_anew(manager):
    # A pilot killed outright (its batch job's walltime, scancel) leaves its slot ads in the collector until they
    # expire; a live pilot's startd sends them every 5 s.
    annexes = manager(clock=time.time)
    site = make_site()
    annexes.collector.annexes_up.add(site.annex_name)
    assert annexes.ensure(site).state is AnnexState.UP
    annexes.collector.last_heard[site.annex_name] = time.time() - 300
    annexes.new_poll()
    assert not annexes.is_up(site)
    assert annexes.ensure(site).message == f"requested annex {site.annex_name}"  # it was up, and is gone


class SlowBackend(RecordingBackend):
    """`htcondor annex create` takes seconds to minutes (an ssh login, a batch submit at the site): a site's
    create here waits until the test lets it finish, or fails."""

    def __init__(self):
        super().__init__()
        self.started = {}
        self.finish = {}
        self.failing = set()
        self.withdrawn = []

    def create(self, site):
        self.started.setdefault(site.annex_name, threading.Event()).set()
        self.finish.setdefault(site.annex_name, threading.Event()).wait(10)
        if site.annex_name in self.failing:
            raise RuntimeError("ssh: Permission denied (publickey)")
        return super().create(site)

    def withdraw(self, site):
        self.withdrawn.append(site.annex_name)
        return "shut down"

    def close_logins(self):
        pass  # it opened none


@pytest.fixture
def run_manager(tmp_path):
    """A manager as a run builds it: creates on threads of their own, which tell what came of them."""
    told = []
    annexes = AnnexManager(SlotsCollector(), SlowBackend(), AnnexLedger(tmp_path / "annex-requests.json"),
                           AnnexGuards(core_hour_budget=5000, max_annexes=2), mode="auto", clock=time.time,
                           tell_outcome=told.append)
    annexes.told = told
    return annexes


def test_in_a_run_a_slow_create_holds_back_neither_the_caller_nor_another_site_s_create(run_manager):
    expanse, delta = make_site(), make_site("delta", system="delta", queue="gpuA100x4")
    backend = run_manager.backend
    first = run_manager.ensure(expanse)  # returns while the create runs
    assert first.state is AnnexState.REQUESTED and first.message == "requesting annex htcannex-expanse"
    assert backend.started["htcannex-expanse"].wait(10)
    assert run_manager.ensure(delta).state is AnnexState.REQUESTED  # decided while expanse's create runs
    assert backend.started.setdefault("htcannex-delta", threading.Event()).wait(10)  # both at once
    again = run_manager.ensure(expanse)
    assert again.message == "annex htcannex-expanse is being requested, waiting for it"
    for event in backend.finish.values():
        event.set()
    said = run_manager.release()  # waits for the creates, then ends both annexes
    assert sorted(backend.created) == ["htcannex-delta", "htcannex-expanse"]  # each once
    assert sorted(status.message for status in run_manager.told) == ["requested annex htcannex-delta",
                                                                      "requested annex htcannex-expanse"]
    assert sorted(backend.withdrawn) == ["htcannex-delta", "htcannex-expanse"] and len(said) == 2
    assert {entry.name for entry in run_manager.ledger.requests()} == {"htcannex-delta", "htcannex-expanse"}


def test_in_a_run_a_create_in_flight_counts_against_the_guards(run_manager):
    run_manager.guards = AnnexGuards(core_hour_budget=5000, max_annexes=1)
    run_manager.ensure(make_site())
    refused = run_manager.ensure(make_site("delta", system="delta", queue="gpuA100x4"))
    assert refused.state is AnnexState.NEEDS_USER and "max_annexes=1" in refused.message
    run_manager.backend.finish.setdefault("htcannex-expanse", threading.Event()).set()
    run_manager.release()


def test_in_a_run_a_failed_create_is_told_when_it_fails_and_not_retried_at_once(run_manager):
    site = make_site()
    run_manager.backend.failing.add(site.annex_name)
    run_manager.backend.finish.setdefault(site.annex_name, threading.Event()).set()
    run_manager.ensure(site)
    deadline = time.time() + 10
    while not run_manager.told and time.time() < deadline:
        time.sleep(0.01)
    [failure] = run_manager.told
    assert failure.state is AnnexState.NEEDS_USER and "Permission denied" in failure.message
    assert run_manager.ensure(site) == failure  # not tried again at every poll
    run_manager.release()
    assert run_manager.backend.withdrawn == []  # nothing was requested
