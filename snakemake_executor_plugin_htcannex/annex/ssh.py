"""The ssh connection `htcondor annex create` makes to a system's login host, as htcondor_cli makes it
(annex_create.annex_inner_func_old): the target `[HPC_ANNEX_<SYSTEM>_USER_NAME or --login-name@]`
`HPC_ANNEX_<SYSTEM>_HOST_NAME` (SYSTEM_TABLE's host_name by default), and a shared connection
(ControlMaster auto, ControlPersist 5m) whose socket is `<ANNEX_TMP_DIR>/master-%C`.

`htcondor annex create` logs in with a plain `ssh` that asks for a passphrase, a password or a second
factor on the terminal. A run with no terminal (the walk-away driver of `htcannex submit`, a run under
nohup) has none to ask on: `Login.check()` logs in first with BatchMode, which never prompts, over the
same shared connection, so that either the create finds a connection ready (an open control master, a
key without passphrase, an ssh-agent) or the user is told what to do, instead of a create that waits on
a prompt no one sees.
"""
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import htcondor2
from htcondor_cli.annex_validate import SYSTEM_TABLE

# How long a non-interactive login may take (ssh's own connect timeout is shorter).
CHECK_TIMEOUT_S = 60


def run_detached_output(argv: list[str], timeout_s: float, env=None) -> subprocess.CompletedProcess:
    """Run `argv` with no stdin and its output (stdout and stderr together) read from a file, not a pipe:
    an ssh that becomes a shared connection's master (ControlPersist) keeps its stderr for minutes after
    the command is done, and a pipe would not end until it exits."""
    with tempfile.TemporaryFile(mode="w+") as output:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                env=env, timeout=timeout_s, text=True)
        output.seek(0)
        return subprocess.CompletedProcess(argv, result.returncode, stdout=output.read())


class LoginNeedsTerminal(RuntimeError):
    """ssh to the login host would prompt, and there is no terminal to prompt on."""


def has_terminal() -> bool:
    """Whether ssh could ask the user something: a controlling terminal with someone at it."""
    try:
        with open("/dev/tty"):
            pass
    except OSError:
        return False
    return sys.stdin.isatty()


@dataclass(frozen=True)
class Login:
    system: str
    target: Optional[str]  # [user@]host; None for a system reached without ssh (aws-ec2)
    control_dir: Path

    @classmethod
    def of(cls, system: str, login: Optional[str]) -> "Login":
        system = system.casefold()
        host = htcondor2.param.get(f"HPC_ANNEX_{system}_HOST_NAME", SYSTEM_TABLE[system].host_name)
        user = login or htcondor2.param.get(f"HPC_ANNEX_{system}_USER_NAME")
        control_dir = Path(htcondor2.param.get("ANNEX_TMP_DIR", "~/.hpc-annex")).expanduser()
        return cls(system, None if host is None else (f"{user}@{host}" if user else host), control_dir)

    def sharing_options(self) -> list[str]:
        return ["-o", "ControlPersist=5m", "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.control_dir}/master-%C"]

    def ssh(self, *command: str, timeout_s: float = CHECK_TIMEOUT_S) -> subprocess.CompletedProcess:
        """Run `command` at the login host without ever prompting (BatchMode, no stdin)."""
        self.control_dir.mkdir(parents=True, exist_ok=True)
        return run_detached_output(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20",
                                    *self.sharing_options(), self.target, *command], timeout_s)

    def master_open(self) -> bool:
        """Whether a shared connection to the login host is open (ssh -O check)."""
        return subprocess.run(["ssh", *self.sharing_options(), "-O", "check", self.target],
                              stdin=subprocess.DEVNULL, capture_output=True).returncode == 0

    def close_master(self) -> None:
        subprocess.run(["ssh", *self.sharing_options(), "-O", "exit", self.target],
                       stdin=subprocess.DEVNULL, capture_output=True)

    def check(self, site_name: str) -> None:
        """Log in once without prompting. Where that fails and no one can answer a prompt, raise
        LoginNeedsTerminal saying what to do; with a terminal, `htcondor annex create` asks there."""
        try:
            result = self.ssh("true")
        except subprocess.TimeoutExpired:
            failed = f"did not answer within {CHECK_TIMEOUT_S} s"
        else:
            if result.returncode == 0:
                return
            failed = f"said: {result.stdout.strip() or f'exit {result.returncode}'}"
        if has_terminal():
            return
        raise LoginNeedsTerminal(
            f"ssh to {self.target}, the login host of {self.system}, needs a passphrase, a password or a second "
            f"factor (or is refused), and this run has no terminal to ask on (ssh -o BatchMode=yes {failed}). "
            f"Open a shared connection first, in a terminal on this access point, and leave it open while the "
            f"run needs annexes at {self.system}: `htcondor annex login {self.system}` (or load your key into "
            f"ssh-agent); or set sites.{site_name}.create: manual and bring the annex up yourself"
        )
