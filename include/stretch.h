/* stretch.h - umbrella header: the whole public API (prefix st_). */
#ifndef STRETCH_H
#define STRETCH_H
#include "st_common.h"
#include "st_tensor.h"
#include "st_matmul.h"
#include "st_ops.h"
#include "st_data.h"
#include "st_model.h"
#include "st_train.h"
#include "st_eval.h"
#endif
