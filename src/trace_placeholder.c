typedef int trace_placeholder_unused;
