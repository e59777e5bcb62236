/* cli-common.h — helpers shared by the hanashi-cli subcommands.
 *
 * Contract for every subcommand: exit status 0 on success; on bad input, exactly one line
 * "hanashi-cli: error: <message>" on stderr and exit status 1.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-vocab.h"

#include <stdio.h>

/* Prints "hanashi-cli: error: <message>" and returns 1 (the exit status to use). */
int cli_fail(const char *fmt, ...) HN_PRINTF(1, 2);

/* Same, with the message of an engine error. */
int cli_fail_error(const HnError *err);
/* Prints "hanashi-cli: notice: TEXT" on stderr when text is not NULL: something the user
 * should know that does not stop the command. */
void cli_notice(const char *text);

/* Parses "1,2,3" (spaces allowed) into a newly allocated array; false on any junk. */
bool cli_parse_ids(const char *text, int32_t **ids_out, size_t *n_out);

/* Tokenizes the whole text (BOS/EOS as the vocabulary asks, special tokens parsed) into a
 * newly allocated array of exactly the needed size: no length limit of its own. */
bool cli_tokenize_all(const HnVocab *vocab, const char *text, size_t len, int32_t **ids_out, size_t *n_out,
                      HnError *err);

/* Reads a whole file into a NUL-terminated malloc'ed buffer. */
char *cli_read_file(const char *path, size_t *len_out, HnError *err);

/* Parses a decimal integer / float option value strictly (whole string, in range). */
bool cli_parse_int(const char *text, long long min, long long max, long long *out);
bool cli_parse_float(const char *text, double *out);

/* Subcommand entry points: argv[0] is the subcommand name. */
typedef int (*CliCommandFunc)(int argc, char **argv);
