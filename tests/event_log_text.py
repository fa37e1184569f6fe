"""Events in HTCondor's user-log text format (condor_event.cpp, V25), for tests that parse logs
with the real htcondor2.JobEventLog. `job` is "cluster.proc" as the log writes it ("001.000")."""

STAMP = "2026-12-02 14:00:00"


def submit(job):
    return f"000 ({job}.000) {STAMP} Job submitted from host: <127.0.0.1:9618>\n...\n"


def execute(job, slot, annex=None):
    """Real HTCondor 25 writes SlotName, and in its ClassAd body the slot's resources; an
    AnnexName there is the embedded pool's older habit (given `annex`)."""
    body = f"\tAnnexName = \"{annex}\"\n" if annex else ""
    return f"001 ({job}.000) {STAMP} Job executing on host: <127.0.0.1:9618>\n\tSlotName: {slot}\n{body}...\n"


def held(job, code, subcode=0, reason="Transfer input files failure: x not found"):
    return (
        f"012 ({job}.000) {STAMP} Job was held.\n\t{reason}\n"
        f"\tCode {code} Subcode {subcode}\n...\n"
    )


def released(job):
    return f"013 ({job}.000) {STAMP} Job was released.\n\tvia htcannex\n...\n"


def evicted(job):
    return (
        f"004 ({job}.000) {STAMP} Job was evicted.\n\t(0) Job was not checkpointed.\n"
        + "".join(f"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  {usage} Usage\n" for usage in USAGES[:2])
        + "".join(f"\t0  -  {traffic} By Job\n" for traffic in TRAFFIC[:2])
        + "...\n"
    )


def terminated(job, value):
    return (
        f"005 ({job}.000) {STAMP} Job terminated.\n"
        f"\t(1) Normal termination (return value {value})\n"
        + "".join(f"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  {usage} Usage\n" for usage in USAGES)
        + "".join(f"\t0  -  {traffic} By Job\n" for traffic in TRAFFIC)
        + "...\n"
    )


USAGES = ("Run Remote", "Run Local", "Total Remote", "Total Local")
TRAFFIC = ("Run Bytes Sent", "Run Bytes Received", "Total Bytes Sent", "Total Bytes Received")


def aborted(job):
    return f"009 ({job}.000) {STAMP} Job was aborted.\n\tremoved by user\n...\n"
