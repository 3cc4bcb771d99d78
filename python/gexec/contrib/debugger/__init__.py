"""The debugging graph executor, as tvm.contrib.debugger."""
