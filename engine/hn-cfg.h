/* hn-cfg.h — classifier-free guidance: combining the logits of the chat (positive)
 * sequence with those of the negative-prompt sequence.
 *
 *   log_softmax(guided) = log_softmax(neg) + scale · (log_softmax(pos) − log_softmax(neg))
 *
 * The result is a row of log-probabilities (up to a constant), which the sampler takes as
 * logits.  scale 1 is exactly the positive row (the generation loop then skips the
 * negative sequence altogether); scale 0 is the negative row; scale > 1 pushes away from
 * what the negative prompt would say.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HN_CFG_SCALE_MIN 0.0f
#define HN_CFG_SCALE_MAX 10.0f

/* out may alias pos or neg.  -inf logits stay -inf (a token banned in either row is
 * banned in the result unless scale makes its weight exactly 0). */
void hn_cfg_combine(const float *pos, const float *neg, float scale, float *out, int32_t n_vocab);

/* log_softmax of a row, in place (double accumulation). */
void hn_log_softmax(float *row, int32_t n);

#ifdef __cplusplus
}
#endif
