/* hanashi-cli — drives the engine without a GUI.  Each subcommand lives in its own
 * cli-<name>.c; their names, options and output formats are stable contracts used by
 * tests and benchmarks.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"

#include <string.h>

typedef struct {
  const char *name;
  CliCommandFunc run;
  const char *summary;
} CliCommand;

int cli_pull(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_make_model(int argc, char **argv);
int cli_chat_template(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_serve(int argc, char **argv);

static const CliCommand commands[] = {
#ifndef HN_CLI_NO_PULL /* a cross build without libsoup (engine/download/meson.build) */
  { "pull", cli_pull, "download a model file, resuming a previous attempt" },
#endif
  { "make-model", cli_make_model, "write a random-weight model of a realistic shape (benchmarks)" },
  { "quantize", cli_quantize, "convert a model to another weight type or mix (Q4_K_M, ...)" },
  { "chat-template", cli_chat_template, "render a chat template for a conversation (prints the prompt)" },
  { "info", cli_info, "show a model's architecture, size, weight types and context length (--devices: the Vulkan devices)" },
  { "generate", cli_generate, "generate text from a prompt (greedy unless sampling options are given)" },
  { "chat", cli_chat, "chat with a model: user turns in, replies out, through the app's conversation core" },
  { "logits", cli_logits, "evaluate token ids in one batch and write every position's logits" },
  { "bench", cli_bench, "measure prompt processing and generation speed (tokens per second)" },
#ifndef HN_CLI_NO_SERVE /* needs GIO and libsoup, like pull */
  { "serve", cli_serve, "serve a model over an OpenAI-compatible HTTP API (loopback by default)" },
#endif
  { "tokenize", cli_tokenize, "print the token ids of a text as a JSON array" },
  { "detokenize", cli_detokenize, "print the text of a list of token ids" },
  { NULL, NULL, NULL },
};

static void
print_usage(FILE *out)
{
  fprintf(out, "Usage: hanashi-cli COMMAND [OPTIONS]\n\nCommands:\n");
  for (size_t i = 0; commands[i].name != NULL; i++)
    fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].summary);
}

int
main(int argc, char **argv)
{
  if (argc < 2) {
    print_usage(stderr);
    return 1;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    print_usage(stdout);
    return 0;
  }
  for (size_t i = 0; commands[i].name != NULL; i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  return cli_fail("unknown command '%s' (try 'hanashi-cli --help')", argv[1]);
}
