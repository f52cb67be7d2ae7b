/* src/train/train.h: the training run: data, model, optimizer, schedule, the
 * epoch loop with validation, trace, checkpoints and the final test score.
 *
 * A run is described by the configuration (src/config/config.h) and struct
 * adapt_train_opts (the adapt-train program fills both from its command
 * line) and writes into one output directory (src/train/run_dir.h):
 *   config.ini           the resolved configuration
 *   trace.jsonl          the JSON-lines trace (src/trace/trace.h)
 *   model.safetensors    weights and batch-norm buffers, PyTorch state_dict names
 *   optim.safetensors    momentum buffers (same names) and the schedule state
 * Checkpoints (src/train/checkpoint.h) are written atomically at the end of
 * epochs; --resume restarts after the last checkpointed epoch and
 * reproduces the uninterrupted trace (all random bits are keyed by seed,
 * epoch and sample or step).
 *
 *   struct adapt_config cfg;
 *   adapt_config_init(&cfg);
 *   adapt_config_load(&cfg, "experiments/configs/quickstart.ini");
 *   struct adapt_train_opts o = {.out_dir = "runs/quickstart"};
 *   enum adapt_status st = adapt_train_run(&cfg, &o);   // prints progress
 *
 * Non-goals: distributed training, mid-epoch checkpoints.
 */
#ifndef ADAPT_TRAIN_H
#define ADAPT_TRAIN_H

#include <stdint.h>

#include "src/base/status.h"
#include "src/config/config.h"

struct adapt_graph; /* src/graph/graph.h */

struct adapt_train_opts {
    const char *out_dir;   /* resolved output directory */
    int resume;            /* continue the run in out_dir */
    int force;             /* overwrite an existing out_dir */
    const char *init_from; /* safetensors weights to start from (NULL: initialise) */
    int eval_only;         /* score init_from on the test set and stop, at the per-unit
                              formats stored with it (adapt_ckpt_load_formats) */
    const char *eval_json; /* eval_only: also write the result as JSON here (NULL: no) */
    int quiet;             /* no progress output */
    /* the model description already resolved for the configuration's class count (the dry
     * run prints it first); NULL: resolved from the configuration. Not owned. */
    const struct adapt_graph *graph;
    /* eval_only: the rounding plugins init_from's stored formats may load ("PATH" or
     * "PATH:NAME", adapt_ckpt_load_formats), besides the configuration's own. Not owned. */
    const char *const *allow_plugins;
    int n_allow_plugins;
};

/* What --dry-run checks beyond the configuration: loads the data set (files present, sizes
 * right), builds the model and the policy (a per-unit list must match the model), the loaders
 * and the optimizer, and prints a line each for the data and the policy. With
 * estimate_steps > 0 it also times that many optimizer steps (after 2 warm-up steps) and one
 * evaluation batch and prints the estimated time of the whole run. Writes no file. */
enum adapt_status adapt_train_check(const struct adapt_config *cfg,
                                    const struct adapt_train_opts *opts, int estimate_steps);

/* Runs the configured training (or evaluation). Returns ADAPT_OK or a status
 * with the message recorded. */
enum adapt_status adapt_train_run(const struct adapt_config *cfg,
                                  const struct adapt_train_opts *opts);

#endif
