/*
 * aenv-volfs ROOT OP PATH [ARG...]
 *
 * One operation of the volume content API on PATH (relative to the volume directory ROOT, "."
 * for ROOT itself), confined to ROOT while sandboxes may change the volume under it: every path
 * is resolved with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
 * RESOLVE_NO_XDEV) from a descriptor of ROOT, and the operation then acts on descriptors (or on
 * one name inside a held directory descriptor), so no path is resolved again between check and
 * act and no link is ever followed. A directory swapped for a symlink mid-operation makes the
 * operation fail (ELOOP), never reach outside.
 *
 *   stat PATH                        one entry
 *   list PATH DEPTH MAX              entries below PATH, DEPTH levels, at most MAX
 *   usage PATH                       {"used":N}: apparent bytes of the regular files below PATH
 *   mkdir PATH UID GID MODE PARENTS  PARENTS=1 creates missing parents (UID/GID 1000, 0755)
 *   chmeta PATH UID GID MODE         -1 leaves a field as it is
 *   read PATH                        a line {"size":N}, then the file's N bytes
 *   write PATH TMP UID GID MODE      stdin into the new file TMP beside PATH (parents created)
 *   commit PATH TMP                  TMP renamed over PATH: a write's second step, taken only once
 *                                    the upload is known complete (EOF alone may be an abort)
 *   remove PATH                      recursively
 *
 * Success: JSON on stdout, exit 0. Failure: {"error":"ENOENT","at":"parent"|"target"} on stdout,
 * exit 1: the errno's name ("NOTREG": read of a non-regular file), and whether the failing name is
 * PATH itself or one of its parents.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CONFINED (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define UPLOAD_PREFIX ".aenv-upload-"
#define DEFAULT_ID 1000

static int root_fd = -1;

static void fail_as(const char *error, const char *at) {
  printf("{\"error\":\"%s\",\"at\":\"%s\"}\n", error, at);
  exit(1);
}

static void fail(int err, const char *at) { fail_as(strerrorname_np(err) ? strerrorname_np(err) : "EIO", at); }

/* `name` beneath `dir`, never through a symlink, a magic link, `..` out of it or a mount. */
static int open_beneath(int dir, const char *name, int flags) {
  struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC), .resolve = CONFINED};
  int fd;
  do fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof how);
  while (fd < 0 && errno == EAGAIN);
  return fd;
}

/* Splits "a/b/c" into its parent "a/b" (or ".") and last name "c", in place. */
static const char *split(char *path, const char **name) {
  char *slash = strrchr(path, '/');
  if (!slash) {
    *name = path;
    return ".";
  }
  *slash = '\0';
  *name = slash + 1;
  return path;
}

/* The uid/gid and permission bits of an O_PATH descriptor (which fchmod does not take). */
static int set_owner_mode(int fd, long uid, long gid, long mode) {
  if ((uid >= 0 || gid >= 0) && fchownat(fd, "", (uid_t)uid, (gid_t)gid, AT_EMPTY_PATH) < 0) return -1;
  if (mode < 0) return 0;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  return chmod(proc, (mode_t)(mode & 07777));
}

static void json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') printf("\\%c", *p);
    else if (*p < 0x20) printf("\\u%04x", *p);
    else putchar(*p);
  }
  putchar('"');
}

static long long ms(struct timespec t) { return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000; }

/* One entry as JSON; `shown` is its path within the volume. */
static void print_entry(int dir, const char *name, const char *shown, const struct stat *st) {
  const char *type = S_ISREG(st->st_mode)   ? "file"
                     : S_ISDIR(st->st_mode) ? "directory"
                     : S_ISLNK(st->st_mode) ? "symlink"
                                            : "unknown";
  printf("{\"path\":");
  json_string(shown);
  printf(",\"type\":\"%s\",\"size\":%lld,\"mode\":%u,\"uid\":%u,\"gid\":%u,", type, (long long)st->st_size,
         st->st_mode & 07777, st->st_uid, st->st_gid);
  printf("\"atimeMs\":%lld,\"mtimeMs\":%lld,\"ctimeMs\":%lld", ms(st->st_atim), ms(st->st_mtim), ms(st->st_ctim));
  if (S_ISLNK(st->st_mode)) {
    char target[4097];
    ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
    if (n >= 0) {
      target[n] = '\0';
      printf(",\"target\":");
      json_string(target);
    }
  }
  putchar('}');
}

static int open_parent(char *path, const char **name) {
  const char *parent = split(path, name);
  int fd = open_beneath(root_fd, parent, O_PATH | O_DIRECTORY);
  if (fd < 0) fail(errno, "parent");
  return fd;
}

static void shown_path(char *out, size_t size, const char *rel) {
  snprintf(out, size, "/%s", strcmp(rel, ".") ? rel : "");
}

static int op_stat(char *path) {
  char shown[8192];
  shown_path(shown, sizeof shown, path);
  struct stat st;
  if (!strcmp(path, ".")) {
    if (fstat(root_fd, &st) < 0) fail(errno, "target");
    print_entry(root_fd, ".", shown, &st);
  } else {
    const char *name;
    int dir = open_parent(path, &name);
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) fail(errno, "target");
    print_entry(dir, name, shown, &st);
  }
  putchar('\n');
  return 0;
}

static long listed;

static void list_dir(int dir, const char *shown, int depth, long max) {
  DIR *d = fdopendir(dup(dir));
  if (!d) fail(errno, "target");
  struct dirent *e;
  while ((e = readdir(d)) && listed < max) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (!strncmp(e->d_name, UPLOAD_PREFIX, strlen(UPLOAD_PREFIX))) continue;
    struct stat st;
    if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue; /* gone meanwhile */
    char child[8192];
    snprintf(child, sizeof child, "%s/%s", strcmp(shown, "/") ? shown : "", e->d_name);
    printf("%s", listed++ ? "," : "");
    print_entry(dir, e->d_name, child, &st);
    if (!S_ISDIR(st.st_mode) || depth <= 1) continue;
    int sub = open_beneath(dir, e->d_name, O_RDONLY | O_DIRECTORY);
    if (sub < 0) continue; /* replaced by a non-directory meanwhile */
    list_dir(sub, child, depth - 1, max);
    close(sub);
  }
  closedir(d);
}

static int op_list(char *path, int depth, long max) {
  char shown[8192];
  shown_path(shown, sizeof shown, path);
  int dir = open_beneath(root_fd, path, O_RDONLY | O_DIRECTORY);
  if (dir < 0) fail(errno, "target");
  putchar('[');
  list_dir(dir, shown, depth, max);
  printf("]\n");
  return 0;
}

static long long usage_of(int dir) {
  long long total = 0;
  DIR *d = fdopendir(dup(dir));
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (S_ISREG(st.st_mode)) total += st.st_size;
    if (!S_ISDIR(st.st_mode)) continue;
    int sub = open_beneath(dir, e->d_name, O_RDONLY | O_DIRECTORY);
    if (sub < 0) continue;
    total += usage_of(sub);
    close(sub);
  }
  closedir(d);
  return total;
}

static int op_usage(char *path) {
  int dir = open_beneath(root_fd, path, O_RDONLY | O_DIRECTORY);
  if (dir < 0) fail(errno, "target");
  printf("{\"used\":%lld}\n", usage_of(dir));
  return 0;
}

/* The directory `name` in `dir`, created (owned by the sandboxes' default user) when missing. */
static int open_or_make_dir(int dir, const char *name) {
  int fd = open_beneath(dir, name, O_PATH | O_DIRECTORY);
  if (fd >= 0 || errno != ENOENT) return fd;
  if (mkdirat(dir, name, 0700) < 0 && errno != EEXIST) return -1;
  fd = open_beneath(dir, name, O_PATH | O_DIRECTORY);
  if (fd >= 0 && set_owner_mode(fd, DEFAULT_ID, DEFAULT_ID, 0755) < 0) return -1;
  return fd;
}

/* The parent of PATH, its missing ancestors created when `make` is set. */
static int parent_dir(char *path, const char **name, int make) {
  if (!make) return open_parent(path, name);
  const char *parent = split(path, name);
  int dir = dup(root_fd);
  char copy[8192], *save = NULL;
  snprintf(copy, sizeof copy, "%s", parent);
  for (char *seg = strtok_r(copy, "/", &save); seg && strcmp(parent, "."); seg = strtok_r(NULL, "/", &save)) {
    int next = open_or_make_dir(dir, seg);
    if (next < 0) fail(errno, "parent");
    close(dir);
    dir = next;
  }
  return dir;
}

static int op_mkdir(char *path, long uid, long gid, long mode, int parents) {
  char shown[8192];
  shown_path(shown, sizeof shown, path);
  const char *name;
  int dir = parent_dir(path, &name, parents);
  if (mkdirat(dir, name, 0700) < 0) fail(errno, "target");
  int fd = open_beneath(dir, name, O_PATH | O_DIRECTORY);
  struct stat st;
  if (fd < 0 || set_owner_mode(fd, uid, gid, mode) < 0 || fstat(fd, &st) < 0) fail(errno, "target");
  print_entry(dir, name, shown, &st);
  putchar('\n');
  return 0;
}

static int op_chmeta(char *path, long uid, long gid, long mode) {
  char shown[8192];
  shown_path(shown, sizeof shown, path);
  int fd = open_beneath(root_fd, path, O_PATH);
  struct stat st;
  if (fd < 0 || set_owner_mode(fd, uid, gid, mode) < 0 || fstat(fd, &st) < 0) fail(errno, "target");
  print_entry(fd, "", shown, &st);
  putchar('\n');
  return 0;
}

static int copy_out(int from, off_t size) {
  char buf[65536];
  while (size > 0) {
    ssize_t n = read(from, buf, (size_t)(size < (off_t)sizeof buf ? size : (off_t)sizeof buf));
    if (n <= 0) return n < 0 ? -1 : 0; /* shrunk meanwhile: the reader sees a short body */
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
      if (w < 0) return -1;
      off += w;
    }
    size -= n;
  }
  return 0;
}

static int op_read(char *path) {
  int fd = open_beneath(root_fd, path, O_PATH);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) fail(errno, "target");
  if (!S_ISREG(st.st_mode)) fail_as("NOTREG", "target");
  /* Reopened through the descriptor itself: the inode checked is the one read. */
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  int in = open(proc, O_RDONLY | O_CLOEXEC);
  if (in < 0) fail(errno, "target");
  printf("{\"size\":%lld}\n", (long long)st.st_size);
  fflush(stdout);
  return copy_out(in, st.st_size) < 0 ? 1 : 0;
}

static int copy_in(int to) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0) return 0;
    if (n < 0) return -1;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(to, buf + off, (size_t)(n - off));
      if (w < 0) return -1;
      off += w;
    }
  }
}

static int op_write(char *path, const char *tmp, long uid, long gid, long mode) {
  const char *name;
  int dir = parent_dir(path, &name, 1);
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) fail(EISDIR, "target");
  int out = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) fail(errno, "target");
  int err = copy_in(out) < 0 || fchown(out, (uid_t)uid, (gid_t)gid) < 0 || fchmod(out, (mode_t)(mode & 07777)) < 0
                ? errno
                : 0;
  if (close(out) < 0 && !err) err = errno;
  if (err) {
    unlinkat(dir, tmp, 0);
    fail(err, "target");
  }
  printf("{}\n");
  return 0;
}

static int op_commit(char *path, const char *tmp) {
  char shown[8192];
  shown_path(shown, sizeof shown, path);
  const char *name;
  int dir = open_parent(path, &name);
  struct stat st;
  if (renameat(dir, tmp, dir, name) < 0 || fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) fail(errno, "target");
  print_entry(dir, name, shown, &st);
  putchar('\n');
  return 0;
}

/* Empties the directory `dir`, through descriptors only (a name is never resolved twice). */
static int remove_contents(int dir) {
  DIR *d = fdopendir(dup(dir));
  if (!d) return -1;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (unlinkat(dir, e->d_name, 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR) {
      rc = -1;
      continue;
    }
    int sub = open_beneath(dir, e->d_name, O_RDONLY | O_DIRECTORY);
    if (sub < 0 || remove_contents(sub) < 0 || unlinkat(dir, e->d_name, AT_REMOVEDIR) < 0) rc = -1;
    if (sub >= 0) close(sub);
  }
  closedir(d);
  return rc;
}

static int op_remove(char *path) {
  const char *name;
  int dir = open_parent(path, &name);
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) fail(errno, "target");
  if (unlinkat(dir, name, 0) == 0) return printf("{}\n"), 0;
  if (errno != EISDIR) fail(errno, "target");
  /* Sandboxes may add files while it is emptied: a few passes, then the error. */
  for (int pass = 0;; pass++) {
    int sub = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (sub < 0) fail(errno, "target");
    int emptied = remove_contents(sub);
    close(sub);
    if (unlinkat(dir, name, AT_REMOVEDIR) == 0) break;
    if (pass == 4 || (emptied == 0 && errno != ENOTEMPTY)) fail(errno, "target");
  }
  printf("{}\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: aenv-volfs ROOT OP PATH [ARG...]\n");
    return 2;
  }
  root_fd = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) fail(errno, "root");
  const char *op = argv[2];
  char *path = argv[3];
#define ARG(i) (argc > (i) ? strtol(argv[i], NULL, 10) : -1)
  if (!strcmp(op, "stat")) return op_stat(path);
  if (!strcmp(op, "list") && argc == 6) return op_list(path, (int)ARG(4), ARG(5));
  if (!strcmp(op, "usage")) return op_usage(path);
  if (!strcmp(op, "mkdir") && argc == 8) return op_mkdir(path, ARG(4), ARG(5), ARG(6), (int)ARG(7));
  if (!strcmp(op, "chmeta") && argc == 7) return op_chmeta(path, ARG(4), ARG(5), ARG(6));
  if (!strcmp(op, "read")) return op_read(path);
  if (!strcmp(op, "write") && argc == 8) return op_write(path, argv[4], ARG(5), ARG(6), ARG(7));
  if (!strcmp(op, "commit") && argc == 5) return op_commit(path, argv[4]);
  if (!strcmp(op, "remove")) return op_remove(path);
  fprintf(stderr, "aenv-volfs: unknown operation %s\n", op);
  return 2;
}
