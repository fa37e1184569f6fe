"""How annexes are created where the jobs go (backend_for): the protocol, and the embedded pool's
backend. A real access point's is htcondor_cli.HtcondorCliBackend."""
import getpass
import shlex
from pathlib import Path
from typing import Optional, Protocol

from snakemake_executor_plugin_htcannex.annex.htcondor_cli import HtcondorCliBackend
from snakemake_executor_plugin_htcannex.sites.site import Site


class AnnexBackend(Protocol):
    def describe(self, site: Site) -> str:
        """The command that creates `site`'s annex, for the user to read (or run by hand)."""

    def manual_steps(self, site: Site) -> str:
        """What the user runs to bring up a `create: manual` site's annex by hand."""

    def create(self, site: Site) -> bool:
        """Request `site`'s annex; False when it was already there (nothing was requested)."""

    def withdraw(self, site: Site) -> str:
        """End `site`'s annex, up or still waiting in the site's batch queue; say what was done."""


class EmbeddedBackend:
    """Creates annexes in the embedded pool with the site's slot shape."""

    def __init__(self, pool, config_path: Optional[Path] = None):
        self.pool = pool
        self.config_path = config_path

    def command(self, site: Site) -> list[str]:
        argv = ["htcannex", "annex", "create", site.name]
        if self.config_path is not None:
            argv += ["--htcannex-config", str(self.config_path)]
        return argv + ["--pool-dir", str(self.pool.spool_dir)]

    def describe(self, site: Site) -> str:
        return shlex.join(self.command(site))

    def manual_steps(self, site: Site) -> str:
        # The embedded pool plays the execute point a user starts by hand.
        return f"Bring it up by hand:\n    {self.describe(site)}"

    def create(self, site: Site) -> bool:
        if any(annex["name"] == site.annex_name and annex["state"] != "expired"
               for annex in self.pool.annexes()):
            return False  # asked for before this working directory's ledger existed, or by hand
        self.pool.create_annex(
            site.annex_name, owner=getpass.getuser(), nodes=site.nodes,
            lifetime_s=site.lifetime_s, **site.slot_shape(),
        )
        return True

    def withdraw(self, site: Site) -> str:
        if not any(annex["name"] == site.annex_name for annex in self.pool.annexes()):
            return f"annex {site.annex_name} was not there"
        self.pool.remove_annex(site.annex_name)
        return f"annex {site.annex_name} shut down"


def backend_for(connection, config_path: Optional[Path] = None) -> AnnexBackend:
    """How annexes are created where `connection` (schedd.Connection) sends jobs: in the embedded
    pool, or by `htcondor annex create`. `config_path` (the htcannex.yaml in use) goes into the
    command the embedded pool's backend shows for creating an annex by hand."""
    if connection.pool is not None:
        return EmbeddedBackend(connection.pool, config_path)
    return HtcondorCliBackend(connection.schedd, connection.collector)
