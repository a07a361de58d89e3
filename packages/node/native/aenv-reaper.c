/*
 * aenv-reaper [--hide-net-sysctl] [--merge-pages] LOG -- COMMAND [ARG...]
 *
 * Runs COMMAND (`runsc run|restore --detach`) with its stdout and stderr appended to LOG, and
 * stays behind as a child subreaper: the sandbox and gofer processes runsc leaves running are
 * re-parented to this process instead of to PID 1, and are reaped the moment they exit. An init
 * that reaps orphans late (seconds, on some hosts) would otherwise hold every killed sandbox as a
 * zombie, and `runsc delete` waits for it to disappear.
 *
 * When COMMAND exits, one line goes to stdout, "exit N" or "signal N", and stdout is closed. The
 * process exits once it has no children left. SIGTERM kills COMMAND (a timeout), not the sandbox.
 *
 * --hide-net-sysctl runs COMMAND in a private mount namespace with an empty tmpfs over
 * /proc/sys/net: runsc refuses --network=sandbox when it sees /proc/sys/net/core/rmem_default,
 * which some kernels show in every network namespace (see runsc.ts, wrapForNetSysctlQuirk).
 *
 * --merge-pages lets the kernel's same-page merging (KSM) scan COMMAND's anonymous memory and that
 * of every process it starts (the sentry and gofer; PR_SET_MEMORY_MERGE is kept across fork and
 * exec, Linux 6.4 and later).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif

static volatile pid_t command = -1;

static void on_term(int sig) {
  (void)sig;
  if (command > 0) kill(command, SIGKILL);
}

static void report(int status) {
  char line[32];
  int n = WIFEXITED(status) ? snprintf(line, sizeof line, "exit %d\n", WEXITSTATUS(status))
                            : snprintf(line, sizeof line, "signal %d\n", WTERMSIG(status));
  if (write(STDOUT_FILENO, line, (size_t)n) < 0) { /* the node is gone: nobody to tell */ }
  close(STDOUT_FILENO);
}

static int hide_net_sysctl(void) {
  if (unshare(CLONE_NEWNS) != 0) return -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  return mount("aenv-sysctl-net", "/proc/sys/net", "tmpfs", 0, "size=4k,mode=555");
}

int main(int argc, char **argv) {
  int hide = 0, merge = 0;
  for (; argc > 1 && strncmp(argv[1], "--", 2) == 0 && argv[1][2] != '\0'; argv++, argc--) {
    if (strcmp(argv[1], "--hide-net-sysctl") == 0) hide = 1;
    else if (strcmp(argv[1], "--merge-pages") == 0) merge = 1;
    else break;
  }
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: aenv-reaper [--hide-net-sysctl] [--merge-pages] LOG -- COMMAND [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("aenv-reaper: prctl(PR_SET_CHILD_SUBREAPER)");
    return 2;
  }
  int log = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    perror(argv[1]);
    return 2;
  }
  /* The node's terminal signals are for the node; sandboxes outlive it and are swept later. */
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction term = {0};
  term.sa_handler = on_term;
  sigaction(SIGTERM, &term, NULL);

  pid_t child = fork();
  if (child < 0) {
    perror("aenv-reaper: fork");
    return 2;
  }
  if (child == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(log, STDOUT_FILENO) < 0 ||
        dup2(log, STDERR_FILENO) < 0) {
      perror("aenv-reaper: redirect");
      _exit(127);
    }
    if (hide && hide_net_sysctl() != 0) {
      perror("aenv-reaper: hiding /proc/sys/net");
      _exit(126);
    }
    if (merge && prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0) {
      perror("aenv-reaper: prctl(PR_SET_MEMORY_MERGE)");
      _exit(126);
    }
    execvp(argv[3], argv + 3);
    perror(argv[3]);
    _exit(127);
  }
  command = child;
  close(log);
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: everything it adopted is gone */
    }
    if (pid == child) {
      command = -1;
      report(status);
    }
  }
  return 0;
}
