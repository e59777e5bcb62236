/* Tests for model downloads against a small HTTP server on 127.0.0.1 that serves a test
 * model with Range support, an interrupted connection, a 404, a wrong file, a slow body
 * and redirects.  No test touches the internet.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-download.h"
#include "hn-context.h"
#include "hn-gguf.h"
#include "hn-model.h"
#include "hanashi-test-seams.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define MODEL_NAME "stories260K-f32.gguf"

typedef struct {
  GSocketService *service;
  guint16 port;
  GBytes *model;
  gint flaky_requests;
  gint range_requests;
  gint requests;
} Server;

static Server server;

static void
write_all (GOutputStream *out, const void *data, gsize len)
{
  g_output_stream_write_all (out, data, len, NULL, NULL, NULL);
}

static void
respond_headers (GOutputStream *out, const char *status, gsize length, const char *extra)
{
  g_autofree char *head = g_strdup_printf ("HTTP/1.1 %s\r\nContent-Length: %" G_GSIZE_FORMAT
                                           "\r\nConnection: close\r\n%s\r\n",
                                           status, length, extra ? extra : "");
  write_all (out, head, strlen (head));
}

/* Serves `body` honouring "Range: bytes=N-"; `slow` trickles it out; `cut_at` > 0 closes
 * the connection after that many bytes while promising the full length. */
static void
serve_body (GOutputStream *out, GBytes *body, goffset range_start, gboolean slow, gsize cut_at)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (body, &size);
  if (range_start > 0) {
    g_atomic_int_inc (&server.range_requests);
    if ((gsize) range_start >= size) {
      g_autofree char *extra = g_strdup_printf ("Content-Range: bytes */%" G_GSIZE_FORMAT "\r\n", size);
      respond_headers (out, "416 Range Not Satisfiable", 0, extra);
      return;
    }
    g_autofree char *extra = g_strdup_printf ("Content-Range: bytes %" G_GOFFSET_FORMAT "-%" G_GSIZE_FORMAT
                                              "/%" G_GSIZE_FORMAT "\r\n",
                                              range_start, size - 1, size);
    respond_headers (out, "206 Partial Content", size - range_start, extra);
  } else {
    respond_headers (out, "200 OK", size, "Content-Type: application/octet-stream\r\n");
  }
  gsize pos = (gsize) range_start;
  gsize end = cut_at > 0 ? cut_at : size;
  while (pos < end) {
    gsize n = MIN (slow ? 4096 : 65536, end - pos);
    GError *error = NULL;
    if (!g_output_stream_write_all (out, data + pos, n, NULL, NULL, &error)) {
      g_clear_error (&error);
      return; /* the client went away (cancel or pause) */
    }
    pos += n;
    if (slow)
      g_usleep (2000);
  }
}

static gboolean
handle_connection (GThreadedSocketService *service, GSocketConnection *connection,
                   GObject *source, gpointer user_data)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  g_autoptr (GDataInputStream) lines = g_data_input_stream_new (in);
  g_data_input_stream_set_newline_type (lines, G_DATA_STREAM_NEWLINE_TYPE_CR_LF);

  g_autofree char *request = g_data_input_stream_read_line (lines, NULL, NULL, NULL);
  if (request == NULL)
    return TRUE;
  goffset range_start = 0;
  for (;;) {
    g_autofree char *line = g_data_input_stream_read_line (lines, NULL, NULL, NULL);
    if (line == NULL || *line == '\0')
      break;
    if (g_ascii_strncasecmp (line, "Range: bytes=", 13) == 0)
      range_start = g_ascii_strtoll (line + 13, NULL, 10);
  }
  g_auto (GStrv) words = g_strsplit (request, " ", 3);
  const char *path = words[1] ? words[1] : "/";
  g_atomic_int_inc (&server.requests);

  if (g_str_equal (path, "/model.gguf")) {
    serve_body (out, server.model, range_start, FALSE, 0);
  } else if (g_str_equal (path, "/slow.gguf")) {
    serve_body (out, server.model, range_start, TRUE, 0);
  } else if (g_str_equal (path, "/flaky.gguf")) {
    /* The first request is cut in the middle; later ones (resumes) are served. */
    gboolean first = g_atomic_int_add (&server.flaky_requests, 1) == 0;
    serve_body (out, server.model, range_start, FALSE, first ? g_bytes_get_size (server.model) / 2 : 0);
  } else if (g_str_equal (path, "/redirect-here.gguf")) {
    respond_headers (out, "302 Found", 0, "Location: /model.gguf\r\n");
  } else if (g_str_equal (path, "/redirect-https.gguf")) {
    /* Nothing listens on port 1: following it ends in a refused connection. */
    respond_headers (out, "301 Moved Permanently", 0, "Location: https://127.0.0.1:1/model.gguf\r\n");
  } else if (g_str_equal (path, "/redirect-away.gguf")) {
    /* To plain http on another computer: must be refused before it is contacted. */
    respond_headers (out, "302 Found", 0, "Location: http://downloads.example.com/model.gguf\r\n");
  } else if (g_str_equal (path, "/wrong.gguf")) {
    g_autoptr (GBytes) html = g_bytes_new_static ("<html><body>Sign in to continue</body></html>", 45);
    serve_body (out, html, range_start, FALSE, 0);
  } else {
    const char *body = "not found";
    respond_headers (out, "404 Not Found", strlen (body), NULL);
    write_all (out, body, strlen (body));
  }
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
  return TRUE;
}

/* The service accepts connections through its thread's main context; giving it a thread
 * of its own keeps it serving while the test blocks (e.g. waiting for hanashi-cli). */
static GMutex server_lock;
static GCond server_ready;
static GMainLoop *server_loop;

static void start_service (void);

static gpointer
server_thread (gpointer data)
{
  g_autoptr (GMainContext) context = g_main_context_new ();
  g_main_context_push_thread_default (context);
  start_service ();
  g_mutex_lock (&server_lock);
  server_loop = g_main_loop_new (context, FALSE);
  g_cond_signal (&server_ready);
  g_mutex_unlock (&server_lock);
  g_main_loop_run (server_loop);
  if (server.service != NULL) {
    g_socket_service_stop (server.service);
    g_socket_listener_close (G_SOCKET_LISTENER (server.service));
    g_clear_object (&server.service);
  }
  g_main_context_pop_thread_default (context);
  return NULL;
}

static GThread *
start_server (void)
{
  g_mutex_lock (&server_lock);
  GThread *thread = g_thread_new ("http-server", server_thread, NULL);
  while (server_loop == NULL)
    g_cond_wait (&server_ready, &server_lock);
  g_mutex_unlock (&server_lock);
  return thread;
}

static void
start_service (void)
{
  const char *root = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *path = g_build_filename (root ? root : "", "models", MODEL_NAME, NULL);
  g_autoptr (GMappedFile) mapped = g_mapped_file_new (path, FALSE, NULL);
  if (mapped == NULL)
    return;
  server.model = g_mapped_file_get_bytes (mapped);

  server.service = g_threaded_socket_service_new (4);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) effective = NULL;
  g_autoptr (GError) error = NULL;
  g_socket_listener_add_address (G_SOCKET_LISTENER (server.service), address, G_SOCKET_TYPE_STREAM,
                                 G_SOCKET_PROTOCOL_TCP, NULL, &effective, &error);
  g_assert_no_error (error);
  server.port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective));
  g_signal_connect (server.service, "run", G_CALLBACK (handle_connection), NULL);
  g_socket_service_start (server.service);
}

static char *
url_for (const char *path)
{
  return g_strdup_printf ("http://127.0.0.1:%u%s", server.port, path);
}

typedef struct {
  char *dir;
  GFile *dest;
  char *dest_path;
  char *part_path;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("hanashi-download-XXXXXX", NULL);
  f->dest_path = g_build_filename (f->dir, "model.gguf", NULL);
  f->part_path = g_strconcat (f->dest_path, ".part", NULL);
  f->dest = g_file_new_for_path (f->dest_path);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_unlink (f->dest_path);
  g_unlink (f->part_path);
  g_rmdir (f->dir);
  g_free (f->dir);
  g_free (f->dest_path);
  g_free (f->part_path);
  g_object_unref (f->dest);
}

static void
on_finished (HanashiDownload *download, gpointer data)
{
  *(gboolean *) data = TRUE;
}

static HanashiDownloadState
run_download (HanashiDownload *download)
{
  gboolean finished = FALSE;
  gulong id = g_signal_connect (download, "finished", G_CALLBACK (on_finished), &finished);
  hanashi_download_start (download);
  while (!finished)
    g_main_context_iteration (NULL, TRUE);
  g_signal_handler_disconnect (download, id);
  return hanashi_download_get_state (download);
}

static void
assert_same_as_model (const char *path)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  g_assert_cmpuint (len, ==, g_bytes_get_size (server.model));
  g_assert_true (memcmp (contents, g_bytes_get_data (server.model, NULL), len) == 0);
  HnError err = { 0 };
  HnGguf *gguf = hn_gguf_open (path, &err);
  g_assert_nonnull (gguf);
  g_assert_nonnull (hn_gguf_find_tensor (gguf, "token_embd.weight"));
  hn_gguf_close (gguf);
}

/* Next-token logits after a short prompt, from the engine itself (one thread, so the
 * arithmetic order is fixed). */
static float *
prompt_logits (const char *path, int *n_vocab)
{
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  if (model == NULL)
    g_error ("%s: %s", path, err.message);
  HnContextParams params = hn_context_default_params ();
  params.n_ctx = 64;
  params.n_threads = 1;
  HnContext *ctx = hn_context_new (model, &params, &err);
  g_assert_nonnull (ctx);
  static const int32_t tokens[] = { 1, 72, 101, 300, 42 };
  static const int32_t pos[] = { 0, 1, 2, 3, 4 };
  HnBatch batch = { G_N_ELEMENTS (tokens), tokens, pos, NULL, NULL };
  g_assert_true (hn_context_decode (ctx, &batch, &err));
  *n_vocab = hn_model_n_vocab (model);
  float *logits = g_memdup2 (hn_context_get_logits (ctx, 0), sizeof (float) * (gsize) *n_vocab);
  hn_context_free (ctx);
  hn_model_free (model);
  return logits;
}

/* The downloaded file is not only the same bytes: the engine loads it and computes exactly
 * what it computes from the original test model. */
static void
assert_model_runs_like_source (const char *path)
{
  int n_downloaded = 0, n_source = 0;
  g_autofree float *downloaded = prompt_logits (path, &n_downloaded);
  g_autofree char *source_path = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", MODEL_NAME, NULL);
  g_autofree float *source = prompt_logits (source_path, &n_source);
  g_assert_cmpint (n_downloaded, ==, n_source);
  g_assert_cmpint (memcmp (downloaded, source, sizeof (float) * (gsize) n_source), ==, 0);
}

#define REQUIRE_SERVER()                                \
  if (server.model == NULL) {                           \
    g_test_skip ("test model not available");           \
    return;                                             \
  }

static void
test_download_complete (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_null (hanashi_download_get_error (download));
  g_assert_cmpuint (hanashi_download_get_received (download), ==, g_bytes_get_size (server.model));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
  assert_same_as_model (f->dest_path);
  assert_model_runs_like_source (f->dest_path);
}

static void
test_resume_after_interruption (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/flaky.gguf");
  g_atomic_int_set (&server.flaky_requests, 0);
  int ranges_before = g_atomic_int_get (&server.range_requests);

  g_autoptr (HanashiDownload) first = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (first), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (first), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INTERRUPTED);
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  GStatBuf st;
  g_assert_cmpint (g_stat (f->part_path, &st), ==, 0);
  g_assert_cmpuint ((gsize) st.st_size, ==, g_bytes_get_size (server.model) / 2);

  /* A new object, as after an app restart: it finds the .part file and resumes; its
   * checksum covers the half on disk and the half that arrives. */
  g_autofree char *sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, server.model);
  g_autoptr (HanashiDownload) second = hanashi_download_new (url, f->dest, sha);
  hanashi_download_set_expected_size (second, g_bytes_get_size (server.model));
  g_assert_cmpint (run_download (second), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_cmpint (g_atomic_int_get (&server.range_requests), ==, ranges_before + 1);
  assert_same_as_model (f->dest_path);
  assert_model_runs_like_source (f->dest_path);
}

static void
test_not_found (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/missing.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (download), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (hanashi_download_get_error (download)->message, "404"));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
}

static void
test_wrong_file_rejected (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/wrong.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (download), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_NOT_GGUF);
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
}

static void
test_checksum_mismatch_rejected (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  const char *wrong = "0000000000000000000000000000000000000000000000000000000000000000";
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, wrong);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (download), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM);
  g_assert_nonnull (strstr (hanashi_download_get_error (download)->message, wrong));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));

  g_autofree char *right = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, server.model);
  g_autoptr (HanashiDownload) again = hanashi_download_new (url, f->dest, right);
  g_assert_cmpint (run_download (again), ==, HANASHI_DOWNLOAD_STATE_DONE);
  assert_same_as_model (f->dest_path);
}

static void
cancel_when_started (GObject *object, GParamSpec *pspec, gpointer data)
{
  HanashiDownload *download = HANASHI_DOWNLOAD (object);
  if (hanashi_download_get_received (download) > 0) {
    if (GPOINTER_TO_INT (data))
      hanashi_download_cancel (download);
    else
      hanashi_download_pause (download);
  }
}


static void
write_part (Fixture *f, gsize length, gboolean damage)
{
  g_autofree guint8 *head = g_memdup2 (g_bytes_get_data (server.model, NULL), length);
  if (damage)
    head[length / 2] ^= 0x5a; /* one flipped byte in the middle of what is on disk */
  g_assert_true (g_file_set_contents (f->part_path, (const char *) head, (gssize) length, NULL));
}

/* A resumed download hashes the bytes already on disk: an intact first half plus the
 * served rest matches the checksum; a damaged first half does not, although every byte
 * that came over the network was right. */
static void
test_resume_hashes_bytes_on_disk (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  g_autofree char *sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, server.model);
  gsize half = g_bytes_get_size (server.model) / 2;

  write_part (f, half, FALSE);
  int ranges_before = g_atomic_int_get (&server.range_requests);
  g_autoptr (HanashiDownload) intact = hanashi_download_new (url, f->dest, sha);
  g_assert_cmpint (run_download (intact), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_cmpint (g_atomic_int_get (&server.range_requests), ==, ranges_before + 1);
  assert_same_as_model (f->dest_path);
  g_assert_cmpint (g_unlink (f->dest_path), ==, 0);

  write_part (f, half, TRUE);
  g_autoptr (HanashiDownload) damaged = hanashi_download_new (url, f->dest, sha);
  g_assert_cmpint (run_download (damaged), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_cmpint (g_atomic_int_get (&server.range_requests), ==, ranges_before + 2);
  const GError *error = hanashi_download_get_error (damaged);
  g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM);
  g_assert_nonnull (strstr (error->message, "SHA-256"));
  g_assert_nonnull (strstr (error->message, sha));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
}

/* An upper-case checksum is the same checksum; a malformed one fails before any request. */
static void
test_checksum_forms (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  g_autofree char *sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, server.model);
  g_autofree char *upper = g_ascii_strup (sha, -1);
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, upper);
  g_assert_cmpstr (hanashi_download_get_sha256 (download), ==, sha);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_cmpint (g_unlink (f->dest_path), ==, 0);

  g_assert_true (hanashi_download_sha256_is_valid (sha));
  g_assert_false (hanashi_download_sha256_is_valid ("abc"));
  g_assert_false (hanashi_download_sha256_is_valid (NULL));
  g_autofree char *not_hex = g_strdup (sha);
  not_hex[10] = 'g';
  g_assert_false (hanashi_download_sha256_is_valid (not_hex));

  int requests = g_atomic_int_get (&server.requests);
  g_autoptr (HanashiDownload) bad = hanashi_download_new (url, f->dest, not_hex);
  g_assert_cmpint (run_download (bad), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (bad), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM);
  g_assert_cmpint (g_atomic_int_get (&server.requests), ==, requests);
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
}

/* The expected size: a server offering another size is refused before the body is
 * written, and a stale .part longer than the file is discarded. */
static void
test_size_mismatch (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  guint64 size = g_bytes_get_size (server.model);
  const guint64 wrong_sizes[] = { size - 1, size + 1, size * 2 };
  for (guint i = 0; i < G_N_ELEMENTS (wrong_sizes); i++) {
    g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
    hanashi_download_set_expected_size (download, wrong_sizes[i]);
    g_assert_cmpuint (hanashi_download_get_expected_size (download), ==, wrong_sizes[i]);
    g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
    const GError *error = hanashi_download_get_error (download);
    g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_SIZE);
    g_autofree char *expected_text = g_format_size_full (wrong_sizes[i], G_FORMAT_SIZE_LONG_FORMAT);
    g_assert_nonnull (strstr (error->message, expected_text));
    g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
    g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
  }

  /* A .part longer than the file cannot be part of it: it is replaced, not resumed. */
  g_autofree char *junk = g_strnfill ((gsize) size + 10, 'x');
  g_assert_true (g_file_set_contents (f->part_path, junk, (gssize) size + 10, NULL));
  int ranges_before = g_atomic_int_get (&server.range_requests);
  g_autoptr (HanashiDownload) right = hanashi_download_new (url, f->dest, NULL);
  hanashi_download_set_expected_size (right, size);
  g_assert_cmpint (run_download (right), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_cmpint (g_atomic_int_get (&server.range_requests), ==, ranges_before);
  assert_same_as_model (f->dest_path);
}

/* https only: plain http is refused unless it is this computer, before anything is sent. */
static void
test_insecure_refused (Fixture *f, gconstpointer data)
{
  const char *allowed[] = {
    "https://huggingface.co/a/b/resolve/main/m.gguf", "HTTPS://example.org/m.gguf",
    "http://127.0.0.1:8080/m.gguf", "http://127.1.2.3/m.gguf", "http://[::1]:9/m.gguf",
    "http://localhost/m.gguf", "http://LOCALHOST:1/m.gguf",
  };
  const char *refused[] = {
    "http://huggingface.co/a/b/resolve/main/m.gguf", "http://192.168.1.20/m.gguf",
    "http://localhost.example.com/m.gguf", "http://10.0.0.1/m.gguf", "http://[2001:db8::1]/m.gguf",
  };
  for (guint i = 0; i < G_N_ELEMENTS (allowed); i++) {
    g_autoptr (GError) error = NULL;
    g_assert_true (hanashi_download_uri_is_allowed (allowed[i], &error));
    g_assert_no_error (error);
  }
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    g_autoptr (GError) error = NULL;
    g_assert_false (hanashi_download_uri_is_allowed (refused[i], &error));
    g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE);
    g_assert_nonnull (strstr (error->message, "https"));
  }
  g_autoptr (GError) ftp_error = NULL;
  g_assert_false (hanashi_download_uri_is_allowed ("ftp://127.0.0.1/m.gguf", &ftp_error));
  g_assert_error (ftp_error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI);

  /* The download itself refuses too (a name that cannot even be resolved: the error
   * is the refusal, not a failed connection). */
  g_autoptr (HanashiDownload) download = hanashi_download_new ("http://downloads.invalid/m.gguf", f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (download), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE);
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));

  g_autoptr (GError) resolve_error = NULL;
  g_assert_null (hanashi_download_resolve_uri ("http://huggingface.co/a/b/blob/main/m.gguf", NULL, &resolve_error));
  g_assert_error (resolve_error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE);
}

/* Redirects are followed hop by hop and only to https: one to plain http stops the
 * download without contacting that address, even on this computer. */
static void
test_redirects (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  struct {
    const char *path;
    const char *target;
  } refused[] = {
    { "/redirect-away.gguf", "http://downloads.example.com/model.gguf" },
    { "/redirect-here.gguf", "/model.gguf" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    g_autofree char *url = url_for (refused[i].path);
    int requests = g_atomic_int_get (&server.requests);
    g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
    g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
    const GError *error = hanashi_download_get_error (download);
    g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE);
    g_assert_nonnull (strstr (error->message, refused[i].target));
    g_assert_cmpint (g_atomic_int_get (&server.requests), ==, requests + 1); /* the target was not asked */
    g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
    g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
  }

  /* To https it is followed: here to a port where nothing listens. */
  g_autofree char *url = url_for ("/redirect-https.gguf");
  g_autoptr (HanashiDownload) followed = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (followed), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (followed), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_OFFLINE);
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
}

static void
test_cancel (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/slow.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  g_signal_connect (download, "notify::received", G_CALLBACK (cancel_when_started), GINT_TO_POINTER (TRUE));
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_CANCELLED);
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
}

static void
test_pause_and_resume (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/slow.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  gulong id = g_signal_connect (download, "notify::received", G_CALLBACK (cancel_when_started), GINT_TO_POINTER (FALSE));
  hanashi_download_start (download);
  while (hanashi_download_get_state (download) != HANASHI_DOWNLOAD_STATE_PAUSED)
    g_main_context_iteration (NULL, TRUE);
  g_signal_handler_disconnect (download, id);
  g_assert_true (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));

  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_DONE);
  assert_same_as_model (f->dest_path);
}

static void
test_offline (Fixture *f, gconstpointer data)
{
  /* Port 1 on loopback: nothing listens there, so the connection is refused. */
  g_autoptr (HanashiDownload) download = hanashi_download_new ("http://127.0.0.1:1/model.gguf", f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (download), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_OFFLINE);
}

static void
test_cli_pull (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  const char *cli = g_getenv ("HANASHI_CLI");
  g_assert_nonnull (cli);
  g_autofree char *url = url_for ("/model.gguf");
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                                                   cli, "pull", url, "-o", f->dest_path, NULL);
  g_assert_no_error (error);
  g_autofree char *err_text = NULL;
  g_assert_true (g_subprocess_communicate_utf8 (proc, NULL, NULL, NULL, &err_text, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
  assert_same_as_model (f->dest_path);

  g_autofree char *missing = url_for ("/missing.gguf");
  g_autofree char *other = g_build_filename (f->dir, "other.gguf", NULL);
  g_autoptr (GSubprocess) fail = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                                                   cli, "pull", missing, "-o", other, NULL);
  g_autofree char *fail_text = NULL;
  g_assert_true (g_subprocess_communicate_utf8 (fail, NULL, NULL, NULL, &fail_text, &error));
  g_assert_cmpint (g_subprocess_get_exit_status (fail), ==, 1);
  g_assert_true (g_str_has_prefix (fail_text, "hanashi-cli: error: "));
  g_assert_nonnull (strstr (fail_text, "404"));
}

static int
run_cli (char **stderr_text, ...)
{
  const char *cli = g_getenv ("HANASHI_CLI");
  g_assert_nonnull (cli);
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_ptr_array_add (args, (gpointer) cli);
  va_list ap;
  va_start (ap, stderr_text);
  for (const char *arg = va_arg (ap, const char *); arg != NULL; arg = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) proc = g_subprocess_newv ((const char *const *) args->pdata, G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_communicate_utf8 (proc, NULL, NULL, NULL, stderr_text, &error));
  g_assert_no_error (error);
  return g_subprocess_get_exit_status (proc);
}

/* pull --sha256 / --size: a wrong value fails with the sentence and keeps nothing; a
 * malformed one is refused before anything is fetched; the right ones download. */
static void
test_cli_pull_verified (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *url = url_for ("/model.gguf");
  g_autofree char *sha = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, server.model);
  g_autofree char *size = g_strdup_printf ("%" G_GSIZE_FORMAT, g_bytes_get_size (server.model));
  g_autofree char *wrong_size = g_strdup_printf ("%" G_GSIZE_FORMAT, g_bytes_get_size (server.model) + 4096);
  const char *wrong = "1111111111111111111111111111111111111111111111111111111111111111";

  g_autofree char *text = NULL;
  g_assert_cmpint (run_cli (&text, "pull", url, "-o", f->dest_path, "--sha256", wrong, NULL), ==, 1);
  g_assert_nonnull (strstr (text, "hanashi-cli: error: "));
  g_assert_nonnull (strstr (text, "SHA-256"));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (f->part_path, G_FILE_TEST_EXISTS));
  g_clear_pointer (&text, g_free);

  int requests = g_atomic_int_get (&server.requests);
  g_assert_cmpint (run_cli (&text, "pull", url, "-o", f->dest_path, "--sha256", "xyz", NULL), ==, 1);
  g_assert_nonnull (strstr (text, "--sha256"));
  g_clear_pointer (&text, g_free);
  g_assert_cmpint (run_cli (&text, "pull", url, "-o", f->dest_path, "--size", "12x", NULL), ==, 1);
  g_assert_nonnull (strstr (text, "--size"));
  g_clear_pointer (&text, g_free);
  g_assert_cmpint (g_atomic_int_get (&server.requests), ==, requests);

  g_assert_cmpint (run_cli (&text, "pull", url, "-o", f->dest_path, "--size", wrong_size, NULL), ==, 1);
  g_assert_nonnull (strstr (text, "expected"));
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));
  g_clear_pointer (&text, g_free);

  g_assert_cmpint (run_cli (&text, "pull", url, "-o", f->dest_path, "--sha256", sha, "--size", size, NULL), ==, 0);
  assert_same_as_model (f->dest_path);
  g_clear_pointer (&text, g_free);

  /* Plain http to another computer is refused. */
  g_autofree char *other = g_build_filename (f->dir, "other.gguf", NULL);
  g_assert_cmpint (run_cli (&text, "pull", "http://downloads.invalid/m.gguf", "-o", other, NULL), ==, 1);
  g_assert_nonnull (strstr (text, "https"));
  g_assert_false (g_file_test (other, G_FILE_TEST_EXISTS));
}

static void
test_resolve_uri (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *a = hanashi_download_resolve_uri ("Qwen/Qwen2.5-0.5B-Instruct-GGUF",
                                                     "qwen2.5-0.5b-instruct-q4_k_m.gguf", &error);
  g_assert_cmpstr (a, ==, "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/"
                          "qwen2.5-0.5b-instruct-q4_k_m.gguf");
  g_autofree char *b = hanashi_download_resolve_uri (
    "https://huggingface.co/owner/repo/blob/main/model.gguf", NULL, &error);
  g_assert_cmpstr (b, ==, "https://huggingface.co/owner/repo/resolve/main/model.gguf");
  g_autofree char *c = hanashi_download_resolve_uri ("owner/repo/sub dir/x.gguf", NULL, &error);
  g_assert_null (c);
  g_clear_error (&error);
  g_autofree char *d = hanashi_download_resolve_uri ("owner/repo", NULL, &error);
  g_assert_null (d);
  g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI);
  g_clear_error (&error);
  g_autofree char *e = hanashi_download_resolve_uri ("just-a-word", NULL, &error);
  g_assert_null (e);
  g_clear_error (&error);
  g_autofree char *f = hanashi_download_resolve_uri ("  owner/repo/dir/m.gguf ", NULL, &error);
  g_assert_cmpstr (f, ==, "https://huggingface.co/owner/repo/resolve/main/dir/m.gguf");

  /* A pinned revision goes into the path instead of "main". */
  const char *commit = "23749fefcc72300e3a2ad315e1317431b06b590a";
  g_autofree char *g = hanashi_download_resolve_uri_at ("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", commit, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g, ==, "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/"
                          "23749fefcc72300e3a2ad315e1317431b06b590a/Qwen3-0.6B-Q8_0.gguf");
  g_autofree char *h = hanashi_download_resolve_uri_at ("owner/repo", "m.gguf", "a/../b", &error);
  g_assert_null (h);
  g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI);
  g_clear_error (&error);
  g_autofree char *i = hanashi_download_resolve_uri ("owner/repo/../m.gguf", NULL, &error);
  g_assert_null (i);
  g_clear_error (&error);

  /* A mirror stands in for the hub; an insecure one is refused. */
  hanashi_test_set_hub_url ("https://mirror.example.org/hf/");
  g_autofree char *j = hanashi_download_resolve_uri_at ("o/r", "m.gguf", commit, &error);
  g_assert_cmpstr (j, ==, "https://mirror.example.org/hf/o/r/resolve/23749fefcc72300e3a2ad315e1317431b06b590a/m.gguf");
  hanashi_test_set_hub_url ("http://mirror.example.org");
  g_autofree char *k = hanashi_download_resolve_uri_at ("o/r", "m.gguf", commit, &error);
  g_assert_null (k);
  g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE);
  g_clear_error (&error);
  hanashi_test_set_hub_url (NULL);
}

/* A symbolic link planted at the .part name is never written through: the file it points
 * at keeps its bytes, and the download says why it stopped. */
static void
test_planted_part_link (Fixture *f, gconstpointer data)
{
  REQUIRE_SERVER ();
  g_autofree char *victim = g_strconcat (f->dest_path, ".victim", NULL);
  g_assert_true (g_file_set_contents (victim, "keep me", -1, NULL));
  g_assert_cmpint (symlink (victim, f->part_path), ==, 0);

  g_autofree char *url = url_for ("/model.gguf");
  g_autoptr (HanashiDownload) download = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (download), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  const GError *error = hanashi_download_get_error (download);
  g_assert_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "symbolic link"));
  g_autofree char *kept = NULL;
  g_assert_true (g_file_get_contents (victim, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "keep me");
  g_assert_false (g_file_test (f->dest_path, G_FILE_TEST_EXISTS));

  /* Once the link is gone the same download works. */
  g_assert_cmpint (g_unlink (f->part_path), ==, 0);
  g_autoptr (HanashiDownload) again = hanashi_download_new (url, f->dest, NULL);
  g_assert_cmpint (run_download (again), ==, HANASHI_DOWNLOAD_STATE_DONE);
  assert_same_as_model (f->dest_path);
  g_unlink (victim);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  GThread *thread = start_server ();
  g_test_add_func ("/download/resolve-uri", test_resolve_uri);
#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("/download/complete", test_download_complete);
  ADD ("/download/resume-after-interruption", test_resume_after_interruption);
  ADD ("/download/not-found", test_not_found);
  ADD ("/download/wrong-file-rejected", test_wrong_file_rejected);
  ADD ("/download/checksum", test_checksum_mismatch_rejected);
  ADD ("/download/cancel", test_cancel);
  ADD ("/download/pause-and-resume", test_pause_and_resume);
  ADD ("/download/offline", test_offline);
  ADD ("/download/cli-pull", test_cli_pull);
  ADD ("/download/resume-hashes-bytes-on-disk", test_resume_hashes_bytes_on_disk);
  ADD ("/download/checksum-forms", test_checksum_forms);
  ADD ("/download/size-mismatch", test_size_mismatch);
  ADD ("/download/insecure-refused", test_insecure_refused);
  ADD ("/download/redirects", test_redirects);
  ADD ("/download/cli-pull-verified", test_cli_pull_verified);
  ADD ("/download/planted-part-link", test_planted_part_link);
  int status = g_test_run ();
  g_main_loop_quit (server_loop);
  g_thread_join (thread);
  g_main_loop_unref (server_loop);
  g_clear_pointer (&server.model, g_bytes_unref);
  return status;
}
