import os
import sys
import types

from .commands.interrupt import quiet_interrupts

quiet_interrupts()  # Ctrl-C: no traceback, status 130

# The CLI validates one config and exits; pydantic's plugin discovery would scan every installed
# package's entry points first (about 20 ms of a 0.3 s plan). Set the variable to use a plugin.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
if os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__":
    # With plugins off, pydantic still imports its plugin loader, whose first line imports importlib.metadata (with
    # email, zipfile and csv: about 15 ms of a 0.22 s plan) to look for plugins it will then not load. The loader's
    # one function, answering as pydantic's does with plugins off (tests/test_cli_startup.py holds it to pydantic's).
    _loader = types.ModuleType("pydantic.plugin._loader")
    _loader.get_plugins = lambda: ()
    sys.modules.setdefault("pydantic.plugin._loader", _loader)

from .method_cache import install  # noqa: E402

install()  # before the imports below define their dataclasses: 43 ms of compiling saved (method_cache.py)

from .commands.cli import main  # noqa: E402  (after the lines above, which must run before pydantic loads)

try:
    sys.exit(main())
except BrokenPipeError:
    # `plan --json | head`: the reader left. Python's documented recipe (signal module, "Note on SIGPIPE"): point
    # stdout at devnull so the exit's flush does not fail again, and end quietly with an error status.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
