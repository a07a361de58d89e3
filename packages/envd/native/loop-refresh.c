/*
 * loop-refresh: gives Node's main libuv loop a fresh epoll instance holding exactly the loop's
 * current watchers (see src/loop-refresh.ts for why: a restored gVisor checkpoint can carry a dead
 * epoll interest that reports a hang-up for an old fd number forever).
 *
 * For every watcher libuv has registered (w->events != 0) the same events and data (the fd) are
 * added to a new instance, which then replaces the old one with dup3() onto the loop's backend fd:
 * the fd number libuv holds stays valid, and closing the old instance drops whatever else it held.
 * Watchers with a pending change are left to libuv, which registers them on its next poll (ADD
 * when events is 0, else MOD). Only the loop's own thread uses the backend fd (other threads wake
 * the loop through its eventfd, which is untouched), and this runs on that thread, from JavaScript.
 * Returns 0, or a negative errno with the old instance left in place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <uv.h>

static int refresh(uv_loop_t *loop) {
  int fresh = epoll_create1(EPOLL_CLOEXEC);
  if (fresh < 0) return -errno;
  for (unsigned int i = 0; i < loop->nwatchers; i++) {
    uv__io_t *w = loop->watchers[i];
    /* events = what libuv has registered; watchers with a pending change (queued) are
     * re-registered by libuv itself on its next poll, with ADD when events is 0, else MOD. */
    if (w == NULL || w->events == 0) continue;
    struct epoll_event e = {0};
    e.events = w->events;
    e.data.fd = w->fd;
    if (epoll_ctl(fresh, EPOLL_CTL_ADD, w->fd, &e) != 0) {
      int err = errno;
      close(fresh);
      return -err;
    }
  }
  if (dup3(fresh, loop->backend_fd, O_CLOEXEC) < 0) {
    int err = errno;
    close(fresh);
    return -err;
  }
  close(fresh);
  return 0;
}

static napi_value Refresh(napi_env env, napi_callback_info info) {
  (void)info;
  uv_loop_t *loop = NULL;
  napi_value out;
  int r = napi_get_uv_event_loop(env, &loop) == napi_ok && loop != NULL ? refresh(loop) : -EINVAL;
  napi_create_int32(env, r, &out);
  return out;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "refreshEventLoop", NAPI_AUTO_LENGTH, Refresh, NULL, &fn);
  napi_set_named_property(env, exports, "refreshEventLoop", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
