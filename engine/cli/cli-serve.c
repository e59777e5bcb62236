/* hanashi-cli serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N]
 *   [-c CTX] [-t THREADS] [--model-id NAME] [--max-tokens N] [--max-body BYTES]
 *   [--max-connections N] [--max-queue N]
 *
 * An OpenAI-compatible HTTP server for one model (HanashiServer, engine/glib/hanashi-server.h;
 * the endpoints, fields and limits are in docs/server.md).  Loopback only unless --host says
 * otherwise.  When it listens it prints one line on stderr, a contract that scripts and
 * tests read (the port is the one bound, also with --port 0):
 *
 *   serve: listening on http://HOST:PORT
 *
 * It runs until SIGINT or SIGTERM, then cancels what is in flight and exits with status 0.
 * The key may also come from the environment (HANASHI_API_KEY), which keeps it out of the
 * process list.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib-unix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "hanashi-server.h"
#include "hn-model.h"
#include "hn-vocab.h"

int cli_serve(int argc, char **argv);

enum {
  OPT_MODEL, OPT_HOST, OPT_PORT, OPT_KEY, OPT_PARALLEL, OPT_CTX, OPT_THREADS, OPT_MODEL_ID, OPT_MAX_TOKENS,
  OPT_MAX_BODY, OPT_MAX_CONNECTIONS, OPT_MAX_QUEUE,
};
static const struct {
  const char *short_name, *long_name;
  int id;
} value_options[] = {
  { "-m", "--model", OPT_MODEL },
  { NULL, "--host", OPT_HOST },
  { NULL, "--port", OPT_PORT },
  { NULL, "--api-key", OPT_KEY },
  { "-np", "--parallel", OPT_PARALLEL },
  { "-c", "--ctx-size", OPT_CTX },
  { "-t", "--threads", OPT_THREADS },
  { NULL, "--model-id", OPT_MODEL_ID },
  { NULL, "--max-tokens", OPT_MAX_TOKENS },
  { NULL, "--max-body", OPT_MAX_BODY },
  { NULL, "--max-connections", OPT_MAX_CONNECTIONS },
  { NULL, "--max-queue", OPT_MAX_QUEUE },
};

static void
usage(FILE *out)
{
  fprintf(out,
          "usage: hanashi-cli serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N]\n"
          "                         [-c CTX] [-t THREADS] [options]\n"
          "  an OpenAI-compatible server: GET /health, GET /v1/models, POST /v1/chat/completions,\n"
          "  POST /v1/completions (see docs/server.md)\n"
          "  --host ADDRESS        the address to listen on (default 127.0.0.1: this machine only)\n"
          "  --port N              the port (default 8080; 0 = any free port)\n"
          "  --api-key KEY         ask clients for \"Authorization: Bearer KEY\" (or set HANASHI_API_KEY)\n"
          "  -np, --parallel N     requests generated at once, decoded together in one batch (default 1, at most %d)\n"
          "  -c, --ctx-size N      context size of each of them in tokens (default: the model's)\n"
          "  -t, --threads N       threads working on each forward pass (default: the physical cores)\n"
          "  --model-id NAME       the model's name in /v1/models and in replies (default: the file's name)\n"
          "  --max-tokens N        the most tokens one reply may have, and the default (default %d)\n"
          "  --max-body BYTES      the largest request body; larger ones get 413 (default %u)\n"
          "  --max-connections N   open connections; more are answered 503 (default %d)\n"
          "  --max-queue N         requests waiting for a free slot; more are answered 503 (default %d)\n",
          HANASHI_SERVER_MAX_PARALLEL, HANASHI_SERVER_DEFAULT_MAX_TOKENS, HANASHI_SERVER_DEFAULT_MAX_BODY,
          HANASHI_SERVER_DEFAULT_MAX_CONNECTIONS, HANASHI_SERVER_DEFAULT_MAX_QUEUE);
}

static gboolean
on_signal(gpointer data)
{
  g_main_loop_quit(data);
  return G_SOURCE_CONTINUE;
}

int
cli_serve(int argc, char **argv)
{
  const char *model_path = NULL, *host = "127.0.0.1", *model_id = NULL;
  const char *api_key = getenv("HANASHI_API_KEY");
  long long port = 8080, value = 0;
  HanashiServerOptions options;
  hanashi_server_options_init(&options);
  int status = 1;
  HnModel *model = NULL;
  HnVocab *vocab = NULL;
  HanashiServer *server = NULL;
  GMainLoop *loop = NULL;
  char *basename = NULL;
  HnError err = { 0 };
  GError *error = NULL;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    }
    int found = -1;
    for (size_t k = 0; k < HN_ARRAY_LEN(value_options); k++)
      if ((value_options[k].short_name && strcmp(argv[i], value_options[k].short_name) == 0) ||
          strcmp(argv[i], value_options[k].long_name) == 0)
        found = value_options[k].id;
    if (found < 0)
      return cli_fail("unknown option '%s' (try 'hanashi-cli serve --help')", argv[i]);
    if (i + 1 >= argc)
      return cli_fail("option '%s' needs a value", argv[i]);
    const char *val = argv[++i];
    switch (found) {
    case OPT_MODEL: model_path = val; break;
    case OPT_HOST: host = val; break;
    case OPT_KEY: api_key = val; break;
    case OPT_MODEL_ID: model_id = val; break;
    case OPT_PORT:
      if (!cli_parse_int(val, 0, 65535, &port))
        return cli_fail("invalid port '%s' (0 to 65535)", val);
      break;
    case OPT_PARALLEL:
      if (!cli_parse_int(val, 1, HANASHI_SERVER_MAX_PARALLEL, &value))
        return cli_fail("invalid --parallel '%s' (1 to %d)", val, HANASHI_SERVER_MAX_PARALLEL);
      options.n_parallel = (guint) value;
      break;
    case OPT_CTX:
      if (!cli_parse_run_option(CLI_RUN_CTX, val, &value))
        return 1;
      options.n_ctx = (int) value;
      break;
    case OPT_THREADS:
      if (!cli_parse_run_option(CLI_RUN_THREADS, val, &value))
        return 1;
      options.n_threads = (int) value;
      break;
    case OPT_MAX_TOKENS:
      if (!cli_parse_int(val, 1, 1 << 24, &value))
        return cli_fail("invalid --max-tokens '%s'", val);
      options.max_tokens = (int) value;
      break;
    case OPT_MAX_BODY:
      if (!cli_parse_int(val, 1024, (long long) 1 << 32, &value))
        return cli_fail("invalid --max-body '%s' (1024 bytes to 4 GiB)", val);
      options.max_body_bytes = (gsize) value;
      break;
    case OPT_MAX_CONNECTIONS:
      if (!cli_parse_int(val, 1, 65536, &value))
        return cli_fail("invalid --max-connections '%s'", val);
      options.max_connections = (guint) value;
      break;
    case OPT_MAX_QUEUE:
      if (!cli_parse_int(val, 0, 65536, &value))
        return cli_fail("invalid --max-queue '%s'", val);
      options.max_queue = (guint) value;
      break;
    default: break;
    }
  }
  if (!model_path)
    return cli_fail("usage: hanashi-cli serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N]");

  if (!(model = hn_model_load(model_path, NULL, &err)) || !(vocab = hn_vocab_load(hn_model_gguf(model), &err))) {
    cli_fail_error(&err);
    goto out;
  }
  cli_notice(hn_vocab_notice(vocab));
  if (!model_id) {
    basename = g_path_get_basename(model_path);
    char *dot = strrchr(basename, '.');
    if (dot && dot != basename && g_ascii_strcasecmp(dot, ".gguf") == 0)
      *dot = '\0';
    model_id = basename;
  }
  options.model_id = model_id;
  options.api_key = api_key;

  if (!(server = hanashi_server_new(model, vocab, &options, &error))) {
    cli_fail("%s", error->message);
    goto out;
  }
  guint bound = hanashi_server_listen(server, host, (guint) port, &error);
  if (bound == 0) {
    cli_fail("cannot listen on %s port %lld: %s", host, port, error->message);
    goto out;
  }
  gboolean ipv6 = strchr(host, ':') != NULL;
  fprintf(stderr, "serve: listening on http://%s%s%s:%u\n", ipv6 ? "[" : "", host, ipv6 ? "]" : "", bound);
  if (!api_key || !*api_key) {
    if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "::1") != 0 && strcmp(host, "localhost") != 0)
      cli_notice("this server is reachable from the network without a key (--api-key)");
  }
  fflush(stderr);

  loop = g_main_loop_new(NULL, FALSE);
  guint sigint = g_unix_signal_add(SIGINT, on_signal, loop);
  guint sigterm = g_unix_signal_add(SIGTERM, on_signal, loop);
  g_main_loop_run(loop);
  g_source_remove(sigint);
  g_source_remove(sigterm);
  hanashi_server_stop(server);
  status = 0;
out:
  g_clear_error(&error);
  g_clear_object(&server);
  g_clear_pointer(&loop, g_main_loop_unref);
  g_free(basename);
  hn_vocab_free(vocab);
  hn_model_free(model);
  return status;
}
