# src/graph: model descriptions (doc/model-format.md) read into a resolved graph of named
# layers with shapes and costs; the engine (src/net) and the performance model (src/perfmodel)
# both build from it.
noinst_LIBRARIES += libgraph.a
libgraph_a_SOURCES = \
	src/graph/graph.c src/graph/graph.h src/graph/internal.h \
	src/graph/expr.c src/graph/shape.c src/graph/shape.h
