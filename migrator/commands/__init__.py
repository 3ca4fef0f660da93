"""The commands as library functions that return reports and never print (``migrator.render``
does): ``from migrator.commands import migrate, verify``. The only package where the stages
(mapping, plan, source, target, verify) meet."""

from migrator.commands.dryrun import dry_run
from migrator.commands.init import init
from migrator.commands.migrate import migrate
from migrator.commands.sync import sync
from migrator.commands.validate import validate
from migrator.commands.verify import verify

__all__ = ["dry_run", "init", "migrate", "sync", "validate", "verify"]
