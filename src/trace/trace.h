/* src/trace/trace.h: the JSON-lines run trace (schema 1), its writer and its reader.
 *
 * The trace is the contract between the training engine and everything
 * downstream (performance model, heatmaps, plots): one JSON object per line,
 * written with jansson. Record types, in file order:
 *
 *   header  once, first line: program, version, creation time, seed, threads,
 *           policy, config {section: {key: value}}, config file and overrides,
 *           dataset sizes, model (layers with shapes, params, MACs and, with
 *           graph precision propagation, each layer's set and precision) and
 *           the precision units
 *   sample  the comp policy's search, before the first step: one record per plan it trained
 *           (stage 1: an epoch) or ran (stage 2: one batch), with the plan, its loss,
 *           its price, whether it was safe and chosen, and the per-unit word lengths and
 *           per-layer governing units the performance model prices it with (the run's
 *           overhead: the search's state is restored before training)
 *   step    every run.log_every optimizer steps: lr, loss, push-up strategy,
 *           per-unit state (WL, FL and, by policy, lb, r, sparsity, saturated
 *           and flushed counts), push-down / push-up events, gradient
 *           accumulations since the last step line, AMP overflow
 *   epoch   after each epoch: train / validation loss and accuracy, wall time
 *   test    once, after training
 *   end     last line: status "ok" or "stopped", wall time
 *
 * Numbers that are not finite (a diverged loss) are written as null and read
 * back as NaN. Optional fields are marked below with the value that stands
 * for "absent"; the writer omits them and the reader restores that value.
 * The reader ignores fields it does not know (additions keep schema 1) and
 * refuses other schema versions.
 *
 * Non-goals: no engine types here (this header depends on src/base and
 * jansson only, so src/perfmodel/ links libtrace.a without the engine); no
 * streaming reader (traces are read whole; a long run is a few MB).
 *
 *   struct adapt_trace_writer *w;
 *   if ((st = adapt_trace_writer_create(&w, "runs/x/trace.jsonl")) != ADAPT_OK) return st;
 *   st = adapt_trace_write_header(w, &hdr);       // hdr.config from adapt_config_to_json
 *   ... adapt_trace_write_step(w, &step); adapt_trace_write_epoch(w, &ep); adapt_trace_flush(w);
 *   st = adapt_trace_writer_close(w);            // flushes, fsyncs, frees
 *
 *   // resume from a checkpoint taken after epoch 7
 *   adapt_trace_truncate_after_epoch("runs/x/trace.jsonl", 7);
 *   adapt_trace_writer_append(&w, "runs/x/trace.jsonl", -1);
 *
 *   struct adapt_trace *t;
 *   if ((st = adapt_trace_load(&t, "runs/x/trace.jsonl", 0)) != ADAPT_OK) return st;
 *   for (int64_t i = 0; i < t->n_steps; i++) use(t->steps[i].units[0].wl);
 *   adapt_trace_free(t);
 *
 * Ownership: the writer borrows everything it is given (hdr->config is not
 * stolen). A struct adapt_trace from adapt_trace_load owns all its strings,
 * arrays and the config reference; adapt_trace_free releases them.
 */
#ifndef ADAPT_TRACE_H
#define ADAPT_TRACE_H

#include <stdint.h>

#include <jansson.h>

#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADAPT_TRACE_SCHEMA 1
#define ADAPT_TRACE_MAX_DIMS 4

/* What the reader accepts beyond the types (doc/trace.schema.json and python/adaptsim/trace.py
 * say the same): numbers that consumers count with are bounded by what a run can write, so that
 * no consumer sizes memory or overflows by a number in the file.
 *
 *   step numbers  step records 1..ADAPT_TRACE_STEP_MAX, increasing; epoch records' steps the
 *                 same (each epoch trains at least one step)
 *   epochs        0..ADAPT_TRACE_EPOCH_MAX - 1 in step and epoch records (0-based), never
 *                 decreasing over the step records, increasing over the epoch records; the
 *                 test record's count of epochs trained 0..ADAPT_TRACE_EPOCH_MAX
 *   formats       WL 1..32 and FL 0..32, independently, as quant's fixed(WL,FL) (FL > WL is a
 *                 format of magnitudes below 2^(WL-1-FL)); other formats write FL 0
 *   fractions     train_acc, val_acc, test_acc, sparsity, act_sat in [0, 1] (or null)
 *   times         wall_s a number >= 0 (not null); lr and images_per_s >= 0 or null
 *   shapes        layer in / out entries >= 0; model.input entries 1..INT_MAX
 *   JSON          a line holds at most ADAPT_TRACE_DEPTH_MAX nested arrays and objects and at
 *                 most 4 MiB (src/trace/internal.h, ADAPT_TRACE_LINE_MAX) */
#define ADAPT_TRACE_STEP_MAX  ((int64_t)1 << 53) /* exact as a double, as the consumers count */
#define ADAPT_TRACE_EPOCH_MAX 100000 /* the most epochs a run trains: train.epochs' bound */
#define ADAPT_TRACE_DEPTH_MAX 64     /* a writer's record nests 5 deep */

/* One layer of the model, in forward order. */
struct adapt_trace_layer {
    const char *name;    /* "features.0" */
    const char *kind;    /* "conv2d", "linear", "maxpool2d", "relu", "batchnorm2d", ... */
    int in_ndim, out_ndim; /* 1..ADAPT_TRACE_MAX_DIMS */
    int64_t in[ADAPT_TRACE_MAX_DIMS];  /* (C, H, W) of one sample, or (features) */
    int64_t out[ADAPT_TRACE_MAX_DIMS]; /* (C, H, W) of one sample, or (features) */
    int64_t params;      /* trainable parameters */
    int64_t macs;        /* multiply-accumulates per sample, forward */
    int64_t elementwise; /* element operations per sample (pool, activation, batch norm) */
    int unit;            /* index among the precision units, -1 if not a unit */
    int k, stride, pad;  /* conv / pool: kernel size, stride, padding; k = 0: absent */
    int groups, dilation; /* conv2d: 1 (absent from the record) unless grouped / dilated */
    /* Graph precision propagation (quantization.precision_propagation = graph): the layer's
     * set ("allow", "infer", "deny"), where it came from ("preset", "kind", "layer"), its
     * resolved precision at the start of the run ("float32" or a format: "fp16") and the
     * unit whose format it takes (-1: float32). NULL (and precision_unit unset) when absent:
     * unit propagation, and traces of older versions. */
    const char *graph_set, *graph_source, *precision;
    int precision_unit;  /* read only when precision is not NULL */
};

/* A precision unit (conv or linear layer). */
struct adapt_trace_unit {
    const char *name; /* "features.0" */
    int layer;        /* index into the layers */
    int64_t weights;  /* elements of the weight tensor */
    int64_t macs;     /* forward MACs per sample */
};

#define ADAPT_TRACE_ROLES 9 /* tensor roles of a header's "roles" */
struct adapt_trace_header {
    int schema;            /* read only: ADAPT_TRACE_SCHEMA */
    const char *program;   /* read only: "adapt-sim" */
    const char *version;   /* read only: PACKAGE_VERSION of the writer */
    const char *created;   /* ISO-8601 UTC "2024-05-01T12:00:00Z"; NULL on write = now */
    int64_t seed;
    int threads;
    int sr_bits;           /* random bits per stochastic rounding (quantization.sr_bits): 32 or
                              16; optional, written only when 16 (0 on write = 32; 32 when
                              absent) */
    /* The program and the machine that started the run (doc/running.md, "What a run records
     * about its machine"): the commit of the build, the compiler, the CPU's model name and
     * x86-64 level, the BLAS library with the kernel set it picked for this CPU, and the
     * device ("cpu", or the GPU's name and properties). Written as the "build" object when
     * commit is not NULL; all NULL when absent (traces of older versions). */
    struct {
        const char *commit, *compiler, *cpu, *isa, *blas, *device;
    } build;
    const char *policy;    /* "fp32", "fixed", "adapt", "muppet", "amp", "comp" */
    json_t *config;        /* {section: {key: value}}; may be NULL on write (written as {}) */
    struct {               /* read only: the values of config that downstream tools use,
                            * typed and range-checked by the reader */
        int batch;         /* train.batch (>= 1); 0 = absent */
        int accumulation;  /* train.accumulation_steps (>= 1); 1 when absent */
        int muppet_r;      /* policy.muppet_r (>= 1); 0 = absent */
        const char *compat; /* quantization.compat; NULL = absent */
        const char *name;   /* run.name; NULL = absent */
    } cfg;
    /* the tensor roles' operand widths, written when the run sets [roles] (doc/numerics.md):
     * per role of adapt_trace_role_names, the bits of its format, 32 for float32, -1 for the
     * unit's own format (auto, unit; also when absent), and the role's text */
    int has_roles;
    int role_bits[ADAPT_TRACE_ROLES];
    const char *role_text[ADAPT_TRACE_ROLES]; /* NULL when absent */
    const char *config_file; /* NULL or "" = none */
    int n_overrides;
    const char *const *overrides; /* (n_overrides) "section.key=value" */
    struct {
        const char *name;
        int64_t train, val, test; /* samples */
        int classes;
    } dataset;
    struct {
        const char *name;
        int input[3];      /* (C, H, W) */
        int classes;
        int64_t params, macs;
        int n_layers;
        const struct adapt_trace_layer *layers; /* (n_layers) */
        /* The model description it was built from (doc/model-format.md): its path, the
         * parameter settings and the text; NULL when absent (traces of older versions). */
        const char *description_file, *description_args, *description_text;
    } model;
    int n_units;
    const struct adapt_trace_unit *units; /* (n_units) */
};

/* AdaPT's push-up strategy: the one definition, used by the configuration
 * (quantization.strategy) and the policies as well. */
enum adapt_trace_strategy {
    ADAPT_TRACE_STRATEGY_NONE = 0, /* written as null (policies without a strategy) */
    ADAPT_TRACE_STRATEGY_MIN,      /* "min" */
    ADAPT_TRACE_STRATEGY_MEAN,     /* "mean" */
    ADAPT_TRACE_STRATEGY_MAX       /* "max" */
};
/* The names of the strategies, indexed by value (NONE: NULL). */
extern const char *const adapt_trace_strategy_names[ADAPT_TRACE_STRATEGY_MAX + 1];
/* The header's "roles" keys, in the order of src/config/config.h's enum adapt_role. */
extern const char *const adapt_trace_role_names[ADAPT_TRACE_ROLES];

/* State of one precision unit at a logged step. */
#define ADAPT_TRACE_SCALED_ROLES 3 /* weight, input, grad_output */
struct adapt_trace_unit_state {
    int wl, fl;           /* fp32: 32, 0 */
    double lb;            /* lookback; NaN = absent */
    int r;                /* histogram resolution; -1 = absent */
    double sparsity;      /* fraction of exact zeros in the quantized weights; NaN = absent */
    int64_t sat, flush;   /* saturated / flushed-to-zero elements; -1 = absent */
    double act_sat;       /* fraction of the unit's rounded outputs that saturated in the
                           * training forwards since the previous step record; NaN = absent */
    /* [roles] with scaling: the GEMM operands' scale statistics (weight, input, grad_output):
     * the last tensor's amax and scale, and the values saturated and flushed to zero since
     * the previous step record; scale 0 = absent (the role is not scaled) */
    struct adapt_trace_role_scale {
        double amax, scale;
        int64_t sat, flush;
    } scaled[ADAPT_TRACE_SCALED_ROLES];
    /* [arithmetic]: the unit's GEMMs under its accumulator model since the previous step
     * record, per GEMM (forward, input gradient, weight gradient): calls, and additions whose
     * sum left an int(A) register (wrapped or saturated); acc_set 0 = absent */
    int acc_set;
    int64_t acc_gemms[3], acc_overflows[3];
};
/* the roles of adapt_trace_unit_state.scaled, in order: "weight", "input", "grad_output" */
extern const char *const adapt_trace_scaled_role_names[ADAPT_TRACE_SCALED_ROLES];

enum adapt_trace_event_kind { ADAPT_TRACE_EVENT_PD = 0, ADAPT_TRACE_EVENT_PU };

/* A push-down or push-up of one unit. */
struct adapt_trace_event {
    int unit;
    enum adapt_trace_event_kind kind;
    int before[2], after[2]; /* (WL, FL) */
    int bisect_steps;        /* PD: bisection steps */
    int kl_evals;            /* PD: KL evaluations */
    int64_t sample;          /* PD: elements tested per evaluation */
    int s;                   /* PU: FL increase */
};

struct adapt_trace_step {
    int64_t step;            /* optimizer steps done, 1-based */
    int epoch;
    double lr, loss;
    enum adapt_trace_strategy strategy;
    int n_units;
    struct adapt_trace_unit_state *units; /* (n_units); n_units = header n_units */
    int n_events;
    struct adapt_trace_event *events;     /* (n_events) */
    int accum;               /* micro-batch gradient accumulations since the last step line */
    int overflow;            /* 1: AMP skipped the step (inf/NaN gradients) */
};

struct adapt_trace_epoch {
    int epoch;
    int64_t step;
    double lr;
    double train_loss, train_acc;
    double val_loss, val_acc; /* NaN when there is no validation split */
    double wall_s;            /* since the start of training */
    double images_per_s;
};

/* One plan sampled by the comp policy's search (src/policy/comp.h). */
struct adapt_trace_sample {
    int stage;            /* 1: trained for an epoch (or comp_sample_steps steps); 2: one batch,
                             forward and backward, no update */
    const char *plan;     /* one digit per layer */
    int64_t steps;        /* optimizer steps trained (0 in stage 2) */
    int64_t samples;      /* samples through forward and backward */
    double loss;          /* mean training loss (NaN: diverged) */
    double cost;          /* the price the search compared (one optimizer step) */
    int safe, chosen;     /* passed the stage's test; the stage's pick */
    int n_units;
    const int *wl;        /* (n_units) word length per unit, 32 = float32 */
    int n_layers;
    const int *gov;       /* (n_layers) unit whose format the layer rounds in, -1 float32 */
};

struct adapt_trace_test {
    int epoch;
    double test_loss, test_acc;
};

enum adapt_trace_end_status { ADAPT_TRACE_END_OK = 0, ADAPT_TRACE_END_STOPPED };

struct adapt_trace_end {
    enum adapt_trace_end_status status;
    double wall_s;
};

/* ----------------------------------------------------------------- writer */

struct adapt_trace_writer;

/* Creates (or truncates) path for a new trace. */
enum adapt_status adapt_trace_writer_create(struct adapt_trace_writer **w, const char *path);
/* Opens an existing trace to continue it. keep_bytes >= 0: the file is first
 * cut to that many bytes (a byte offset saved with a checkpoint; it must end
 * a line); keep_bytes < 0: an incomplete last line, if any, is cut off. */
enum adapt_status adapt_trace_writer_append(struct adapt_trace_writer **w, const char *path,
                                            int64_t keep_bytes);
/* Bytes written so far (the file size once flushed): store it in a checkpoint. */
int64_t adapt_trace_writer_offset(const struct adapt_trace_writer *w);
/* Refuses a header that the trace cannot hold: a text field that is not UTF-8, named with
 * the offset of its first bad byte. adapt_trace_write_header checks the same; a program checks
 * first, before it writes anything. */
enum adapt_status adapt_trace_check_header(const struct adapt_trace_header *h);
enum adapt_status adapt_trace_write_header(struct adapt_trace_writer *w,
                                           const struct adapt_trace_header *h);
enum adapt_status adapt_trace_write_step(struct adapt_trace_writer *w,
                                         const struct adapt_trace_step *s);
enum adapt_status adapt_trace_write_epoch(struct adapt_trace_writer *w,
                                          const struct adapt_trace_epoch *e);
enum adapt_status adapt_trace_write_sample(struct adapt_trace_writer *w,
                                           const struct adapt_trace_sample *s);
enum adapt_status adapt_trace_write_test(struct adapt_trace_writer *w,
                                         const struct adapt_trace_test *t);
enum adapt_status adapt_trace_write_end(struct adapt_trace_writer *w,
                                        const struct adapt_trace_end *e);
/* Writes any buffered lines to the file and fsyncs it. */
enum adapt_status adapt_trace_flush(struct adapt_trace_writer *w);
/* Flushes, closes and frees (also on error); NULL is a no-op. */
enum adapt_status adapt_trace_writer_close(struct adapt_trace_writer *w);

/* Keeps the header and every line up to and including the epoch record of
 * `epoch`, dropping the rest (atomically: temporary file, fsync, rename).
 * ADAPT_ENOENT when the trace has no such epoch record. */
enum adapt_status adapt_trace_truncate_after_epoch(const char *path, int epoch);

/* ----------------------------------------------------------------- reader */

struct adapt_trace {
    char *path;
    struct adapt_trace_header header; /* owned: strings, layers, units, config */
    int64_t n_steps;
    struct adapt_trace_step *steps;   /* (n_steps) */
    int n_epochs;
    struct adapt_trace_epoch *epochs; /* (n_epochs) */
    int n_samples;
    struct adapt_trace_sample *samples; /* (n_samples) owned: plan, wl and gov */
    int64_t *step_line;               /* (n_steps) file line of each step record, 1-based */
    int64_t *epoch_line;              /* (n_epochs) file line of each epoch record */
    int has_test;
    struct adapt_trace_test test;
    int has_end;
    struct adapt_trace_end end;
    int64_t n_lines;                  /* complete lines read */
    int truncated;                    /* an incomplete last line was skipped (LOAD_PARTIAL) */
};

/* Accept an incomplete last line (a run still writing, or killed): skip it
 * and set truncated, instead of failing with ADAPT_EFORMAT. */
#define ADAPT_TRACE_LOAD_PARTIAL 1u

/* Reads a whole trace. Errors (ADAPT_EFORMAT unless noted) name the file and
 * line: malformed JSON, a first line that is not a header, a second header,
 * an unknown schema version, an unknown record type, a missing field or one
 * of the wrong type (header.cfg's config values included), a step whose unit
 * count differs from the header, an incomplete last line ("truncated");
 * ADAPT_ENOENT / ADAPT_EIO when the file cannot be opened or read. */
enum adapt_status adapt_trace_load(struct adapt_trace **out, const char *path, unsigned flags);
void adapt_trace_free(struct adapt_trace *t);

const char *adapt_trace_strategy_name(enum adapt_trace_strategy s); /* "min", ... or NULL */

#ifdef __cplusplus
}
#endif
#endif
