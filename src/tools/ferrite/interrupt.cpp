#include "tools/ferrite/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "support/cleanup.h"

namespace ferrite::cli {

namespace {

// A plain thread rather than a signal handler: cleanup removes directory trees and waits for
// children, none of which is async-signal-safe. The thread never returns; it ends the process.
void signal_thread(sigset_t set) {
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  set_interrupt_signal(sig);
  cleanup_registered();
  const char msg[] = "error: interrupted\n";
  // write(2): stdio's locks may be held by the thread that was interrupted.
  if (::write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
  }
  ::_exit(128 + sig);
}

}  // namespace

void install_interrupt_handling() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
  std::thread(signal_thread, set).detach();
  set_interrupt_handling_installed();
}

}  // namespace ferrite::cli
