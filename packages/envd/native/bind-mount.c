/*
 * bind-mount: bindMountReadOnly(source, target) bind-mounts one file or directory over another in
 * envd's mount namespace (the sandbox's: envd is its first process), then makes that mount
 * read-only, so only a writer of `source` (envd, as root) changes what `target` reads; when the
 * read-only remount fails the bind is undone. bindMount(source, target) binds it read-write (a
 * volume at its path). Node has no mount(2), and an image need not ship mount(8). Both return 0,
 * or a negative errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <node_api.h>
#include <sys/mount.h>

#define PATH_BYTES 4096

static int path_arg(napi_env env, napi_value v, char *buf) {
  size_t n = 0;
  if (napi_get_value_string_utf8(env, v, buf, PATH_BYTES, &n) != napi_ok) return -EINVAL;
  return n + 1 < PATH_BYTES ? 0 : -ENAMETOOLONG;
}

static int bind_read_only(const char *source, const char *target) {
  if (mount(source, target, NULL, MS_BIND, NULL) != 0) return -errno;
  if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
    int err = errno;
    umount2(target, MNT_DETACH);
    return -err;
  }
  return 0;
}

static int bind_read_write(const char *source, const char *target) {
  return mount(source, target, NULL, MS_BIND, NULL) == 0 ? 0 : -errno;
}

/* Calls bind(source, target) with the two path arguments of the call. */
static napi_value call_bind(napi_env env, napi_callback_info info, int (*bind)(const char *, const char *)) {
  size_t argc = 2;
  napi_value argv[2];
  char source[PATH_BYTES], target[PATH_BYTES];
  int r = -EINVAL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc == 2) {
    r = path_arg(env, argv[0], source);
    if (r == 0) r = path_arg(env, argv[1], target);
    if (r == 0) r = bind(source, target);
  }
  napi_value out;
  napi_create_int32(env, r, &out);
  return out;
}

static napi_value BindMountReadOnly(napi_env env, napi_callback_info info) {
  return call_bind(env, info, bind_read_only);
}

static napi_value BindMount(napi_env env, napi_callback_info info) {
  return call_bind(env, info, bind_read_write);
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "bindMountReadOnly", NAPI_AUTO_LENGTH, BindMountReadOnly, NULL, &fn);
  napi_set_named_property(env, exports, "bindMountReadOnly", fn);
  napi_create_function(env, "bindMount", NAPI_AUTO_LENGTH, BindMount, NULL, &fn);
  napi_set_named_property(env, exports, "bindMount", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
