/* quant/: filled in by the formats module. */
typedef int quant_placeholder_unused;
