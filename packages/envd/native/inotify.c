/*
 * inotify: the kernel's directory events with their masks (see src/filesystem/watch.ts for why:
 * Node's fs.watch folds IN_ATTRIB and IN_MODIFY into one 'change', and E2B's envd reports each
 * inotify event as its own type).
 *
 * open(callback) makes a non-blocking inotify instance polled on the main libuv loop (unref'd: a
 * watch alone does not keep the process alive); each time it is readable, everything queued is
 * read and handed to callback(events) as [{ wd, mask, cookie, name }], or callback(null, errno)
 * when the read fails. add(handle, path, mask) returns the watch descriptor, remove(handle, wd)
 * drops one (a wd the kernel dropped already is not an error), close(handle) ends the instance.
 * Everything runs on the loop's thread. An instance lives until close(): the handle has no
 * finalizer, because one running at exit would touch a loop that is gone (src/filesystem/inotify.ts
 * keeps one instance per process and closes it when its last watch goes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <node_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <uv.h>

typedef struct {
  int fd;
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int closed; /* close() was called: no more callbacks */
} instance_t;

/* Enough for many events per read; one event is at most sizeof(struct inotify_event) + NAME_MAX + 1. */
#define READ_BUFFER (64 * 1024)

/* The callback's reference goes here, not in shut(): shut() may run inside that very callback. */
static void on_poll_closed(uv_handle_t *h) {
  instance_t *in = h->data;
  close(in->fd);
  napi_delete_reference(in->env, in->callback);
  napi_async_destroy(in->env, in->context);
  free(in);
}

static void shut(instance_t *in) {
  if (in->closed) return;
  in->closed = 1;
  uv_poll_stop(&in->poll);
  uv_close((uv_handle_t *)&in->poll, on_poll_closed);
}

static void call_back(instance_t *in, size_t argc, napi_value *argv) {
  napi_env env = in->env;
  napi_value fn, recv;
  if (napi_get_reference_value(env, in->callback, &fn) != napi_ok || fn == NULL) return;
  napi_get_global(env, &recv);
  napi_status s = napi_make_callback(env, in->context, recv, fn, argc, argv, NULL);
  if (s == napi_pending_exception) {
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
}

static napi_value event_object(napi_env env, const struct inotify_event *ev) {
  napi_value obj, v;
  napi_create_object(env, &obj);
  napi_create_int32(env, ev->wd, &v);
  napi_set_named_property(env, obj, "wd", v);
  napi_create_uint32(env, ev->mask, &v);
  napi_set_named_property(env, obj, "mask", v);
  napi_create_uint32(env, ev->cookie, &v);
  napi_set_named_property(env, obj, "cookie", v);
  /* The kernel pads the name with NULs up to len. */
  napi_create_string_utf8(env, ev->len ? ev->name : "", ev->len ? strnlen(ev->name, ev->len) : 0, &v);
  napi_set_named_property(env, obj, "name", v);
  return obj;
}

static void on_readable(uv_poll_t *h, int status, int events) {
  (void)events;
  instance_t *in = h->data;
  if (in->closed) return;
  napi_handle_scope scope;
  napi_open_handle_scope(in->env, &scope);
  napi_value list;
  napi_create_array(in->env, &list);
  uint32_t count = 0;
  int failed = status < 0 ? -status : 0;
  static char buf[READ_BUFFER] __attribute__((aligned(__alignof__(struct inotify_event))));
  while (!failed) {
    ssize_t n = read(in->fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) failed = errno;
      break;
    }
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      napi_set_element(in->env, list, count++, event_object(in->env, ev));
      p += sizeof(struct inotify_event) + ev->len;
    }
  }
  if (count > 0) {
    napi_value argv[1] = {list};
    call_back(in, 1, argv);
  }
  if (failed && !in->closed) {
    napi_value argv[2];
    napi_get_null(in->env, &argv[0]);
    napi_create_int32(in->env, failed, &argv[1]);
    call_back(in, 2, argv);
  }
  napi_close_handle_scope(in->env, scope);
}

static napi_value throw_errno(napi_env env, int err, const char *syscall) {
  napi_value msg, code, error, num;
  char text[128];
  snprintf(text, sizeof text, "%s: %s", syscall, strerror(err));
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, NULL, msg, &error);
  /* A Node-style error: code names the errno, as fs errors do. */
  const char *name = err == ENOENT ? "ENOENT" : err == ENOTDIR ? "ENOTDIR" : err == ENOSPC ? "ENOSPC"
                   : err == EACCES ? "EACCES" : err == EMFILE ? "EMFILE" : err == ENOMEM ? "ENOMEM" : "EIO";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, -err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_throw(env, error);
  return NULL;
}

static instance_t *instance_arg(napi_env env, napi_value v) {
  void *data = NULL;
  if (napi_get_value_external(env, v, &data) != napi_ok || data == NULL) {
    napi_throw_type_error(env, NULL, "not an inotify handle");
    return NULL;
  }
  return data;
}

static napi_value Open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], external, name;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_valuetype t;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, NULL, "open(callback) wants a function");
    return NULL;
  }
  uv_loop_t *loop = NULL;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == NULL) return throw_errno(env, EINVAL, "uv loop");
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "inotify_init1");
  instance_t *in = calloc(1, sizeof *in);
  if (in == NULL) {
    close(fd);
    return throw_errno(env, ENOMEM, "calloc");
  }
  in->fd = fd;
  in->env = env;
  int r = uv_poll_init(loop, &in->poll, fd);
  if (r < 0) {
    close(fd);
    free(in);
    return throw_errno(env, -r, "uv_poll_init");
  }
  in->poll.data = in;
  uv_unref((uv_handle_t *)&in->poll);
  napi_create_reference(env, argv[0], 1, &in->callback);
  napi_value resource;
  napi_create_object(env, &resource);
  napi_create_string_utf8(env, "aenv.inotify", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, resource, name, &in->context);
  uv_poll_start(&in->poll, UV_READABLE, on_readable);
  napi_create_external(env, in, NULL, NULL, &external);
  return external;
}

static napi_value Add(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], out;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) {
    napi_throw_type_error(env, NULL, "add(handle, path, mask)");
    return NULL;
  }
  instance_t *in = instance_arg(env, argv[0]);
  if (in == NULL) return NULL;
  if (in->closed) return throw_errno(env, EBADF, "inotify_add_watch");
  char path[PATH_MAX];
  size_t len = 0;
  uint32_t mask = 0;
  if (napi_get_value_string_utf8(env, argv[1], path, sizeof path, &len) != napi_ok ||
      napi_get_value_uint32(env, argv[2], &mask) != napi_ok) {
    napi_throw_type_error(env, NULL, "add(handle, path: string, mask: number)");
    return NULL;
  }
  if (len >= sizeof path - 1) return throw_errno(env, ENAMETOOLONG, "inotify_add_watch");
  int wd = inotify_add_watch(in->fd, path, mask);
  if (wd < 0) return throw_errno(env, errno, "inotify_add_watch");
  napi_create_int32(env, wd, &out);
  return out;
}

static napi_value Remove(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2) return NULL;
  instance_t *in = instance_arg(env, argv[0]);
  int32_t wd = -1;
  if (in == NULL || in->closed || napi_get_value_int32(env, argv[1], &wd) != napi_ok) return NULL;
  inotify_rm_watch(in->fd, wd); /* EINVAL: the kernel dropped it already (IN_IGNORED) */
  return NULL;
}

static napi_value Close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1) return NULL;
  instance_t *in = instance_arg(env, argv[0]);
  if (in != NULL) shut(in);
  return NULL;
}

static void export_fn(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value v;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &v);
  napi_set_named_property(env, exports, name, v);
}

static napi_value Init(napi_env env, napi_value exports) {
  export_fn(env, exports, "open", Open);
  export_fn(env, exports, "add", Add);
  export_fn(env, exports, "remove", Remove);
  export_fn(env, exports, "close", Close);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
