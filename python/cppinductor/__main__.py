"""python -m cppinductor: points to the subcommands."""

print("usage: python -m cppinductor.explain script.py [args] | python -m cppinductor.bench [--quick]")
