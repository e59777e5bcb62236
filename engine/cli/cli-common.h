/* cli-common.h — helpers shared by the hanashi-cli subcommands.
 *
 * Contract for every subcommand: exit status 0 on success; on bad input, exactly one line
 * "hanashi-cli: error: <message>" on stderr and exit status 1.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-chat.h"
#include "hn-common.h"
#include "hn-grammar.h"
#include "hn-model.h"
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

/* The options of a model run that generate, chat and serve share, each with one range and
 * one error line everywhere. */
typedef enum {
  CLI_RUN_THREADS,    /* -t, --threads: 1 to 1024 */
  CLI_RUN_CTX,        /* -c, --ctx-size: 1 to 2^24 tokens */
  CLI_RUN_GPU_LAYERS, /* -ngl, --gpu-layers: 0 to 2^20, or auto (HN_GPU_LAYERS_AUTO) */
  CLI_RUN_GPU_DEVICE, /* --gpu-device: 0 to 1023, a number of info --devices */
} CliRunOption;

/* Parses the value of @which into *out; false after printing the error line. */
bool cli_parse_run_option(CliRunOption which, const char *value, long long *out);
/* -ngl's value: a layer count, or "auto" (HN_GPU_LAYERS_AUTO: as many as fit the device). */
bool cli_parse_gpu_layers(const char *value, long long *out);
/* --gpu-device's value: a device number as info --devices lists them (which exist is
 * checked by cli_check_gpu_device once the options are read). */
bool cli_parse_gpu_device(const char *value, long long *out);
/* True for device < 0 (none named: the best one) and for a device that exists; else false
 * after printing the error line, so that a run never silently uses another device. */
bool cli_check_gpu_device(long long device);

/* ---- options of the subcommands that take a value --------------------------------------- */

typedef struct CliSamplingOptions CliSamplingOptions; /* cli-sampling.h */

typedef struct {
  const char *short_name; /* "-m", or NULL */
  const char *long_name;  /* "--model" */
  int id;                 /* >= 0 */
} CliValueOption;

enum {
  CLI_OPTION_ERROR = -1,    /* the error line was printed */
  CLI_OPTION_SAMPLING = -2, /* a sampling option, consumed into the sampling options */
};

/* Reads the option at argv[*i]: one of `options` (its id, with *value the next argument and
 * *i moved onto it), a sampling option (CLI_OPTION_SAMPLING, *i left on its last argument),
 * or neither (CLI_OPTION_ERROR after "unknown option … (try 'hanashi-cli COMMAND --help')").
 * Flags without a value are the caller's to look at first. */
int cli_next_option(int argc, char **argv, int *i, const CliValueOption *options, size_t n_options,
                    CliSamplingOptions *sampling, const char *command, const char **value);

/* ---- a model opened for chat and generate ------------------------------------------------- */

typedef struct {
  HnModel *model;
  HnVocab *vocab;
  HnGrammar *grammar;       /* from --grammar-file / --json-schema, or NULL */
  HnChatModel *chat_model;
  HnChat *chat;
  size_t gpu_notice_shown; /* how much of the context's device notice was printed */
} CliChatModel;

/* Loads the model and its vocabulary (printing the vocabulary's notice, if any).  False
 * after printing the error line. */
bool cli_chat_model_load(CliChatModel *cm, const char *path);
/* Finishes the sampling options against the vocabulary (max_new_tokens = n_predict), loads
 * the grammar, prints the parameters when print_params, and makes the conversation core with
 * a context of n_ctx tokens (0: the model's) on `threads` threads (0: the physical cores),
 * its last gpu_layers layers on the Vulkan device number gpu_device (0: none; device < 0:
 * the best one), printing the context's notice, if any.  False after printing the error
 * line. */
bool cli_chat_model_start(CliChatModel *cm, CliSamplingOptions *sampling, long long n_predict, long long n_ctx,
                          long long threads, long long gpu_layers, long long gpu_device, bool print_params);
void cli_chat_model_clear(CliChatModel *cm);
/* Prints what the context's device notice says that was not printed yet: the device failed
 * during a decode and the CPU runs its layers from now on. */
void cli_chat_model_notice_device(CliChatModel *cm);

/* Subcommand entry points: argv[0] is the subcommand name. */
typedef int (*CliCommandFunc)(int argc, char **argv);
