"""The submit thread (submit/submitter.py): the jobs Snakemake hands over together are submitted one by one,
then the schedd is asked once to reschedule, as condor_submit and DAGMan ask after their submits."""
import htcondor2

from snakemake_executor_plugin_htcannex.submit.submitter import Submitter


class Schedd:
    """Records the calls, in order; refuses the job whose executable is /bin/refused."""

    def __init__(self):
        self.calls = []

    def submit(self, description):
        self.calls.append(("submit", description["executable"]))
        if description["executable"] == "/bin/refused":
            raise htcondor2.HTCondorException("refused")
        return len(self.calls)

    def reschedule(self):
        self.calls.append(("reschedule",))


def job(executable: str) -> htcondor2.Submit:
    return htcondor2.Submit({"executable": executable})


def test_jobs_handed_over_together_are_followed_by_one_reschedule_and_a_refused_one_fails_alone():
    schedd, answers = Schedd(), []
    submitter = Submitter(schedd)
    with submitter.batch():
        for executable in ("/bin/a", "/bin/refused", "/bin/b"):
            submitter.submit(job(executable), answers.append, lambda error: answers.append("refused"))
    submitter.stop()
    assert schedd.calls == [("submit", "/bin/a"), ("submit", "/bin/refused"), ("submit", "/bin/b"), ("reschedule",)]
    assert answers == [1, "refused", 3]


def test_a_batch_of_refused_jobs_asks_no_reschedule():
    schedd = Schedd()
    submitter = Submitter(schedd)
    with submitter.batch():
        submitter.submit(job("/bin/refused"), print, lambda error: None)
    submitter.stop()
    assert schedd.calls == [("submit", "/bin/refused")]
