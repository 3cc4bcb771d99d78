"""TVM-named contributions: graph_executor, debugger.debug_executor."""
