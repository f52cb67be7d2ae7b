/* src/train/train.h: the training run: data, model, optimizer, schedule, the
 * epoch loop with validation, trace, checkpoints and the final test score.
 *
 * A run is described by struct adapt_train_params (filled from the config by
 * the adapt-train program) and writes into one output directory:
 *   trace.jsonl          the JSON-lines trace (src/trace/trace.h)
 *   model.safetensors    weights and batch-norm buffers, PyTorch state_dict names
 *   optim.safetensors    momentum buffers (same names) and the schedule state
 * Checkpoints are written atomically at the end of epochs; --resume restarts
 * after the last checkpointed epoch and reproduces the uninterrupted trace
 * (all random bits are keyed by seed, epoch and sample or step).
 *
 *   struct adapt_train_params p;
 *   adapt_train_params_default(&p);
 *   p.model = "lenet5"; ...
 *   int rc = adapt_train_run(&p);   // prints progress, returns 0 on success
 *
 * Non-goals: distributed training, mid-epoch checkpoints.
 */
#ifndef ADAPT_TRAIN_H
#define ADAPT_TRAIN_H

#include <stdint.h>

#include "src/base/status.h"
#include "src/config/config.h"

struct adapt_train_opts {
    const char *out_dir;   /* resolved output directory */
    int resume;            /* continue the run in out_dir */
    int force;             /* overwrite an existing out_dir */
    const char *init_from; /* safetensors weights to start from (NULL: initialise) */
    int eval_only;         /* score init_from on the test set and stop, at the per-unit
                              formats stored with it (adapt_run_io_load_formats) */
    const char *eval_json; /* eval_only: also write the result as JSON here (NULL: no) */
    int quiet;             /* no progress output */
};

/* Runs the configured training (or evaluation). Returns ADAPT_OK or a status
 * with the message recorded. */
enum adapt_status adapt_train_run(const struct adapt_config *cfg,
                                  const struct adapt_train_opts *opts);

#endif
