/* src/train/checkpoint.h: the safetensors checkpoints of a run
 * (src/base/safetensors.h): writing and publishing them in the run directory
 * (src/train/run_dir.h), loading one to resume, and importing weights and
 * per-unit formats from a model file.
 *
 * Layout in the run directory:
 *   ckpt-<epoch>/       one checkpoint, written in full before it is published:
 *     model.safetensors parameters and batch-norm buffers under their PyTorch
 *                       state_dict names; metadata: format, epoch, step, seed,
 *                       model, dataset, rng, policy and unit_formats (the
 *                       per-unit number formats of the last weight rounding)
 *     optim.safetensors one momentum buffer per trainable parameter (same
 *                       names) and the policy's tensors (policy-prefixed
 *                       names); metadata: sgd steps, the schedule's state,
 *                       the policy's state as JSON
 *   checkpoint          link to the published ckpt-<epoch>; replaced by one
 *                       rename, after which the previous one is removed
 *   model.safetensors, optim.safetensors
 *                       links to checkpoint/model.safetensors and
 *                       checkpoint/optim.safetensors
 * A checkpoint is atomic as a whole: an interruption anywhere in its writing
 * (a kill, a full disk) leaves the previous one published. Every value read
 * back is checked against its range and the model.
 *
 * Non-goals: mid-epoch checkpoints; formats other than safetensors.
 */
#ifndef ADAPT_CHECKPOINT_H
#define ADAPT_CHECKPOINT_H

#include <stdio.h>

#include "src/net/net.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/train/run_dir.h"

/* Writes and publishes the checkpoint of epochs_done (flushing the trace
 * first, so that it holds every record up to it). */
enum adapt_status adapt_ckpt_write(struct adapt_run_dir *d, const struct adapt_net *net,
                                   const struct adapt_sgd *opt, const struct adapt_sched *sched,
                                   const struct adapt_policy *pol, int epochs_done, long step);

/* Refuses a network whose checkpoint would hold two tensors of one name in
 * model.safetensors or optim.safetensors (layer names make tensor names:
 * "a.b" with a parameter "weight", policy state "adapt.G.<unit>"), so that a
 * run stops before it starts, not at its first checkpoint. */
enum adapt_status adapt_ckpt_check_names(const struct adapt_net *net,
                                         const struct adapt_sgd *opt,
                                         const struct adapt_policy *pol);

/* Removes temporaries and the checkpoint directories other than the
 * published one; with `all` every checkpoint and the link as well. */
enum adapt_status adapt_ckpt_clean(const struct adapt_run_dir *d, int all);

/* The checkpoint a run resumes from: the published one (its model and
 * optimizer links made again if needed) or, without one, model.safetensors
 * and optim.safetensors if either exists. *found = 0 when there is none (the
 * run starts again); otherwise it is loaded into net, opt, sched and pol and
 * *epoch / *step set to where it was taken. */
enum adapt_status adapt_ckpt_resume(const struct adapt_run_dir *d, struct adapt_net *net,
                                    struct adapt_sgd *opt, struct adapt_sched *sched,
                                    struct adapt_policy *pol, int *epoch, long *step, int *found);

/* Loads parameters and buffers by state_dict name from a safetensors file
 * (ours or PyTorch's): every tensor of the network must be present with the
 * same shape (F32; num_batches_tracked I64). */
enum adapt_status adapt_ckpt_load_weights(struct adapt_net *net, const char *path);

/* The per-unit formats stored with a model.safetensors (metadata
 * "unit_formats", written by adapt_ckpt_write) applied to pol's precision
 * units, and *step set to the checkpoint's optimizer step (the key of its
 * last weight rounding). Files without them (PyTorch's, or a policy without
 * precision units) leave pol unchanged and *step = 0; formats of another
 * policy are not applied. When report is not NULL, prints the formats used
 * (or why none) and a note when the policies differ.
 * A checkpoint is data and loads no code on its own: a stored plugin format
 * is loaded only when quant_plugin_allowed(its text, allow_plugins,
 * n_allow_plugins) (src/quant/quant.h: the files the user allowed, and the
 * plugins the configuration loaded); otherwise ADAPT_EINVAL names the file,
 * the unit, the stored format and --allow-plugin, before any plugin of the
 * file is loaded. */
enum adapt_status adapt_ckpt_load_formats(struct adapt_policy *pol, const char *path, long *step,
                                          FILE *report, const char *const *allow_plugins,
                                          int n_allow_plugins);
/* Evaluation of a run with scaled roles (src/policy/roles.c): their scales and amax
 * histories from the optim.safetensors beside the weights file path, when it is of the same
 * epoch (*loaded = 1); otherwise a note on report and the roles start at scale 1. A present
 * file without role_scales, or one that does not fit, is an error naming it. */
enum adapt_status adapt_ckpt_load_role_scales(struct adapt_policy *pol, const char *path,
                                              FILE *report, int *loaded);

#endif
