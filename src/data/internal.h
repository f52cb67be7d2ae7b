/* src/data/internal.h: helpers shared by the files of src/data (not a public API).
 *
 * adapt_cifar_load fills the images and labels of a CIFAR data set; the caller
 * (src/data/dataset.c) sets the name, normalisation and other fields.
 */
#ifndef ADAPT_DATA_INTERNAL_H
#define ADAPT_DATA_INTERNAL_H

#include "src/data/data.h"

/* variant 10 or 100. On success ds->n, c, h, w, classes, images, labels are set. */
enum adapt_status adapt_cifar_load(struct adapt_dataset *ds, int variant, const char *path,
                                   enum adapt_data_part part);

#endif
