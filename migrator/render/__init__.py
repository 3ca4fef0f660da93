"""What the CLI prints: messages, progress bars and report tables, all rich.

The only package with rich in it (STYLE habit 7) besides ``lines``: commands return reports,
``cli`` passes them here. Reports go to stdout (or JSON with ``--json``); messages, progress
bars and "exit code 1" notes go to stderr, so stdout stays a clean report for pipes.

``console`` holds the consoles and the ways to print (messages, wrapped lines, tables, JSON),
``bars`` the progress bars; each command's report has a module of its own (``migrate``,
``mapping`` for init and validate, ``dryrun``, ``verify``, ``sync``), so a command imports the
renderer it needs and no other. This package imports nothing on its own.
"""
