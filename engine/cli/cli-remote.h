/* cli-remote.h — `generate --remote URL` and `chat --remote URL`: the same subcommands, their
 * replies from an OpenAI-compatible server through the app's client (hanashi-remote.h)
 * instead of a model file.  -m names the server's model (default: the first it lists); the
 * sampling options are sent as request fields (Hanashi's own only to a Hanashi server, the
 * others reported with a notice); --ids, --session, -t and -c are not available.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "cli-sampling.h"
#include "hn-chat.h"

#include <stdbool.h>

typedef struct CliRemote CliRemote;

/* Connects: checks the address and that the server lists the model.  NULL after printing
 * the error line. */
CliRemote *cli_remote_open(const char *url, const char *api_key, const char *model);
void cli_remote_close(CliRemote *remote);

/* Checks the sampling options without a vocabulary (logit-bias ids are the server's) and
 * reads the grammar or JSON schema file.  False after printing the error line. */
bool cli_remote_prepare(CliRemote *remote, CliSamplingOptions *opts);

/* Streams the reply to the conversation to stdout (no newline added); *reply_out (may be
 * NULL) takes it (free()).  False after printing the error line. */
bool cli_remote_reply(CliRemote *remote, const char *system, const HnChatMessage *messages, size_t n_messages,
                      HnChatThinking thinking, const CliSamplingOptions *opts, char **reply_out);
