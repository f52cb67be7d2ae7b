/* perfmodel/: filled in by the performance-model module. */
typedef int perf_placeholder_unused;
