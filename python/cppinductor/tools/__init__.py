"""Developer tools run as modules: `python -m cppinductor.tools.opinfo_sweep`."""
